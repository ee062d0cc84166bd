"""`advisor calibrate --kernel FILE --call EXPR`: a short adaptive sweep that calibrates the model for
one kernel on this GPU (advisor.model.kernel_calibration).

Each step times one config and re-fits the kernel's correction before choosing the next: first the
current config (the reference every suggestion is judged against; for an autotuned launch, the autotuner's
expected pick: `reference`, timed again, as a step of its own, whenever the corrections move it to an untimed
config), then in turn the config predicted fastest (where a wrong prediction costs most) and the config
farthest in the kernel's config space from those timed (`kernel_calibration.spread_pick`: the timed configs
correct their neighbours, so they should cover the space), never one already timed nor one that compiles to the
same program as one timed (`search.one_time_per_binary`: its time is known). 3 to 8 timings per
launch; every one is stored with the kernel's other timings, so `suggest` on the kernel afterwards ranks with
the correction.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from advisor.advice.search import Candidate, Subject, binary_of, record_timings, record_wrong
from advisor.model.kernel_calibration import spread_pick
from ceilings.errors import AdvisorError
from ceilings.launch import Config
from ceilings.validate import config_problem

MIN_CONFIGS, MAX_CONFIGS = 3, 8


def next_config(candidates: list[Candidate], timed: set[Config], current: Config, step: int) -> Candidate | None:
    """The config to time next (module docstring): the reference `current` while it is untimed, else at an odd
    `step` the config predicted fastest and at an even one the farthest from those timed (`step`: the
    alternation's picks so far, plus one once the reference was timed); None when all are timed. A config that
    compiles to the program of a timed one (`Demand.binary`) counts as timed."""
    ran = {binary_of(c) for c in candidates if c.config in timed} - {None}
    untimed = [c for c in candidates if c.config not in timed and binary_of(c) not in ran]
    if not untimed:
        return None
    # The reference comes first, and again whenever it is untimed: an autotuned launch's reference is the
    # list's config predicted fastest, which the corrections of earlier timings can move to another one.
    # Left untimed, `suggest` weighed timed configs against its prediction alone (RESULTS 64: a 1.24x
    # slower config named over an autotuner pick predicted 1.39x too slow).
    mine = [c for c in untimed if c.config == current]
    if mine:
        return mine[0]
    if step % 2 == 1:
        return min(untimed, key=lambda c: c.predicted_us)
    configs = [c.config.to_dict() for c in candidates]
    # Distances use the model's own prediction (before the kernel's timings), as the correction does.
    log_us = [math.log(max(c.model_us if c.model_us is not None else c.predicted_us, 1e-12)) for c in candidates]
    done = [i for i, c in enumerate(candidates) if c.config in timed]
    pick = spread_pick(configs, log_us, done)
    return None if pick is None else candidates[pick]


def reference(subject: Subject, candidates: list[Candidate]) -> Config:
    """The config the sweep times first: the one that runs. For an autotuned launch captured without a GPU
    that is not the recorded config (its list's first) but the autotuner's pick, which `suggest` shows as
    the current config (`advisor.advice.autotuner_pick`): the list's config predicted fastest. Timing the
    first instead left the config that runs untimed, and a slower timed one stood in for it (RESULTS 50)."""
    if not getattr(subject, "autotuner_picks", False):
        return subject.current
    listed = [c for c in candidates if not subject.listed or c.config in subject.listed]
    return min(listed, key=lambda c: c.predicted_us).config if listed else subject.current


def feasible_configs(subject: Subject) -> list[Config]:
    """The current config and the subject's space, in that order, less those the GPU's limits rule out."""
    return [c for c in dict.fromkeys([subject.current, *subject.space()])
            if config_problem(c, subject.spec, subject.precheck) is None]


def sweep(subject: Subject, count: int = 6, measure: Callable[[Config], float] | None = None,
          progress: Callable[[str], None] | None = None) -> list[tuple[Config, float, float]]:
    """Time `count` configs of the subject chosen adaptively; (config, predicted us before its timing,
    measured us) per step. `measure`: config -> us (default: the subject's measurer, on a GPU)."""
    if not MIN_CONFIGS <= count <= MAX_CONFIGS:
        raise AdvisorError(f"--configs {count}: give {MIN_CONFIGS} to {MAX_CONFIGS} configs to time per launch")
    from advisor.measure.timing import MeasurementError, WrongResult

    run = measure or subject.measurer()
    feasible = feasible_configs(subject)
    timed: set[Config] = set()
    wrong: set[tuple] = set()  # programs that computed another result (Config.program)
    out = []
    reference_timed, others = False, 0  # the alternation's picks timed so far
    for _attempt in range(count * 2):  # configs that fail to run do not count, up to as many again
        if len(out) >= count:
            break
        candidates = [c for c in subject.predict(feasible)
                      if c.ceiling.ctas_per_sm > 0 and c.config.program not in wrong]
        current = reference(subject, candidates)
        # The alternation counts its own picks: a reference timed again takes a step, not the fastest's turn.
        pick = next_config(candidates, timed, current, others + reference_timed)
        if pick is None:
            break
        timed.add(pick.config)
        try:
            us = run(pick.config)
        except MeasurementError as exc:
            if isinstance(exc, WrongResult):  # its warps and stages twins compute the same: not timed either
                record_wrong(subject, pick.config)
                wrong.add(pick.config.program)
            if progress:
                progress(f"{subject.label}: {pick.config.label()} not timed ({exc})")
            continue
        record_timings(subject, [(pick, us)])
        out.append((pick.config, pick.predicted_us, us))
        if pick.config == current:
            reference_timed = True
        else:
            others += 1
        if progress:
            progress(f"{subject.label}: {pick.config.label()} predicted {pick.predicted_us:.1f} us, "
                     f"measured {us:.1f} us")
    return out
