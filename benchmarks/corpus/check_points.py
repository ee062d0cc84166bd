"""The measured points of the corpus as advisor Launches, and their generic ceilings, cached on disk.

Shared by the three CPU checks (`check_ceiling.py`, `check_ncu.py`, `check_model.py`). A point is one
(launch, config) row of `data/timings.csv` with status `ok`, or the recorded config of a launch that
Nsight Compute profiled. Its Launch is the trace entry with:

- the variant's config, grid and constexprs (`replay.Case.variants`: an autotuned kernel's grid per
  config as its host code computed it during recording; a num_warps/num_stages neighbour keeps the grid);
- the values of small integer tensors from the extras (`TensorArg.values`) where the trace has none, laid
  out as the kernel sees memory (element i at the data pointer + i elements).

Evaluating a point compiles its kernel for sm_90 with the Triton installed here (not the GPU machine's
3.6) and runs `ceilings.demand.generic_demand` and the roofline with the H100's calibrated rates, through
the product path alone (`ceilings.compile.load_kernel` opens a file inside its package, so relative
imports resolve; `launch_arguments` binds runtime arguments after a constexpr by name).

Results go to `data/ceilings.jsonl`, one line per point, appended as workers finish (resumable: a point
already there is not evaluated again). Workers are processes this module starts, one task at a time each,
killed by their own pid when a task runs past its time limit (a compile can take minutes).
"""

from __future__ import annotations

import csv
import json
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DATA = HERE / "data"
# CORPUS_GPU=h200: the H200's timings (data/timings_h200.csv) against ceilings with the H200's rates, in
# files of their own; the SASS is the same (sm_90), so the compile cache serves both.
GPU_KEY = os.environ.get("CORPUS_GPU", "h100").lower()
if GPU_KEY not in ("h100", "h200"):
    raise SystemExit(f"CORPUS_GPU={GPU_KEY!r}: the corpus was timed on h100 and h200 only")
SUFFIX = "" if GPU_KEY == "h100" else f"_{GPU_KEY}"
# CORPUS_HELD_OUT=1: the held-out libraries (replay.HELD_OUT) instead, read from and written to files of their own
# (`timings_held_out*.csv`, `ceilings_held_out*.jsonl`), so that no script that fits reads their rows.
HELD_OUT_MODE = os.environ.get("CORPUS_HELD_OUT") == "1"
PART = "_held_out" if HELD_OUT_MODE else ""
# CORPUS_TRITON_SITE=DIR: compile with the Triton installed in DIR (`pip install --no-deps --target DIR
# triton==3.6.0`, the GPU machines' version) instead of this machine's, so each floor is that of the binary that
# was timed; its ceilings and checks go to files tagged with that version (`ceilings_triton3.6.0.jsonl`, ...).
TRITON_SITE = os.environ.get("CORPUS_TRITON_SITE")
if TRITON_SITE:
    sys.path.insert(0, TRITON_SITE)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (TRITON_SITE, os.environ.get("PYTHONPATH"))))
    import triton as _triton

    if not _triton.__file__.startswith(str(Path(TRITON_SITE).resolve())):
        raise SystemExit(f"CORPUS_TRITON_SITE={TRITON_SITE}: triton was imported from {_triton.__file__} first")
TRITON_TAG = f"_triton{_triton.__version__}" if TRITON_SITE else ""
CEILINGS = DATA / f"ceilings{PART}{TRITON_TAG}{SUFFIX}.jsonl"
TIMINGS = DATA / f"timings{PART}{SUFFIX}.csv"
SITE = Path(os.environ.get("CORPUS_SITE", "/tmp/site"))  # where the pinned wheels are installed (README)
# FlagGems finds its vendor by running vendor tools (nvidia-smi) at import; without a GPU, name it.
os.environ.setdefault("GEMS_VENDOR", "nvidia")
for folder in (str(HERE), str(ROOT), str(SITE)):
    if folder not in sys.path:
        sys.path.insert(0, folder)

from replay import HELD_OUT, Case, Variant, load_cases, probe_owners  # noqa: E402
from replay import LIBRARIES as FITTED_LIBRARIES  # noqa: E402

LIBRARIES = HELD_OUT if HELD_OUT_MODE else FITTED_LIBRARIES

GPU_NAME = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200"}[GPU_KEY]
_INTEGER = {"int8", "uint8", "int16", "int32", "int64", "bool"}
_VALUE_BYTES = {"int8": 1, "uint8": 1, "bool": 1, "int16": 2, "int32": 4, "int64": 8}


