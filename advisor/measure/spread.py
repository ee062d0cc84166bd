"""One sweep spread over the machine's GPUs: a worker process per GPU, their rows merged into one CSV.

Each worker is a fresh (spawned) process started with CUDA_VISIBLE_DEVICES set to its one GPU, so it
sees that GPU as device 0 and runs the ordinary single-GPU sweep (`advisor.measure.sweep.run_sweep`)
on the work it is given, appending rows to its own part file beside the CSV (`NAME.gpu<i>.part`).

Work goes out in units of one case (shape x token count) with the configs not yet in the CSV: a
case's timings share one built case and the "slow" cut of the case's fastest launch, so a case stays
on one GPU; with fewer cases than GPUs each case is split in config chunks. Every worker starts with
one unit of its own (all GPUs get work however fast their processes start), then takes the next
unit from a shared queue when it finishes one, so a GPU on cheap cases takes more of them.

The part files are merged into the CSV (rows it already holds are skipped) when the workers are
done, and also first thing on every run, so a spread sweep that was killed resumes like a plain one:
nothing measured is measured again. A worker that dies (a crashed context) loses only the unit it was
on; the rows it wrote are kept and the run is reported incomplete.
"""

from __future__ import annotations

import csv
import math
import multiprocessing as mp
import os
import pickle
import queue
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from advisor.measure.sweep import SweepPlan, _ResultWriter, pair_key, pending_pairs, read_done, row_key, run_sweep
from ceilings.errors import AdvisorError

_PART = ".gpu{}.part"


def parse_gpus(text: str | int | None, visible: Sequence[str]) -> list[str]:
    """`--gpus N|all` -> the CUDA_VISIBLE_DEVICES entries to use, out of the `visible` ones."""
    if text is None or str(text).strip() == "":
        return list(visible[:1])
    word = str(text).strip().lower()
    if word == "all":
        if not visible:
            raise AdvisorError("--gpus all: torch sees no GPU here; run on a CUDA machine")
        return list(visible)
    if not word.isdigit() or int(word) < 1:
        raise AdvisorError(f"--gpus {text!r}: give a number of GPUs (1, 2, ...) or 'all'")
    if int(word) > len(visible):
        raise AdvisorError(f"--gpus {text}: this machine shows {len(visible)} GPU(s); give at most {len(visible)} "
                           "or 'all'")
    return list(visible[:int(word)])


def visible_gpus(text: str | int | None) -> list[str] | None:
    """The devices `--gpus` asks for on this machine (None for one GPU: the sweep runs in this process).
    Entries are those of CUDA_VISIBLE_DEVICES when it is set, else device indices."""
    if text is None or str(text).strip() in ("", "1"):
        return None
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    visible = listed[:count] if listed else [str(i) for i in range(count)]
    chosen = parse_gpus(text, visible)
    return chosen if len(chosen) > 1 else None


def part_paths(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + _PART.format("*")))


def merge_parts(path: Path) -> int:
    """Append the rows of the part files beside `path` that it does not hold yet, then delete the parts.
    Returns the rows added."""
    parts = part_paths(path)
    if not parts:
        return 0
    done = read_done(path)
    writer = _ResultWriter(path)
    added = 0
    try:
        for part in parts:
            with part.open(newline="") as f:
                for row in csv.DictReader(f):
                    key = row_key(row)
                    if key not in done:
                        writer.write(row)
                        done.add(key)
                        added += 1
    finally:
        writer.close()
    for part in parts:
        part.unlink()
    return added


def work_units(plan: SweepPlan, pending: Sequence[tuple[Any, Any]], gpus: int) -> list[list[tuple]]:
    """Pending pairs as units of work (lists of pair keys): one per case, cases split in config chunks
    when there are fewer cases than GPUs; the largest first."""
    cases: dict[Any, list[tuple]] = {}
    for spec, config in pending:
        cases.setdefault(spec, []).append(pair_key(plan, spec, config))
    chunks = max(1, math.ceil(gpus / max(len(cases), 1)))
    units = []
    for keys in cases.values():
        size = math.ceil(len(keys) / chunks)
        units += [keys[i:i + size] for i in range(0, len(keys), size)]
    return sorted(units, key=len, reverse=True)


