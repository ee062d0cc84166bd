"""Nsight Compute on corpus launches: per-pipeline instruction counts, DRAM and L2 bytes, duration.

    python benchmarks/corpus/ncu.py plan [--per-library N]   # pick launches -> data/ncu_plan.json
    python benchmarks/corpus/ncu.py run  [--chunk N]         # profile them -> data/ncu.csv

`plan` takes the recorded config of distinct launches, spread over each library's kernels (one launch
of every kernel first, then a second, ...), and adds them to the plan. `run` replays the planned launches
in chunks under `ncu --clock-control none` (the card's clocks as they are, like the timings), each launch
once, with ncu told to profile only kernels of the chunk's names (the inputs are made by other kernels,
which are not profiled); the k-th profiled kernel is the k-th launch the replay completed, and its name
is checked. Resumable: launches already in data/ncu.csv are skipped.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import time
from itertools import zip_longest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT)]

from replay import DATA, LIBRARIES, kernel_function, load_cases, make_tensors, runner, stored, trace_path  # noqa: E402

PLAN = DATA / "ncu_plan.json"
RESULT = DATA / "ncu.csv"
ORDER = DATA / "logs" / "ncu_order.json"
RAW = DATA / "logs" / "ncu_raw.csv"
# Per-pipeline instruction counts (Nsight Compute's pipe names; a Hopper warpgroup MMA counts twice per
# warp, see benchmarks/ncu_pipes.py), then bytes, time and launch resources.
METRICS = [f"sm__inst_executed_pipe_{p}.sum" for p in (
    "tensor", "tensor_op_gmma", "tensor_op_hmma", "fma", "fmaheavy", "alu", "xu", "lsu", "adu", "uniform", "cbu",
    "tma")] + [
    "sm__inst_executed.sum", "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum",
    "gpu__time_duration.sum", "launch__registers_per_thread", "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic", "launch__grid_size", "launch__block_size"]


def plan(libraries: list[str], per_library: int) -> None:
    chosen = json.loads(PLAN.read_text()) if PLAN.exists() else []
    chosen = [c for c in chosen if c["library"] not in libraries]
    for lib in libraries:
        if not stored(trace_path(lib)):
            continue
        by_kernel: dict[str, list] = {}
        for case in load_cases(lib):
            by_kernel.setdefault(case.kernel, []).append(case)
        picked, depth = [], 0
        while len(picked) < per_library and any(len(v) > depth for v in by_kernel.values()):
            picked += [v[depth] for v in by_kernel.values() if len(v) > depth][: per_library - len(picked)]
            depth += 1
        chosen += [{"library": c.library, "launch_id": c.id, "index": c.index, "kernel": c.kernel} for c in picked]
    PLAN.write_text(json.dumps(chosen, indent=1))
    print(f"ncu plan: {len(chosen)} launches in all", flush=True)


def replay(todo: list[dict]) -> None:
    """Launch each planned launch once inside the NVTX range the profiler includes (run under ncu)."""
    import torch

    cases = {}
    for lib in {t["library"] for t in todo}:
        cases.update({(lib, c.id): c for c in load_cases(lib)})
    done = []
    for item in todo:
        case = cases.get((item["library"], item["launch_id"]))
        if case is None:
            continue
        tensors = None
        try:
            fn = kernel_function(case)
            tensors = make_tensors(case)
            go = runner(fn, case, case.recorded_variant(), tensors)
            torch.cuda.synchronize()
            go()
            torch.cuda.synchronize()
            done.append(item)
        except Exception as exc:
            print(f"ncu replay: {item['kernel']} failed: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        del tensors
        torch.cuda.empty_cache()
    ORDER.write_text(json.dumps(done))


def _done() -> set[str]:
    if not RESULT.exists():
        return set()
    with open(RESULT) as fh:
        return {r["launch_id"] for r in csv.DictReader(fh)}


def _metrics() -> list[str]:
    """The metrics this machine's ncu knows (checked once with --query-metrics, kept in data/logs)."""
    known_file = DATA / "logs" / "ncu_metrics_known.txt"
    if not known_file.exists():
        return METRICS
    known = set(known_file.read_text().split())
    # launch statistics (launch__*) are not hardware counters and --query-metrics does not list them
    return [m for m in METRICS if m.startswith("launch__") or m.rsplit(".", 1)[0] in known or m in known]