@dataclass(frozen=True)
class Point:
    library: str
    launch_id: str
    index: int            # the launch's position in its trace
    kernel: str
    label: str            # the variant's config as timings.csv writes it (json, sorted keys)
    recorded: bool
    us: float | None = field(default=None, compare=False)  # measured (CUDA graph); None: an ncu point

    @property
    def key(self) -> str:
        return f"{self.library}/{self.launch_id}/{self.label}"


def _cases() -> dict[str, dict[str, Case]]:
    return {lib: {c.id: c for c in load_cases(lib)} for lib in LIBRARIES}


_CASES: dict[str, dict[str, Case]] | None = None


def cases() -> dict[str, dict[str, Case]]:
    global _CASES
    if _CASES is None:
        _CASES = _cases()
    return _CASES


def timed_points() -> list[Point]:
    """Every (launch, config) timed with status ok. A row timed under an autotune probe's entry (a trace
    `advisor record` wrote with autotune groups: replay.load_cases) counts as its launch's, when that
    config is in the launch's list and the launch has no row of its own for it."""
    out, seen = [], set()
    with open(TIMINGS) as f:
        rows = [r for r in csv.DictReader(f) if r["status"] == "ok"]
    owners = {lib: probe_owners(lib) for lib in {r["library"] for r in rows}}
    listed: dict[tuple[str, str], set[str]] = {}
    for row in sorted(rows, key=lambda r: r["launch_id"] in owners[r["library"]]):  # the launch's own rows first
        lib, launch = row["library"], row["launch_id"]
        label = json.dumps(json.loads(row["config"]), sort_keys=True)
        recorded = row["recorded"] == "1"
        if launch not in cases().get(lib, {}):
            launch, recorded = owners[lib].get(launch), False
            if launch is not None and (lib, launch) not in listed:
                listed[(lib, launch)] = {v.label for v in cases()[lib][launch].variants(limit=10_000)}
            if launch is None or label not in listed[(lib, launch)]:
                continue
        if (lib, launch, label) in seen:
            continue
        seen.add((lib, launch, label))
        case = cases()[lib][launch]
        if recorded and owners[lib]:  # probes of other num_warps / num_stages share the launch's id
            recorded = label == case.recorded_variant().label
        out.append(Point(lib, launch, case.index, case.kernel, label, recorded, float(row["us"])))
    return out


def ncu_points() -> list[Point]:
    """The recorded config of every launch Nsight Compute profiled."""
    out = []
    profile = DATA / f"ncu{PART}.csv"
    if not profile.exists():
        return out
    with open(profile) as f:
        for row in csv.DictReader(f):
            if row["library"] not in LIBRARIES:
                continue
            case = cases()[row["library"]][row["launch_id"]]
            out.append(Point(row["library"], row["launch_id"], int(row["index"]), row["kernel"],
                             case.recorded_variant().label, True, None))
    return out


def variant_of(point: Point) -> tuple[Case, Variant]:
    case = cases()[point.library][point.launch_id]
    for v in case.variants(limit=10_000):
        if v.label == point.label:
            return case, v
    raise KeyError(f"{point.key}: no variant of the launch has this config")


def _memory_order(values, shape, stride) -> list[int] | None:
    """A tensor's values (nested lists in index order) placed at their offsets from the data pointer."""
    import numpy as np

    array = np.asarray(values, dtype=np.int64).reshape(shape) if shape else np.asarray(values, dtype=np.int64)
    if array.size == 0:
        return None
    span = 1 + sum((s - 1) * st for s, st in zip(shape, stride, strict=True) if s > 0)
    flat = np.zeros(span, dtype=np.int64)
    offsets = sum(np.indices(shape)[d] * stride[d] for d in range(len(shape))) if shape else np.zeros(1, int)
    flat[np.asarray(offsets).ravel()] = array.ravel()
    return flat.tolist()


def launch_dict(case: Case, variant: Variant) -> tuple[dict, list[str]]:
    """The advisor launch object of a variant, and the names of tensors given values from the extras."""
    entry = json.loads(json.dumps(case.entry))
    params = {k: v for k, v in variant.config.items() if k not in ("num_warps", "num_stages")}
    entry["config"] = dict(variant.config)
    entry["constexprs"] = {k: v for k, v in variant.constexprs.items() if k not in params}
    entry["grid"] = [g for g in variant.grid]
    while len(entry["grid"]) > 1 and entry["grid"][-1] == 1:
        entry["grid"].pop()
    entry.pop("line", None)
    entry.pop("count", None)
    given = []
    values = case.extras.get("values") or {}
    for t in entry["tensors"]:
        if t.get("values") is None and t["name"] in values and t["dtype"] in _INTEGER:
            flat = _memory_order(values[t["name"]], t["shape"], t["stride"])
            if flat is not None and len(flat) * _VALUE_BYTES[t["dtype"]] <= 64 * 1024:
                t["values"] = flat
                given.append(t["name"])
    return entry, given


