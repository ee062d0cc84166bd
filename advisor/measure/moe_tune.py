"""Tune the shipped fused-MoE kernel on the GPU at hand: which configs to try, and what was best.

The config set is the family's stratified one (kernels.moe_family.sample_configs). An optional
refinement then tries every GROUP_SIZE_M and num_stages for the three fastest configs of each case.
Results go through `advisor.measure.sweep`.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from advisor.measure.sweep import SweepPlan, run_sweep
from advisor.model.dataset import read_results
from ceilings.launch import Config
from kernels import fused_moe as fm
from kernels.moe_bench import MoEGemmSpec, compile_config, row_config
from kernels.moe_configs import ConfigMeta, ConfigTable, MeasuredEntry

# The config sets are the family's (kernels/moe_family.py); named here too for the tuning's callers.
from kernels.moe_family import (  # noqa: F401
    HOPPER_MAX_SHARED,
    default_configs,
    feasible,
    make_case,
    sample_configs,
    stratified_configs,
)

KERNEL = "fused_moe_kernel"


def device_max_shared() -> int:
    """Shared memory one block may opt into on the current GPU (read off the device)."""
    import torch

    return int(torch.cuda.get_device_properties(torch.cuda.current_device()).shared_memory_per_block_optin)


def ranked_by_case(rows: list[dict], kernel: str = KERNEL) -> dict[tuple[str, int], list[dict]]:
    """Fully timed rows of each (shape, M) case, fastest first."""
    cases = defaultdict(list)
    for r in rows:
        if r["status"] == "ok" and r["kernel"] == kernel:
            cases[(r["shape"], int(r["M"]))].append(r)
    return {key: sorted(rs, key=lambda r: float(r["us"])) for key, rs in cases.items()}


def top_configs(rows: list[dict], top: int) -> list[Config]:
    """The union over cases (and kernels) of each case's `top` fastest fully timed configs."""
    kernels = dict.fromkeys(r["kernel"] for r in rows)
    out = [row_config(r) for k in kernels for ranked in ranked_by_case(rows, k).values() for r in ranked[:top]]
    return list(dict.fromkeys(out))


def refinement_pairs(rows: list[dict], specs: Sequence[MoEGemmSpec], kernel: str = KERNEL, top: int = 3,
                     max_shared: int = HOPPER_MAX_SHARED) -> list[tuple[MoEGemmSpec, Config]]:
    """For the `top` fastest configs of each case, the same tiles with every GROUP_SIZE_M and num_stages."""
    ranked = ranked_by_case(rows, kernel)
    pairs = []
    for spec in specs:
        for r in ranked.get((spec.shape_label, spec.m), [])[:top]:
            base = row_config(r)
            pairs += [(spec, base.replace(GROUP_SIZE_M=g, num_stages=st)) for g in fm.CONFIG_SPACE["GROUP_SIZE_M"]
                      for st in fm.CONFIG_SPACE["num_stages"] if feasible(base.replace(num_stages=st), max_shared)]
    return pairs




def tuning_plan(kernel: str, specs: Sequence[MoEGemmSpec], configs: Sequence[Config],
                extra_pairs: Sequence[tuple[MoEGemmSpec, Config]] = (), abort_ratio: float = 1.5) -> SweepPlan:
    """The sweep of a tuning phase on the current GPU (its shared memory decides what fits); `rebuild` makes
    the same plan in a worker process of a sweep spread over GPUs."""
    max_shared = device_max_shared()
    return SweepPlan(kernel=kernel, specs=list(specs), configs=list(configs), make_case=make_case,
                     compile_fn=compile_config, prefilter=lambda c: fm.resource_precheck(c, max_shared), tol=1e-2,
                     abort_ratio=abort_ratio, extra_pairs=list(extra_pairs),
                     rebuild=functools.partial(tuning_plan, kernel, list(specs), list(configs), list(extra_pairs),
                                               abort_ratio))


def tune(specs: Sequence[MoEGemmSpec], results_csv: str | Path, *, configs: Sequence[Config] | None = None,
         sample: int | None = None, seed: int = 0, refine: bool = True, abort_ratio: float = 1.5,
         deadline_s: float | None = None, workers: int | None = None, kernel: str = KERNEL,
         show_progress: bool = True, gpus: list[str] | None = None) -> list[dict]:
    """Sweep `specs` on the current GPU into `results_csv` (resumable); returns one summary per phase.
    `gpus`: devices to spread each phase over (`advisor.measure.spread.visible_gpus`), None for this one."""
    import time

    max_shared = device_max_shared()
    started = time.monotonic()
    chosen = list(configs) if configs else sample_configs(sample, seed, specs, max_shared)
    plan = tuning_plan(kernel, specs, chosen, abort_ratio=abort_ratio)
    summaries = [dict(run_sweep(plan, results_csv, workers=workers, deadline_s=deadline_s,
                                show_progress=show_progress, gpus=gpus), phase="sweep", configs=len(plan.configs))]
    if refine and summaries[-1]["complete"]:
        left = None if deadline_s is None else deadline_s - (time.monotonic() - started)
        extra = refinement_pairs(read_results(results_csv), specs, kernel, max_shared=max_shared)
        plan = tuning_plan(kernel, specs, [], extra, abort_ratio)
        summaries.append(dict(run_sweep(plan, results_csv, workers=workers, deadline_s=left,
                                        show_progress=show_progress, gpus=gpus), phase="refine",
                              pairs=len(plan.extra_pairs)))
    return summaries


def tuned_table(rows: list[dict], specs: Sequence[MoEGemmSpec], kernel: str = KERNEL) -> ConfigTable:
    """The fastest fully timed config per M of `specs` (one shape), as an engine config table.

    Token counts are its only keys (the format every engine release reads); the Triton version and the
    timings go to the side file, `tuned_meta`."""
    ranked = ranked_by_case(rows, kernel)
    configs = {s.m: row_config(ranked[(s.shape_label, s.m)][0]) for s in specs
               if ranked.get((s.shape_label, s.m))}
    return ConfigTable(configs)


def tuned_meta(rows: list[dict], specs: Sequence[MoEGemmSpec], device_name: str, source: str = "",
               kernel: str = KERNEL) -> ConfigMeta:
    """The side file of `tuned_table`: each M's fastest config with its time and how many configs were timed
    (fully timed, or stopped early as over 1.5x the case's fastest), and the sweep's Triton version."""
    ranked = ranked_by_case(rows, kernel)
    timed = defaultdict(int)
    for r in rows:
        if r["kernel"] == kernel and r["status"] in ("ok", "slow"):
            timed[(r["shape"], int(r["M"]))] += 1
    measured = {}
    for s in specs:
        best = ranked.get((s.shape_label, s.m))
        if best:
            measured[s.m] = MeasuredEntry(row_config(best[0]), float(best[0]["us"]), timed[(s.shape_label, s.m)])
    versions = {r["triton"] for r in rows if r["kernel"] == kernel and r.get("triton")}
    return ConfigMeta(device_name, versions.pop() if len(versions) == 1 else None, measured, source)