def run(chunk: int, deadline: float) -> None:
    todo = [t for t in json.loads(PLAN.read_text()) if t["launch_id"] not in _done()]
    # round robin over the libraries, so that a deadline cuts every library's share, not the last one's
    by_lib: dict[str, list] = {}
    for t in todo:
        by_lib.setdefault(t["library"], []).append(t)
    items = [t for group in zip_longest(*by_lib.values()) for t in group if t is not None]
    metrics = _metrics()
    start = time.time()
    for first in range(0, len(items), chunk):
        if time.time() - start > deadline:
            print("ncu: deadline reached; run again to go on", flush=True)
            break
        part = items[first:first + chunk]
        RAW.unlink(missing_ok=True)
        ORDER.unlink(missing_ok=True)
        (DATA / "logs" / "ncu_todo.json").write_text(json.dumps(part))
        names = "|".join(sorted({re.escape(t["kernel"]) for t in part}))
        command = ["ncu", "--clock-control", "none", "--kernel-name", f"regex:^({names})$", "--metrics",
                   ",".join(metrics), "--csv", "--page", "raw", "--log-file", str(RAW),
                   sys.executable, __file__, "replay"]
        with open(DATA / "logs" / "ncu_run.log", "a") as log:
            subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                           timeout=max(30.0, deadline - (time.time() - start) + 60))
        collect(metrics)
    print(f"ncu: {len(_done())} launches profiled in all, {time.time() - start:.0f} s", flush=True)


def collect(metrics: list[str]) -> None:
    """Join the raw CSV (one row per profiled kernel) with the launches the replay completed, in order."""
    if not RAW.exists() or not ORDER.exists():
        return
    order = json.loads(ORDER.read_text())
    lines = [line for line in RAW.read_text().splitlines() if line.startswith('"')]
    rows = list(csv.DictReader(lines))
    units = rows[0] if rows and not rows[0].get("ID", "").isdigit() else {}
    rows = [r for r in rows if r.get("ID", "").isdigit()]
    new = not RESULT.exists()
    fields = ["library", "launch_id", "index", "kernel", "ncu_kernel", "name_match", *metrics]
    if not new:  # rows already there fix the columns (an earlier run may have asked for more metrics)
        with open(RESULT) as fh:
            fields = next(csv.reader(fh))
    with open(RESULT, "a", newline="") as fh:
        w = csv.DictWriter(fh, fields, extrasaction="ignore")
        if new:
            w.writeheader()
        for item, r in zip(order, rows):
            out = {**item, "ncu_kernel": r.get("Kernel Name", ""),
                   "name_match": int(r.get("Kernel Name", "").startswith(item["kernel"]))}
            for m in metrics:
                value = r.get(m, "")
                out[m] = value.replace(",", "") if value else ""
            w.writerow(out)
    if len(rows) != len(order):
        print(f"ncu: {len(rows)} profiled kernels for {len(order)} launches; joined the first "
              f"{min(len(rows), len(order))} in order (check name_match)", flush=True)
    if units:
        (DATA / "logs" / "ncu_units.json").write_text(json.dumps({m: units.get(m, "") for m in metrics}))
    RAW.unlink()
    ORDER.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["plan", "run", "replay"])
    parser.add_argument("libraries", nargs="*", default=list(LIBRARIES))
    parser.add_argument("--per-library", type=int, default=50)
    parser.add_argument("--chunk", type=int, default=40)
    parser.add_argument("--deadline", type=float, default=300.0)
    a = parser.parse_args()
    if a.step == "plan":
        plan(a.libraries, a.per_library)
    elif a.step == "run":
        run(a.chunk, a.deadline)
    else:
        replay(json.loads((DATA / "logs" / "ncu_todo.json").read_text()))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