# ----------------------------------------------------------------------------------------------------
# Evaluating one point (in a worker process).
# ----------------------------------------------------------------------------------------------------
def evaluate(point: Point) -> dict:
    """The generic ceiling of one point, with the work behind it (floor and expected) and its feature row."""
    import ceilings.compile as cc
    from advisor.model.features import feature_row
    from ceilings.demand import generic_demand
    from ceilings.hardware import resolve_gpu
    from ceilings.launch import Launch
    from ceilings.roofline import roofline

    gpu = resolve_gpu(GPU_NAME)
    case, variant = variant_of(point)
    entry, given = launch_dict(case, variant)
    launch = Launch.from_dict(entry)
    out = {"key": point.key, "library": point.library, "launch_id": point.launch_id, "kernel": point.kernel,
           "label": point.label, "values_from_extras": given}
    start = time.time()
    compiled = cc.compile_launch(launch, gpu.arch)
    out["compile_s"] = round(time.time() - start, 2)
    demand = generic_demand(launch, compiled, arch=gpu.arch)
    ceiling = roofline(demand, gpu.rates, launch.config.to_dict())
    doc = ceiling.to_json(detail=True)
    out.update(ceiling_us=ceiling.ceiling_us, binding_pipe=ceiling.binding, pipelines=doc["pipelines"],
               ctas=ceiling.ctas, active_ctas=ceiling.active_ctas, waves=ceiling.waves,
               ctas_per_sm=ceiling.ctas_per_sm, notes=ceiling.notes, detail=doc.get("detail"),
               registers=compiled.registers, shared_bytes=compiled.shared_bytes, spill_bytes=compiled.local_bytes,
               features=feature_row(ceiling, demand, launch.config, gpu.spec))
    if ceiling.model_view is not None:  # the ceiling the features describe, where the floor's chain is tighter
        view = ceiling.model_view
        out["model_view"] = {"ceiling_us": view.ceiling_us, "binding_pipe": view.binding,
                             "pipelines": view.to_json()["pipelines"]}
    if demand.expected is not None:
        expected = roofline(demand.expected, gpu.rates, launch.config.to_dict())
        out["expected_ceiling_us"] = expected.ceiling_us
        out["expected_features"] = feature_row(expected, demand.expected, launch.config, gpu.spec)
    out["eval_s"] = round(time.time() - start, 2)
    return out


# ----------------------------------------------------------------------------------------------------
# The pool: worker processes started here, each killed by its pid when a task overruns.
# ----------------------------------------------------------------------------------------------------
def _worker(tasks, results) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    while True:
        point = tasks.get()
        if point is None:
            return
        try:
            results.put(evaluate(point))
        except BaseException as exc:  # noqa: BLE001 - every failure is a finding, recorded with its cause
            text = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
            results.put({"key": point.key, "library": point.library, "launch_id": point.launch_id,
                         "kernel": point.kernel, "label": point.label, "error": text[-1][:400] if text else repr(exc)})


def done_keys(path: Path = CEILINGS) -> dict[str, dict]:
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                out[row["key"]] = row
    return out


def evaluate_all(points: list[Point], workers: int = 2, limit_s: float = 600.0, budget_s: float | None = None,
                 path: Path = CEILINGS) -> dict[str, dict]:
    """Evaluate the points not yet in `path`, `workers` at a time; returns every result in `path`."""
    import multiprocessing as mp

    done = done_keys(path)
    todo = [p for p in dict.fromkeys(points) if p.key not in done]
    if not todo:
        return done
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    pool: list[list] = []  # [process, task queue, point or None, started]

    def start_worker():
        tasks = ctx.Queue()
        proc = ctx.Process(target=_worker, args=(tasks, results), daemon=True)
        proc.start()
        return [proc, tasks, None, 0.0]

    for _ in range(min(workers, len(todo))):
        pool.append(start_worker())
    queue = list(todo)
    began = time.time()
    try:
        _run(pool, queue, results, done, path, limit_s, budget_s, began, start_worker, len(todo))
    finally:
        for w in pool:
            w[1].put(None)
        for w in pool:
            w[0].join(timeout=5)
            if w[0].is_alive():
                w[0].kill()  # this worker's own pid
    return done


