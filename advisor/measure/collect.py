"""`advisor collect`: measure (kernel family x shape x config) on this GPU into a resumable CSV.

Each registered kernel family (kernels.family) declares its plan: its shapes, the token / row counts
and the configs (a seeded random sample of the feasible space plus the family's default rule). Every
point is checked against the family's float32 reference before it is timed with the standard timing
(advisor.measure.sweep.STANDARD_TIMING); rows carry the compiled kernel's registers, spills and shared
bytes, the case's own facts (e.g. the routing of a MoE case) and the config's parameters, so
`advisor train` can rebuild every feature of the ceiling from them. Runs stop at --deadline and resume
from the CSV, so a dataset is collected in calls of a few minutes. `--gpus N|all` spreads one collection
over the machine's GPUs (advisor.measure.spread).
"""

from __future__ import annotations

import functools
from pathlib import Path

from advisor.measure.sweep import SweepPlan, run_sweep
from ceilings.errors import AdvisorError
from kernels.family import CollectOptions, family_named


def build_plan(family: str, shapes: str | None = None, ms: str | None = None, sample: int | None = None,
               seed: int = 0, gemms: str | None = None) -> SweepPlan:
    """The plan of one `advisor collect` call for a registered family; bad options raise AdvisorError with
    the fix."""
    declared = family_named(family)
    if sample is not None and sample <= 0:
        raise AdvisorError(f"--sample {sample} must be positive")
    plan = declared.plan(CollectOptions(shapes, ms, sample, seed, gemms))
    # A worker process of a sweep spread over GPUs builds the same plan again from the same options.
    rebuild = functools.partial(build_plan, family, shapes, ms, sample, seed, gemms)
    return SweepPlan(kernel=declared.kernel, specs=plan.specs, configs=plan.configs, make_case=declared.case,
                     compile_fn=declared.compile_config, prefilter=plan.prefilter, abort_ratio=1.5, rebuild=rebuild)


def collect(family: str, out: str | Path, *, shapes: str | None = None, ms: str | None = None,
            sample: int | None = None, seed: int = 0, gemms: str | None = None, deadline_s: float | None = None,
            workers: int | None = None, show_progress: bool = False, gpus: list[str] | None = None) -> dict:
    """Run (or resume) one family's collection into OUT/<family>_collect.csv; returns the sweep summary.
    `gpus`: devices to spread it over (`advisor.measure.spread.visible_gpus`), None for this process's GPU."""
    plan = build_plan(family, shapes, ms, sample, seed, gemms)
    import torch

    if not torch.cuda.is_available():
        raise AdvisorError("advisor collect measures on a GPU and none is visible here; run it on a CUDA machine")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / family_named(family).csv_name
    summary = run_sweep(plan, path, workers=workers, deadline_s=deadline_s, show_progress=show_progress, gpus=gpus)
    features = None
    try:  # the feature row of every fully timed point, as the model sees it (rebuilt from the CSV at any time)
        from advisor.model.dataset import load_sweeps

        features = str(load_sweeps([path]).write_features(path.with_suffix(".features.csv")))
    except AdvisorError:  # nothing fully timed yet (a deadline hit early)
        pass
    return dict(summary, csv=str(path), features=features, configs=len(plan.configs), cases=len(plan.specs))
