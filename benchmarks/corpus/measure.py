"""Ground truth for the corpus, on a GPU: record each driver's launches, then time every one of them.

    python benchmarks/corpus/measure.py record  [LIB ...]   # advisor record each driver -> data/traces/
    python benchmarks/corpus/measure.py compile [LIB ...]   # compile every variant, in parallel workers
    python benchmarks/corpus/measure.py time    [LIB ...]   # time them, one at a time -> data/timings.csv

`record` runs `python -m advisor.cli record` on each `drive_<lib>.py` with the extra capture of
`capture_extras` (small integer tensors' values, every autotune config with its grid) and with the
autotuners made to take the first config that runs (CORPUS_FORCE_FIRST=1), so recording compiles one
config per kernel. `compile` then compiles every variant of every launch in parallel processes, which
fills Triton's cache; `time` finds them there.

Timing, for each distinct recorded launch (every launch's recorded config in a first pass, the
variants in a second): the recorded config first (its outputs are the reference), then each variant
(autotuned kernels: every config of their list; others: num_warps halved and doubled,
num_stages one less and one more). Before each, the inputs are restored; after one launch every tensor
must match the reference (floating tensors within a relative error of `tol`, integer ones on all but
1% of elements: index outputs over bf16 values can break ties either way); a variant that does not is
recorded as `wrong`, not timed. Time = median of 20 CUDA-graph replays after warm-up, each replay
holding enough launches to last ~0.5 ms (at most 20), L2 not flushed. Resumable: rows already in the
CSV are skipped, and a launch that was running when a process died is recorded as `crashed` and not
tried again.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT)]

from replay import (
    DATA,
    LIBRARIES,
    Case,
    accumulated,
    arguments,
    extras_path,
    kernel_function,
    load_cases,
    make_tensors,
    runner,  # noqa: E402
    stored,
    trace_path,
)

# CORPUS_KERNELS: only these kernels' launches (comma-separated names), e.g. to time them again into another file.
# CORPUS_LAUNCHES: only these launch ids (comma-separated), each with the variants the whole run would time.
# CORPUS_TIMINGS: another file (a held-out library's, or a second GPU's, kept apart from the H100 corpus rows)
TIMINGS = Path(os.environ["CORPUS_TIMINGS"]) if os.environ.get("CORPUS_TIMINGS") else DATA / "timings.csv"
LOGS = DATA / "logs"
INFLIGHT = LOGS / "inflight.json"
COLUMNS = ["library", "launch_id", "index", "kernel", "recorded", "config", "grid", "status", "us", "min_us",
           "max_us", "launches_per_sample", "replays", "first_launch_ms", "rel_err", "int_mismatch", "note"]
TARGET_REPLAY_US = 500.0


# ----------------------------------------------------------------------------------------------------
# record
# ----------------------------------------------------------------------------------------------------
def record(libraries: list[str], timeout: float) -> None:
    """Record every driver at once: recording is compile-bound and each process compiles on its own core."""
    (DATA / "traces").mkdir(parents=True, exist_ok=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    start, procs = time.time(), {}
    for lib in libraries:
        env = dict(os.environ, CORPUS_EXTRAS=str(extras_path(lib)), CORPUS_FORCE_FIRST="1",
                   PYTHONUNBUFFERED="1")
        command = [sys.executable, "-m", "advisor.cli", "record", "--out", str(trace_path(lib)), "--",
                   sys.executable, str(HERE / f"drive_{lib}.py")]
        log = open(LOGS / f"record_{lib}.log", "w")
        procs[lib] = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True)
    for lib, p in procs.items():
        try:
            rc = p.wait(timeout=max(1.0, start + timeout - time.time()))
        except subprocess.TimeoutExpired:
            # Ctrl-C to the driver and its recorder (their own process group): the driver stops, its exit
            # handlers save the launches and extras so far, and the recorder writes the trace.
            os.killpg(p.pid, signal.SIGINT)
            try:
                rc = p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                rc = "killed"
            rc = f"timeout ({rc})"
        tail = (LOGS / f"record_{lib}.log").read_text().strip().splitlines()[-3:]
        print(f"record {lib}: exit {rc} after {time.time() - start:.0f} s; " + " | ".join(tail), flush=True)


# ----------------------------------------------------------------------------------------------------
# compile
# ----------------------------------------------------------------------------------------------------
def work_items(libraries: list[str], per_kernel: int, limit: int = 40) -> list[tuple[Case, list]]:
    """(case, variants) for every recorded launch; past `per_kernel` launches of one kernel, only the
    recorded config (a kernel called with a step counter would otherwise repeat its whole list).
    `per_kernel` 0: the recorded config of every launch only. `limit`: variants per launch at most (the
    recorded config, then the list in its order)."""
    items, seen = [], {}
    only = {k for k in os.environ.get("CORPUS_KERNELS", "").split(",") if k}  # a re-run of some kernels' rows
    launches = {k for k in os.environ.get("CORPUS_LAUNCHES", "").split(",") if k}
    for lib in libraries:
        if not stored(trace_path(lib)):
            continue
        for case in load_cases(lib):
            if only and case.kernel not in only:
                continue
            n = seen[(lib, case.kernel)] = seen.get((lib, case.kernel), 0) + 1
            if launches and case.id not in launches:  # counted first: a launch keeps the variants it had
                continue
            variants = case.variants(limit)
            items.append((case, variants if n <= per_kernel else variants[:1]))
    return items


def compile_all(libraries: list[str], jobs: int, per_kernel: int, limit: int, timeout: float) -> None:
    LOGS.mkdir(parents=True, exist_ok=True)
    start = time.time()
    procs = [subprocess.Popen([sys.executable, __file__, "compile-worker", *libraries, "--shard", str(i),
                               "--of", str(jobs), "--per-kernel", str(per_kernel), "--limit", str(limit)],
                              stdout=open(LOGS / f"compile_{i}.log", "w"), stderr=subprocess.STDOUT)
             for i in range(jobs)]
    deadline = start + timeout
    for p in procs:
        try:
            p.wait(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
    done = failed = 0
    for i in range(jobs):
        for line in (LOGS / f"compile_{i}.log").read_text().splitlines():
            if line.startswith("compiled "):
                done += int(line.split()[1])
                failed += int(line.split()[3])
    print(f"compile: {done} variants compiled, {failed} failed, {time.time() - start:.0f} s, {jobs} workers",
          flush=True)


def compile_worker(libraries: list[str], shard: int, of: int, per_kernel: int, limit: int) -> None:
    import torch

    done = _done_rows()  # timed already: only the recorded config is compiled again (for ncu)
    pairs = [(case, v) for case, variants in work_items(libraries, per_kernel, limit) for v in variants
             if v.recorded or (case.id, v.label) not in done]
    done = failed = 0
    for case, variant in pairs[shard::of]:
        try:
            fn = kernel_function(case)
            tensors = {}
            for t in case.entry.get("tensors", []):
                dtype = getattr(torch, t["dtype"])
                if t.get("block_shape") is not None:
                    tensors.update(make_tensors(Case(case.library, case.index, {"tensors": [t]}, {})))
                else:  # only the pointer's dtype and 16-byte alignment specialise the kernel
                    tensors[t["name"]] = torch.empty(16, dtype=dtype, device="cuda")
            fn.warmup(grid=tuple(variant.grid), **arguments(fn, case, variant, tensors))
            done += 1
        except Exception as exc:
            failed += 1
            print(f"fail {case.library} {case.kernel} {variant.label}: {type(exc).__name__}: "
                  f"{str(exc).splitlines()[0][:200] if str(exc) else ''}", flush=True)
    print(f"compiled {done} failed {failed}", flush=True)


# ----------------------------------------------------------------------------------------------------
# time
# ----------------------------------------------------------------------------------------------------
def _done_rows() -> set[tuple[str, str]]:
    if not TIMINGS.exists():
        return set()
    with open(TIMINGS) as fh:
        return {(r["launch_id"], r["config"]) for r in csv.DictReader(fh)}


def _writer():
    new = not TIMINGS.exists()
    fh = open(TIMINGS, "a", newline="")
    w = csv.DictWriter(fh, COLUMNS)
    if new:
        w.writeheader()
    return fh, w


def _base(t):
    return getattr(t, "base", t) if type(t).__name__ == "TensorDescriptor" else t


def compare(work: dict, reference: dict, tol: float) -> tuple[bool, float, float]:
    """(matches, worst relative error of floating tensors, worst mismatch fraction of integer ones)."""
    import torch

    worst_err, worst_int = 0.0, 0.0
    for name, ref in reference.items():
        out = _base(work[name])
        if ref.numel() == 0:
            continue
        if ref.dtype.is_floating_point:
            a, b = out.float(), ref.float()
            fa, fb = torch.isfinite(a), torch.isfinite(b)
            if int((fa != fb).sum()) > max(1, ref.numel() // 1000):
                return False, float("inf"), worst_int
            both = fa & fb
            diff = torch.where(both, a - b, 0.0)
            denom = float(torch.linalg.vector_norm(torch.where(both, b, 0.0)))
            err = float(torch.linalg.vector_norm(diff)) / (denom if denom > 0 else 1.0)
            worst_err = max(worst_err, err)
            del a, b, diff
        else:
            worst_int = max(worst_int, float((out != ref).sum()) / ref.numel())
    return worst_err <= tol and worst_int <= 0.01, worst_err, worst_int


def mismatch_note(work: dict, reference: dict) -> str:
    """Which tensors a wrong config's run left unlike the reference's, and how: the note of a `wrong` row."""
    import torch

    parts = []
    for name, ref in reference.items():
        out = _base(work[name])
        if ref.numel() == 0 or torch.equal(out, ref):
            continue
        if ref.dtype.is_floating_point:
            a, b = out.float(), ref.float()
            fa, fb = torch.isfinite(a), torch.isfinite(b)
            parts.append(f"{name}: {int((a != b).sum())} of {ref.numel()} differ, non-finite {int((~fa).sum())} "
                         f"(reference {int((~fb).sum())})")
        else:
            parts.append(f"{name}: {int((out != ref).sum())} of {ref.numel()} differ")
    return "; ".join(parts)[:300]


def time_one(go) -> dict:
    from advisor.measure.timing import one_launch_us, time_launch

    single = one_launch_us(go, least_us=1.0)
    per_graph = int(min(20, max(1, round(TARGET_REPLAY_US / single))))
    t = time_launch(go, launches_per_graph=per_graph, replays=20, warmup=2)
    return {"us": f"{t.us:.3f}", "min_us": f"{t.min_us:.3f}", "max_us": f"{t.max_us:.3f}",
            "launches_per_sample": t.launches_per_sample, "replays": t.replays}


def time_case(case: Case, variants: list, done: set, writer, fh, tol: float) -> None:
    import torch

    todo = [v for v in variants if (case.id, v.label) not in done]
    if not todo:
        return
    row0 = {"library": case.library, "launch_id": case.id, "index": case.index, "kernel": case.kernel}
    try:
        fn = kernel_function(case)
        pristine = make_tensors(case, zeroed=accumulated(case))
        work = make_tensors(case)  # the same seed: equal values in the launch's own strides
    except Exception as exc:
        for v in todo:
            writer.writerow({**row0, "recorded": int(v.recorded), "config": v.label, "grid": v.grid,
                             "status": "error", "note": f"setup: {type(exc).__name__}: {str(exc)[:200]}"})
        fh.flush()
        return
    reference: dict = {}
    for v in variants:  # the recorded config first: it sets the reference even when already timed
        already = (case.id, v.label) in done
        if already and reference:
            continue
        INFLIGHT.write_text(json.dumps({"launch_id": case.id, "config": v.label, "library": case.library,
                                        "index": case.index, "kernel": case.kernel}))
        row = {**row0, "recorded": int(v.recorded), "config": v.label, "grid": v.grid}
        try:
            for name, t in pristine.items():  # whole storages: a broadcast view (stride 0) takes no copy_
                _base(work[name]).untyped_storage().copy_(_base(t).untyped_storage())
            go = runner(fn, case, v, work)
            t0 = time.perf_counter()
            go()
            torch.cuda.synchronize()
            row["first_launch_ms"] = f"{(time.perf_counter() - t0) * 1e3:.1f}"
            if not reference:
                reference = {name: _base(t).clone() for name, t in work.items()}
                ok, err, mismatch = True, 0.0, 0.0
                if already:
                    continue
                if not v.recorded:
                    row["note"] = "reference: the recorded config did not run"
            else:
                ok, err, mismatch = compare(work, reference, tol)
            row.update(rel_err=f"{err:.3g}", int_mismatch=f"{mismatch:.3g}")
            if not ok:
                row.update(status="wrong", note=mismatch_note(work, reference))
            else:
                row.update(time_one(go), status="ok")
        except Exception as exc:
            first = str(exc).splitlines()[0][:200] if str(exc) else ""
            row.update(status="error", note=f"{type(exc).__name__}: {first}")
            torch.cuda.synchronize()
        if not already:
            writer.writerow(row)
            fh.flush()
            done.add((case.id, v.label))
    INFLIGHT.unlink(missing_ok=True)
    del pristine, work, reference
    torch.cuda.empty_cache()


def time_all(libraries: list[str], per_kernel: int, limit: int, deadline: float, tol: float) -> None:
    LOGS.mkdir(parents=True, exist_ok=True)
    done = _done_rows()
    fh, writer = _writer()
    crashed = set()
    if INFLIGHT.exists():  # the last process died on this launch: record it and never run it again
        info = json.loads(INFLIGHT.read_text())
        crashed.add(info["launch_id"])
        writer.writerow({**{k: info[k] for k in ("library", "launch_id", "index", "kernel")}, "recorded": "",
                         "config": info["config"], "status": "crashed",
                         "note": "the timing process died during this launch"})
        fh.flush()
        INFLIGHT.unlink()
    if TIMINGS.exists():
        with open(TIMINGS) as f:
            crashed |= {r["launch_id"] for r in csv.DictReader(f) if r["status"] == "crashed"}
    start, cases = time.time(), 0
    items = [(case, variants) for case, variants in work_items(libraries, per_kernel, limit) if case.id not in crashed]
    # Every launch's recorded config first, then the variants: a deadline (or a variant that takes a minute
    # to compile) then cuts variants, not launches.
    try:
        for todo in ([(case, variants[:1]) for case, variants in items], items):
            for case, variants in todo:
                if time.time() - start > deadline:
                    raise TimeoutError
                time_case(case, variants, done, writer, fh, tol)
                cases += 1
    except TimeoutError:
        print(f"time: deadline reached after {cases} launch passes; run again to go on", flush=True)
    except KeyboardInterrupt:  # stopped from outside: the launch under way did not crash, try it again next time
        INFLIGHT.unlink(missing_ok=True)
        print("time: interrupted; run again to go on", flush=True)
    fh.close()
    print(f"time: {cases} launches in {time.time() - start:.0f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["record", "compile", "compile-worker", "time"])
    parser.add_argument("libraries", nargs="*", default=list(LIBRARIES))
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    parser.add_argument("--shard", type=int, default=0)
    parser.add_argument("--of", type=int, default=1)
    parser.add_argument("--per-kernel", type=int, default=4, help="launches of one kernel whose variants are timed")
    parser.add_argument("--limit", type=int, default=40, help="variants of one launch at most")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds for each record, or for compile")
    parser.add_argument("--deadline", type=float, default=300.0, help="seconds of timing before stopping")
    parser.add_argument("--tol", type=float, default=5e-2, help="relative error a variant's outputs may have")
    a = parser.parse_args()
    if a.step == "record":
        record(a.libraries, a.timeout)
    elif a.step == "compile":
        compile_all(a.libraries, a.jobs, a.per_kernel, a.limit, a.timeout)
    elif a.step == "compile-worker":
        compile_worker(a.libraries, a.shard, a.of, a.per_kernel, a.limit)
    else:
        time_all(a.libraries, a.per_kernel, a.limit, a.deadline, a.tol)


if __name__ == "__main__":
    main()