def _run(pool, queue, results, done, path, limit_s, budget_s, began, start_worker, total) -> None:
    finished = 0
    with open(path, "a") as out:
        while queue or any(w[2] is not None for w in pool):
            over_budget = budget_s is not None and time.time() - began > budget_s
            for w in pool:
                if w[2] is None and queue and not over_budget:
                    w[2], w[3] = queue.pop(0), time.time()
                    w[1].put(w[2])
            if over_budget and all(w[2] is None for w in pool):
                break
            try:
                row = results.get(timeout=2.0)
            except Exception:  # noqa: BLE001 - queue.Empty: check the clocks
                row = None
            if row is not None:
                for w in pool:
                    if w[2] is not None and w[2].key == row["key"]:
                        w[2] = None
                out.write(json.dumps(row) + "\n")
                out.flush()
                done[row["key"]] = row
                finished += 1
                status = row.get("error", "")[:80] or f"{row['ceiling_us']:.1f} us {row['binding_pipe']}"
                print(f"[{finished}/{total}] {row['key'][:70]} {status}", file=sys.stderr, flush=True)
            for i, w in enumerate(pool):
                if w[2] is not None and time.time() - w[3] > limit_s:
                    w[0].kill()  # this worker's own pid; it was started above
                    w[0].join()
                    row = {"key": w[2].key, "library": w[2].library, "launch_id": w[2].launch_id,
                           "kernel": w[2].kernel, "label": w[2].label,
                           "error": f"timeout: evaluation ran past {limit_s:.0f} s"}
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    done[row["key"]] = row
                    pool[i] = start_worker()


def sample_launches(points: list[Point], per_library: int | None) -> list[Point]:
    """Every point of `per_library` launches per library, chosen evenly over each library's kernels in trace
    order (first one launch per kernel, then second ones, ...); None: all."""
    if per_library is None:
        return points
    chosen: set[tuple[str, str]] = set()
    for lib in LIBRARIES:
        launches = list(dict.fromkeys((p.kernel, p.launch_id) for p in points if p.library == lib))
        by_kernel: dict[str, list[str]] = {}
        for kernel, launch in launches:
            by_kernel.setdefault(kernel, []).append(launch)
        rounds, n = 0, 0
        while n < per_library and any(len(v) > rounds for v in by_kernel.values()):
            for launches_of in by_kernel.values():
                if rounds < len(launches_of) and n < per_library:
                    chosen.add((lib, launches_of[rounds]))
                    n += 1
            rounds += 1
    return [p for p in points if (p.library, p.launch_id) in chosen]


def in_priority(points: list[Point]) -> list[Point]:
    """Points grouped by launch, recorded config first; launches interleaved over the libraries and, within
    one, over its kernels (first the launches Nsight Compute profiled and with the most timed configs); at
    most FIRST_PASS configs of a launch before every launch had its turn. A pass stopped early has thus
    evaluated an even sample of whole launches."""
    profiled = {(p.library, p.launch_id) for p in ncu_points()}
    by_launch: dict[tuple[str, str], list[Point]] = {}
    for p in dict.fromkeys(points):
        by_launch.setdefault((p.library, p.launch_id), []).append(p)
    per_lib: dict[str, list[tuple[str, str]]] = {}
    for lib in LIBRARIES:
        by_kernel: dict[str, list[tuple[str, str]]] = {}
        for launch, group in by_launch.items():
            if launch[0] == lib:
                by_kernel.setdefault(group[0].kernel, []).append(launch)
        for launches in by_kernel.values():
            launches.sort(key=lambda k: (k not in profiled, -len(by_launch[k])))
        ordered, depth = [], 0
        while any(len(v) > depth for v in by_kernel.values()):
            ordered += [v[depth] for v in by_kernel.values() if len(v) > depth]
            depth += 1
        per_lib[lib] = ordered
    out, later = [], []
    while any(per_lib.values()):
        for lib in LIBRARIES:
            if per_lib.get(lib):
                group = sorted(by_launch[per_lib[lib].pop(0)], key=lambda p: not p.recorded)
                # A launch's first FIRST_PASS configs now, the rest after every launch has had its turn.
                out += group[:FIRST_PASS]
                later += group[FIRST_PASS:]
    return out + later


FIRST_PASS = 5


def main(argv: list[str] | None = None) -> int:
    """Evaluate points without reporting (`--points timed|ncu|all`); the check_* scripts report."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", choices=("timed", "ncu", "all"), default="all")
    parser.add_argument("--per-library", type=int, default=None, help="launches per library (default: all)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit-s", type=float, default=600.0, help="per point")
    parser.add_argument("--budget-s", type=float, default=None, help="start no point after this many seconds")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the workers too (evaluate_all's finally)
    points = []
    if args.points in ("timed", "all"):
        points += sample_launches(timed_points(), args.per_library)
    if args.points in ("ncu", "all"):
        points += sample_launches(ncu_points(), args.per_library)
    done = evaluate_all(in_priority(points), args.workers, args.limit_s, args.budget_s)
    print(f"{sum(1 for p in points if p.key in done)} of {len(set(points))} points evaluated "
          f"({sum(1 for p in set(points) if 'error' in done.get(p.key, {}))} errors) in {CEILINGS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