def _sendable(plan: SweepPlan):
    """What a worker rebuilds the plan from: `plan.rebuild` if given, else the plan, if it pickles."""
    source = plan.rebuild if plan.rebuild is not None else plan
    try:
        pickle.dumps(source)
    except Exception as exc:
        raise AdvisorError(f"this sweep's plan cannot be sent to worker processes ({type(exc).__name__}: {exc}); "
                           "run it on one GPU (--gpus 1)") from None
    return source


def _worker(device: str, source, first: list[tuple] | None, units, results, part: str, workers: int | None,
            deadline_s: float | None) -> None:
    """One GPU's process: run its first unit, then units from the queue, into its part file."""
    os.environ["CUDA_VISIBLE_DEVICES"] = device  # set before anything here touches CUDA
    start = time.monotonic()
    plan = source if isinstance(source, SweepPlan) else source()
    by_key = {pair_key(plan, spec, config): (spec, config) for spec, config in plan.pairs()}
    summary = {"device": device, "rows_written": 0, "units": 0, "complete": True}
    unit = first
    while True:
        if unit is None:
            unit = units.get()  # the queue ends with one None per worker
            if unit is None:
                break
        left = None if deadline_s is None else deadline_s - (time.monotonic() - start)
        if left is not None and left <= 0:
            summary["complete"] = False
            break
        pairs = [by_key[k] for k in unit if k in by_key]
        one = run_sweep(replace(plan, specs=[], configs=[], extra_pairs=pairs, rebuild=None), part,
                        workers=workers, deadline_s=left, show_progress=False)
        summary["rows_written"] += one["rows_written"]
        summary["units"] += 1
        if not one["complete"]:
            summary["complete"] = False
            break
        unit = None
    results.put(summary)


def spread_sweep(plan: SweepPlan, results_csv: str | os.PathLike, gpus: list[str], *, workers: int | None = None,
                 deadline_s: float | None = None) -> dict:
    """`run_sweep` over several GPUs: a worker process per entry of `gpus` (CUDA_VISIBLE_DEVICES values)."""
    start = time.monotonic()
    path = Path(results_csv)
    path.parent.mkdir(parents=True, exist_ok=True)
    recovered = merge_parts(path)  # rows of an earlier spread run that stopped before merging
    all_pairs = plan.pairs()
    pending = pending_pairs(plan, read_done(path))
    summary: dict = {"rows_written": 0, "already_done": len(all_pairs) - len(pending), "complete": True,
                     "gpus": len(gpus), "recovered_rows": recovered}
    units = work_units(plan, pending, len(gpus))
    if not units:
        summary["elapsed_s"] = round(time.monotonic() - start, 1)
        return summary
    source = _sendable(plan)
    # Compile workers per GPU: the machine's cores shared between the GPUs' sweeps.
    per_gpu = workers or max(1, min(16, ((os.cpu_count() or 2) - 1) // len(gpus)))
    ctx = mp.get_context("spawn")  # a fresh interpreter per GPU: CUDA_VISIBLE_DEVICES set before CUDA starts
    shared = ctx.Queue()
    shared.cancel_join_thread()  # units left when workers stop at the deadline must not hold this process
    for unit in units[len(gpus):] + [None] * len(gpus):
        shared.put(unit)
    results = ctx.Queue()
    procs = []
    for i, device in enumerate(gpus):
        first = units[i] if i < len(units) else None
        part = str(path.parent / (path.name + _PART.format(i)))
        proc = ctx.Process(target=_worker, args=(device, source, first, shared, results, part, per_gpu, deadline_s),
                           name=f"sweep-gpu{device}")
        proc.start()
        procs.append(proc)
    reports, failed = [], []
    while len(reports) + len(failed) < len(procs):
        try:
            reports.append(results.get(timeout=1.0))
            continue
        except queue.Empty:
            pass
        for proc in procs:  # a worker that died without reporting (a crashed CUDA context)
            if proc.exitcode not in (None, 0) and proc.name not in failed:
                failed.append(proc.name)
    for proc in procs:
        proc.join()
    added = merge_parts(path)
    summary["rows_written"] = added
    summary["per_gpu"] = reports
    if failed or any(not r["complete"] for r in reports) or len(pending_pairs(plan, read_done(path))):
        summary["complete"] = False
    if failed:
        summary["failed_workers"] = failed
    summary["elapsed_s"] = round(time.monotonic() - start, 1)
    return summary
