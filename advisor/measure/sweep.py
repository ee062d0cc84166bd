"""A resumable sweep of many configs over many cases of one kernel, on a GPU.

Configs compile first, in parallel worker processes (each holding only a CUDA context and tiny
tensors, with its allocator capped); failures are recorded with their reason. Then each case is
built once and every config that compiled is checked against the reference and timed. Each result
is appended to a CSV as soon as it is known, so an interrupted sweep resumes where it stopped.

With `gpus` above 1 the sweep is spread over that many GPUs of the machine, a worker process per GPU
(`advisor.measure.spread`), and their rows merged into the same CSV.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from advisor.measure import timing as measure
from ceilings.launch import Config

CSV_FIELDS = ["date", "gpu", "triton", "torch", "kernel", "gemm", "shape", "M", "BLOCK_SIZE_M", "BLOCK_SIZE_N",
              "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages", "config", "status", "us", "min_us",
              "max_us", "timing", "rel_err", "n_regs", "n_spills", "shared", "flops", "compulsory_bytes",
              "experts_routed", "reason", "case_info", "params"]


STANDARD_TIMING = {"mode": measure.GRAPH, "launches_per_graph": 10, "replays": 20}


class CaseSpec(Protocol):
    m: int
    gemm: int
    shape_label: str

    def compile_signature(self, config: Config) -> tuple: ...


@dataclass
class SweepPlan:
    kernel: str
    specs: Sequence[Any]                              # CaseSpec objects
    configs: Sequence[Config]
    make_case: Callable[[Any], Any]                   # spec -> case with runner(config), out, reference
    compile_fn: Callable[[Any, Config], dict]         # top-level function: runs in worker processes
    prefilter: Callable[[Config], str | None] = lambda config: None
    tol: float = 1e-2
    # Passed to measure.time_launch; the standard: a CUDA graph of 10 launches, median of 20 replays.
    timing: dict = field(default_factory=lambda: dict(STANDARD_TIMING))
    # A config whose single warm launch takes more than abort_ratio x the fastest single warm launch
    # so far of its case is recorded as "slow" with that one-launch time instead of being fully timed.
    # Single launches are compared with single launches: both include the same launch overhead.
    abort_ratio: float | None = None
    # Extra (spec, config) pairs to measure besides specs x configs (e.g. a refinement phase).
    extra_pairs: Sequence[tuple[Any, Config]] = ()
    # How one compiled config of a case is checked and timed: (case, config, plan, fastest single launch
    # of the case so far) -> row fields; None: `measure_config`. A sweep without a GPU (tests) passes its own.
    measure_fn: Callable[[Any, Config, SweepPlan, float | None], dict] | None = None
    # For a sweep spread over GPUs: a picklable no-argument callable (a functools.partial of a module-level
    # function) that builds this plan again in a worker process, for plans holding lambdas. None: the
    # plan itself is sent, which works when all its callables are module-level functions.
    rebuild: Callable[[], SweepPlan] | None = None

    def pairs(self) -> list[tuple[Any, Config]]:
        product = [(spec, config) for spec in self.specs for config in self.configs]
        return list(dict.fromkeys(product + list(self.extra_pairs)))


def row_key(row: dict) -> tuple:
    return (row["kernel"], str(row["gemm"]), row["shape"], str(row["M"]), row["config"], row["timing"])


def pair_key(plan: SweepPlan, spec, config: Config) -> tuple:
    """The row key a (spec, config) pair of `plan` is written under."""
    return row_key({"kernel": plan.kernel, "gemm": spec.gemm, "shape": spec.shape_label, "M": spec.m,
                    "config": config.label(), "timing": plan.timing.get("mode", measure.GRAPH)})


def pending_pairs(plan: SweepPlan, done: set[tuple]) -> list[tuple[Any, Config]]:
    """The plan's pairs whose rows are not in `done`, in the plan's order."""
    return [(spec, config) for spec, config in plan.pairs() if pair_key(plan, spec, config) not in done]


def read_done(path: Path) -> set[tuple]:
    if not path.exists():
        return set()
    with path.open(newline="") as f:
        return {row_key(r) for r in csv.DictReader(f)}


class _ResultWriter:
    def __init__(self, path: Path):
        self.path = path
        new = not path.exists() or path.stat().st_size == 0
        fields = CSV_FIELDS
        if not new:  # resume a file written with other columns in its own layout
            with path.open(newline="") as f:
                fields = next(csv.reader(f), CSV_FIELDS) or CSV_FIELDS
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", newline="")
        self._csv = csv.DictWriter(self._file, fieldnames=fields, extrasaction="ignore")
        if new:
            self._csv.writeheader()

    def write(self, row: dict):
        self._csv.writerow(row)
        self._file.flush()

    def close(self):
        self._file.close()


def _worker_init(memory_fraction: float):
    import torch

    if torch.cuda.is_available():
        torch.cuda.set_per_process_memory_fraction(memory_fraction)


def _compile_task(compile_fn, spec, config: Config) -> tuple[bool, dict | str]:
    try:
        return True, compile_fn(spec, config)
    except Exception as exc:  # a compile failure is a result to record, not a crash
        text = f"{type(exc).__name__}: {exc}".strip().splitlines()
        return False, " ".join(text[:2])[:300]


def compile_all(plan: SweepPlan, pairs: Iterable[tuple[Any, Config]], workers: int, progress=None,
                memory_fraction: float = 0.02) -> dict[tuple, tuple[bool, dict | str]]:
    """Compile each (signature, config) once in worker processes; returns results by that key."""
    tasks: dict[tuple, tuple[Any, Config]] = {}
    for spec, config in pairs:
        tasks.setdefault((spec.compile_signature(config), config), (spec, config))
    results: dict[tuple, tuple[bool, dict | str]] = {}
    if not tasks or plan.compile_fn is None:  # nothing to compile ahead (a sweep that compiles as it runs)
        return results
    task_id = progress.add_task("compile", total=len(tasks)) if progress else None
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                             initargs=(memory_fraction,)) as pool:
        futures = {pool.submit(_compile_task, plan.compile_fn, spec, config): key
                   for key, (spec, config) in tasks.items()}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            if progress:
                progress.advance(task_id)
    return results


def _config_columns(config: Config) -> dict:
    row = dict(config.params)
    row.update(num_warps=config.num_warps, num_stages=config.num_stages, config=config.label(),
               params=json.dumps(config.params, separators=(",", ":")))
    return row


def run_sweep(plan: SweepPlan, results_csv: str | os.PathLike, *, workers: int | None = None,
              deadline_s: float | None = None, show_progress: bool = True, gpus: Sequence[str] | None = None
              ) -> dict:
    """Run the plan, appending to `results_csv`; skips rows already there. Returns a summary.

    `gpus`: the devices (CUDA_VISIBLE_DEVICES entries, from `advisor.measure.spread.visible_gpus`) to spread
    the sweep over, a worker process each; None or one device: this process, on its current GPU."""
    if gpus is not None and len(gpus) > 1:
        from advisor.measure.spread import spread_sweep

        return spread_sweep(plan, results_csv, list(gpus), workers=workers, deadline_s=deadline_s)
    import torch
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    start = time.monotonic()
    path = Path(results_csv)
    done = read_done(path)
    mode = plan.timing.get("mode", measure.GRAPH)
    device = measure.gpu_name() if torch.cuda.is_available() else "none"
    common = {"date": dt.date.today().isoformat(), "gpu": device, **measure.versions(), "kernel": plan.kernel,
              "timing": mode}

    all_pairs = plan.pairs()
    pending = pending_pairs(plan, done)
    skipped = {config: plan.prefilter(config) for _, config in all_pairs}
    summary = {"rows_written": 0, "already_done": len(all_pairs) - len(pending), "complete": True}
    best_quick: dict[tuple, float] = {}
    writer = _ResultWriter(path)
    workers = workers or max(1, min(16, (os.cpu_count() or 2) - 1))
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  disable=not show_progress) as progress:
        compiled = compile_all(plan, [(s, c) for s, c in pending if skipped[c] is None], workers, progress)
        summary["compile_s"] = round(time.monotonic() - start, 1)
        task_id = progress.add_task("measure", total=len(pending))
        for spec in dict.fromkeys(s for s, _ in pending):
            todo = [c for s, c in pending if s == spec]
            if not todo:
                continue
            if deadline_s is not None and time.monotonic() - start > deadline_s:
                summary["complete"] = False
                break
            case = plan.make_case(spec)
            base = {**common, "gemm": spec.gemm, "shape": spec.shape_label, "M": spec.m,
                    "flops": spec.flops(), "compulsory_bytes": case.compulsory_bytes(),
                    # MoE cases add how many experts the routing reached and its per-expert counts.
                    "experts_routed": getattr(case, "experts_routed", 0),
                    "case_info": json.dumps(getattr(case, "info", dict)(), separators=(",", ":"))}
            for config in todo:
                if deadline_s is not None and time.monotonic() - start > deadline_s:
                    summary["complete"] = False
                    break
                row = {**base, **_config_columns(config)}
                ok, info = compiled.get((spec.compile_signature(config), config), (True, {}))
                if skipped[config] is not None:
                    row.update(status="skipped", reason=skipped[config])
                elif not ok:
                    row.update(status="compile_error", reason=info)
                else:
                    row.update(info)
                    key = (spec.gemm, spec.shape_label, spec.m)
                    result = (plan.measure_fn or measure_config)(case, config, plan, best_quick.get(key))
                    quick = result.pop("quick_us", None)
                    if quick is not None:
                        best_quick[key] = min(quick, best_quick.get(key, float("inf")))
                    row.update(result)
                writer.write(row)
                summary["rows_written"] += 1
                progress.advance(task_id)
            del case
            torch.cuda.empty_cache()
    writer.close()
    summary["elapsed_s"] = round(time.monotonic() - start, 1)
    return summary


def measure_config(case, config: Config, plan: SweepPlan, best_quick_us: float | None) -> dict:
    what = f"{case.spec.shape_label} M={case.spec.m} {config.label()}"
    quick_us = None
    try:
        run = case.runner(config)
        if plan.abort_ratio:
            quick_us, err = measure.quick_checked(run, case.out, case.reference, tol=plan.tol, what=what)
            if best_quick_us and quick_us > plan.abort_ratio * best_quick_us:
                return {"status": "slow", "us": round(quick_us, 3), "rel_err": f"{err:.3g}", "quick_us": quick_us,
                        "reason": f"one warm launch took {quick_us:.1f} us, over {plan.abort_ratio}x the "
                                  f"fastest single launch of this case so far ({best_quick_us:.1f} us); "
                                  "not fully timed"}
        timing, err = measure.measure_checked(run, case.out, case.reference, tol=plan.tol, what=what,
                                              **plan.timing)
    except measure.MeasurementError as exc:
        return {"status": "wrong", "reason": str(exc)[:300]}
    except Exception as exc:  # launch failures (out of resources) are results; a dead context is not
        text = f"{type(exc).__name__}: {exc}"
        if "illegal" in text.lower() or "unspecified launch failure" in text.lower():
            raise
        return {"status": "launch_error", "reason": " ".join(text.split())[:300]}
    return {"status": "ok", "us": round(timing.us, 3), "min_us": round(timing.min_us, 3),
            "max_us": round(timing.max_us, 3), "rel_err": f"{err:.3g}", "quick_us": quick_us}


def sweep_cli(make_plan: Callable[[Any], SweepPlan], csv_name: str, description: str, argv=None,
              add_arguments: Callable[[Any], None] | None = None) -> int:
    """The command line of a benchmarks/ sweep script: --out, --deadline, --workers and the script's own
    options (`add_arguments`); `make_plan(args)` builds the plan; prints the summary."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    parser.add_argument("--deadline", type=float, help="stop measuring after this many seconds")
    parser.add_argument("--workers", type=int, help="parallel compile workers")
    parser.add_argument("--gpus", default="1", help="GPUs to spread the sweep over: a number or 'all'")
    if add_arguments:
        add_arguments(parser)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plan = make_plan(args)
    from advisor.measure.spread import visible_gpus

    summary = run_sweep(plan, out / csv_name, workers=args.workers, deadline_s=args.deadline,
                        show_progress=sys.stderr.isatty(), gpus=visible_gpus(args.gpus))
    print("sweep:", json.dumps(summary), f"configs={len(plan.configs)}", flush=True)
    return 0
