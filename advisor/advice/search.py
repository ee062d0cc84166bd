"""Config search: prune what cannot run, rank the rest by predicted latency, explain the best.

A `Subject` is one launch whose config can change, on one resolved GPU (`ceilings.hardware.GPU`): its
config space, an analytic precheck against the GPU's limits, the ceiling of any config (a kernel
family's exact demand, or compiled SASS for any other kernel; the subjects are in
`advisor.advice.subjects`), and where its current config is written. `search` prunes the space with the
precheck, ranks every survivor by the latency model (ceiling x predicted efficiency), compiles the
finalists for the target architecture to confirm they fit (shared memory, registers, spills), and
returns the top k with ceiling, prediction, interval and a reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from advisor.advice.compile_pool import OUT_OF_TIME, Progress, compile_ahead, reporting, search_deadline
from ceilings.compile_limit import search_limit_s
from ceilings.errors import AdvisorError
from ceilings.hardware import GPU, GPUSpec
from ceilings.launch import Config, Launch
from ceilings.roofline import Ceiling, model_ceiling_us
from ceilings.validate import config_problem, launch_problem, unrunnable_ceiling


@dataclass(frozen=True)
class Location:
    """Where a config is written: a file and a 1-based line (for editor and CI annotations)."""

    path: str
    line: int
    what: str = ""


@dataclass
class Candidate:
    config: Config
    ceiling: Ceiling
    predicted_us: float
    interval: tuple[float, float]
    notes: list[str] = field(default_factory=list)
    measured_us: float | None = None
    model_us: float | None = None  # the model's prediction before the kernel's own timings corrected it
    outside_data: bool = False     # its features are far from the model's training rows (advisor.model.confidence)
    corrected_by: int = 0          # timings of this kernel on this GPU that corrected the prediction
    timed_before: bool = False     # this config's time at this launch is one of those timings (predicted_us)

    @property
    def efficiency(self) -> float:
        return self.ceiling.ceiling_us / self.predicted_us if self.predicted_us else 0.0

    @property
    def extrapolated(self) -> bool:
        """Its prediction extrapolates a knob past the values the model was fitted on, and no timing of
        this config stands in for it (`advisor.model.knob_range`)."""
        from advisor.model.knob_range import is_knob_note

        return not self.timed_before and any(is_knob_note(n) for n in self.notes)

    def to_json(self) -> dict:
        return {"config": self.config.to_dict(), "label": self.config.label(),
                "ceiling_us": round(self.ceiling.ceiling_us, 3), "binding": self.ceiling.binding,
                "predicted_us": round(self.predicted_us, 3),
                "predicted_interval_us": [round(self.interval[0], 3), round(self.interval[1], 3)],
                "measured_us": None if self.measured_us is None else round(self.measured_us, 3),
                "waves": round(self.ceiling.waves, 3), "ctas_per_sm": self.ceiling.ctas_per_sm,
                "notes": self.notes}


class Subject:
    """One launch of a kernel whose config the advisor may change (see module docstring)."""

    kernel: str = ""
    label: str = ""
    gpu: GPU
    current: Config
    location: Location | None = None
    # The current config stands for an autotuner's pick that was not made (an autotuned launch captured without
    # a GPU records its list's first config): the search shows the pick instead (`advisor.advice.autotuner_pick`).
    autotuner_picks: bool = False
    # The configs of the kernel's autotune list, where the launch has one (LaunchSubject): the autotuner picks
    # among them, and a config found past them is one to add to the list.
    listed: frozenset = frozenset()

    @property
    def spec(self) -> GPUSpec:
        return self.gpu.spec

    def space(self) -> list[Config]:
        raise NotImplementedError

    def precheck(self, config: Config) -> str | None:
        return None

    def ceilings(self, configs: Sequence[Config]) -> list[Ceiling]:
        raise NotImplementedError

    def confirm(self, config: Config) -> tuple[str | None, list[str]]:
        """Compile for the target: (why it cannot run, or None; notes such as spills)."""
        return None, []

    def compile_problems(self, configs: Sequence[Config]) -> dict[Config, str]:
        """The configs whose ceiling needs a compile that fails (or runs past the compile limit), with why;
        none for a subject whose ceilings need no compile."""
        return {}

    def confirm_launches(self, configs: Sequence[Config]) -> list[Launch]:
        """The launches `confirm` compiles for these configs, which `search` compiles ahead in parallel
        (advisor.advice.compile_pool); none where confirming needs no compile of its own."""
        return []

    def useful_flops(self) -> float | None:
        """The tensor work the launch must do (to tell padding apart), when known."""
        return None

    def kernel_source(self) -> str | None:
        """The kernel's file, whose timings calibrate the model for it (advisor.model.kernel_calibration)."""
        return None

    def predict(self, configs: Sequence[Config], model=None) -> list[Candidate]:
        return predict_candidates(self, configs, model)

    def measurer(self):
        """A callable config -> measured us (checked against a reference); needs a GPU."""
        raise AdvisorError(f"{self.label}: measuring this kind of launch is not supported")


@dataclass
class Advice:
    subject: Subject
    current: Candidate
    ranked: list[Candidate]
    considered: int
    pruned: Counter
    measured: int = 0                      # configs timed on a GPU (--measure)
    why: str = ""
    cannot_run: str | None = None          # why the current config cannot run on the GPU (a finding)
    basis: str = "predicted"               # what the verdict rests on (advisor.advice.measured.weigh)
    notes: list[str] = field(default_factory=list)  # what the verdict rests on that may be wrong

    @property
    def best(self) -> Candidate:
        return self.ranked[0] if self.ranked else self.current

    def time_of(self, c: Candidate) -> float:
        """What the advice judges a candidate by: its measured time when the advice was timed, else predicted."""
        return c.measured_us if self.measured and c.measured_us is not None else c.predicted_us

    def gains(self, min_speedup: float) -> bool:
        """Whether another config beats the current one by more than `min_speedup`."""
        return self.best.config != self.current.config and (self.cannot_run is not None
                                                            or self.speedup > min_speedup)

    @property
    def speedup(self) -> float:
        best = self.time_of(self.best)
        return self.time_of(self.current) / best if best else 1.0

    @property
    def headroom(self) -> float:
        """How many times slower than its own ceiling the current config runs (predicted or measured)."""
        return self.time_of(self.current) / self.current.ceiling.ceiling_us

    @property
    def caveats(self) -> list[str]:
        """What the advice's numbers rest on that may not hold, once each: the search's own (a space cut
        to the configs nearest the current one), the notes of the current and suggested configs'
        ceilings (loop bounds counted once, data-dependent exits, the warm-L2 assumption and the working
        set it assumed, unknown rates) and the latency model's (a kernel outside its training data).
        Compile facts (spills) are findings, not caveats: they stay in the candidates' notes."""
        notes = list(getattr(self.subject, "notes", []))
        for cand in (self.current, self.best):
            if cand.ceiling is not None:
                notes += cand.ceiling.notes
        # Why the current config cannot run is the finding itself (the unrunnable ceiling's one note).
        # The latency model's: a launch outside its training data (by feature distance), and the
        # advice's own notes (a close call, corrections by this kernel's timings).
        from advisor.model.predict import is_outside_note, outside_note_distance

        outside = [n for cand in (self.current, self.best) for n in cand.notes if is_outside_note(n)]
        # one caveat per launch: the current and the suggested config are the same launch, and two lines
        # with two distances read as two launches; the farther one says it
        notes += sorted(outside, key=outside_note_distance)[-1:]
        # a knob outside the model's fitted range (the current config's own, as the suggestion's
        # cannot be one without timings: `_search`)
        from advisor.model.knob_range import is_knob_note

        notes += [n for cand in (self.current, self.best) for n in cand.notes if is_knob_note(n)]
        # the autotuner's pick changes what "current" means: said first, where a short report shows it
        picks = [n for n in self.notes if n.startswith(AUTOTUNED_NOTE)]
        # what Triton's interpreter said of the suggested config, and of configs it found computing another
        # result, next: whether the advice can be applied at all comes before how sure its numbers are
        checked = [n for n in self.notes if INTERPRETED_OTHER in n]
        if self.best.config != self.current.config:
            checked = [n for n in self.best.notes if n.startswith(INTERPRETED_NOTES)][:1] + checked
        return [n for n in dict.fromkeys(picks + checked + notes + self.notes) if n != self.cannot_run]

    def _ranked_json(self, cand: Candidate) -> dict:
        """A ranked candidate, with whether its kernel's autotune list holds it (where the launch has one)."""
        out = cand.to_json()
        if self.subject.listed:
            out["in_autotune_list"] = cand.config in self.subject.listed
        return out

    def to_json(self) -> dict:
        s = self.subject
        return {"launch": s.label, "kernel": s.kernel, "gpu": s.spec.name,
                "location": None if s.location is None else {"path": s.location.path, "line": s.location.line,
                                                              "what": s.location.what},
                "current": self.current.to_json(), "best": self.best.to_json(),
                "speedup": round(self.speedup, 4), "headroom": round(self.headroom, 4),
                "binding": self.current.ceiling.binding, "why": self.why,
                "ranked": [self._ranked_json(c) for c in self.ranked], "considered": self.considered,
                "pruned": dict(self.pruned), "measured": self.measured, "basis": self.basis,
                "caveats": self.caveats, "notes": self.notes}


# ----------------------------------------------------------------------------------------------- ranking

def predict_candidates(subject: Subject, configs: Sequence[Config], model=None) -> list[Candidate]:
    """Ceilings and predictions for `configs`, in their order."""
    from advisor.model.features import FEATURES, feature_row
    from advisor.model.predict import at_least_the_floor

    if not configs:
        return []
    model = model or _model(subject.gpu)
    ceilings = subject.ceilings(configs)
    rows = [feature_row(c, c.demand, cfg, subject.spec) for c, cfg in zip(ceilings, configs, strict=True)]
    x = np.array([[r[f] for f in FEATURES] for r in rows], dtype=np.float32)
    ceiling_us = np.array([model_ceiling_us(c) for c in ceilings])
    raw = model.predict_us(ceiling_us, x)
    mid, lo, hi = at_least_the_floor(ceilings, *raw)
    # model_us keeps the model's own figure: the per-kernel calibration corrects the model's ratios, not the floor's
    out = [Candidate(cfg, c, float(m), (float(a), float(b)), list(c.notes) + notes, model_us=float(r),
                     outside_data=bool(notes))
           for cfg, c, m, a, b, r, notes in zip(configs, ceilings, mid, lo, hi, raw[0], model.outside_notes(x),
                                                 strict=True)]
    timings = kernel_timings(subject)
    if timings is not None and timings.points:
        from advisor.model.kernel_calibration import model_log_ratios

        fixed = at_least_the_floor(ceilings, *timings.correct(ceiling_us, *model_log_ratios(model, ceiling_us, x),
                                                              configs=[cfg.to_dict() for cfg in configs],
                                                              launch=subject.label))
        for i, cand in enumerate(out):
            cand.predicted_us, cand.interval = float(fixed[0][i]), (float(fixed[1][i]), float(fixed[2][i]))
            cand.corrected_by = len(timings.points)
            earlier = timings.measured(cand.config.to_dict(), subject.label)
            if earlier is not None:
                cand.predicted_us, cand.timed_before = earlier, True
                cand.notes.append(f"measured {earlier:.1f} us on this GPU before")
        out[0].notes.append(f"corrected by {len(timings.points)} timings of this kernel on {subject.spec.name}")
    one_time_per_binary(out, subject.current)
    return out


def one_per_binary(ranked: Sequence[Candidate], current: Candidate | None) -> tuple[list[Candidate], int]:
    """`ranked` without the configs that compile to the current config's program or to one listed before them
    (`Demand.binary`): they run in the same time, so naming one is no change, and timing two is one timing spent
    twice. Returns the list kept and how many were left out."""
    seen = {binary_of(current)} if current is not None else set()
    kept = []
    for cand in ranked:
        key = binary_of(cand)
        if key is not None and key in seen and (current is None or cand.config != current.config):
            continue
        seen.add(key)
        kept.append(cand)
    return kept, len(ranked) - len(kept)


def binary_of(cand: Candidate) -> str | None:
    """The compiled program a candidate runs (`Demand.binary`), None where not known."""
    demand = getattr(cand.ceiling, "demand", None)  # a hand-made candidate may have no ceiling
    return getattr(demand, "binary", None)


def one_time_per_binary(cands: Sequence[Candidate], current: Config | None = None) -> None:
    """Configs that compile to one program (`Demand.binary`: a num_stages with no loop to pipeline) run in one
    time. A timing of any of them is the time of all (the fastest, if several were timed); else the current
    config's prediction where it is one of them (a twin of it is no change), else the geometric mean of theirs.
    The model reads num_stages as a feature, and the calibration's neighbours count num_stages 1 and 3 as far
    apart: set 16's cross-entropy backward, whose num_stages 1-4 are one cubin, was predicted 14% faster at 1 than
    its own timing at 3, named, and ran as slow (benchmarks/RESULTS.md section 66)."""
    groups: dict[str, list[Candidate]] = {}
    for cand in cands:
        if (key := binary_of(cand)) is not None and math.isfinite(cand.predicted_us):
            groups.setdefault(key, []).append(cand)
    for group in groups.values():
        if len(group) < 2:
            continue
        timed = [c for c in group if c.timed_before]
        source = min(timed, key=lambda c: c.predicted_us) if timed else \
            next((c for c in group if c.config == current), None)
        if source is not None:
            mid, interval, model_us = source.predicted_us, source.interval, source.model_us
        else:
            mid = statistics.geometric_mean(c.predicted_us for c in group)
            model_us = statistics.geometric_mean(c.model_us or c.predicted_us for c in group)
            interval = (statistics.geometric_mean(c.interval[0] for c in group),
                        statistics.geometric_mean(c.interval[1] for c in group))
        for cand in group:
            if cand in timed:  # its own timing stands
                continue
            if timed:
                cand.notes.append(f"the same compiled kernel as {source.config.label()}, measured {mid:.1f} us on "
                                  "this GPU before")
                cand.timed_before = True
            cand.predicted_us, cand.interval, cand.model_us = mid, interval, model_us


def kernel_timings(subject: Subject):
    """The stored timings of the subject's kernel on its GPU (None: its source is not known)."""
    from advisor.model.kernel_calibration import KernelTimings

    source = subject.kernel_source()
    if source is None:
        return None
    try:
        return KernelTimings.load(source, subject.kernel, subject.spec.name)
    except OSError:  # the file went away: nothing to key the timings by
        return None


def timed_configs(subject: Subject) -> list[Config]:
    """The configs with a stored timing at this launch (its label) on its GPU, in the order they were timed."""
    timings = kernel_timings(subject)
    if timings is None:
        return []
    return list(dict.fromkeys(Config.from_dict(p.config) for p in timings.points if p.launch == subject.label))


def record_timings(subject: Subject, timed: Sequence[tuple[Candidate, float]]) -> None:
    """Keep measured times of candidates for the kernel's calibration (advisor.model.kernel_calibration)."""
    timings = kernel_timings(subject)
    if timings is None:
        return
    for cand, us in timings_of(timed):
        raw = cand.model_us if cand.model_us is not None else cand.predicted_us
        ceiling_us = model_ceiling_us(cand.ceiling)
        timings.add(cand.config.to_dict(), subject.label, ceiling_us, math.log(max(raw, 1e-9) / ceiling_us), us)
    with contextlib.suppress(OSError):  # a read-only cache folder costs the calibration, never the command
        timings.save()


def record_wrong(subject: Subject, config: Config) -> None:
    """Keep that `config` computed another result than the launch's own config when timed (`wrong_result`)."""
    timings = kernel_timings(subject)
    if timings is None:
        return
    timings.add_wrong(config.to_dict(), subject.label)
    with contextlib.suppress(OSError):
        timings.save()


def wrong_result(subject: Subject, config: Config, timings=None) -> str | None:
    """Why `config` is no candidate when a config of its meta-parameters computed another result at this launch
    on this GPU (`KernelTimings.gave_wrong`), else None."""
    timings = timings if timings is not None else kernel_timings(subject)
    found = timings.gave_wrong(config.to_dict(), subject.label) if timings is not None else None
    if found is None:
        return None
    return (f"computes another result than the launch's own config: {Config.from_dict(found['config']).label()} "
            f"did when timed on {subject.spec.name} ({found['date']}), and num_warps / num_stages do not change it")


def timings_of(timed):
    return [(c, us) for c, us in timed if us is not None and math.isfinite(us) and c.ceiling.ceiling_us > 0]


def _model(gpu: GPU):
    from advisor.model.predict import model_for

    return model_for(gpu)


# A speed-up below this prints as 1.00x: no gain (`search` keeps the current config, `explain` says so).
NO_GAIN = 1.005


def search(subject: Subject, top_k: int = 5, confirm: bool = True, model=None, measure: int = 0,
           progress: Progress | None = None) -> Advice:
    """Rank the subject's config space; with `measure` > 0 time the current and top configs on the GPU.

    Compiles (the demand of a kernel without an exact model, the confirmation of the finalists) run
    in parallel worker processes (advisor.advice.compile_pool) and report to `progress(done, total,
    what)` when given (a CLI's progress bar, a TUI's status)."""
    with reporting(progress), search_deadline(search_limit_s()):
        return _search(subject, top_k, confirm, model, measure)


def _search(subject: Subject, top_k: int, confirm: bool, model, measure: int) -> Advice:
    # A config timed at this launch before (`advisor calibrate --kernel`, an earlier --measure) is always a
    # candidate: its time is the best evidence there is, and the space searched can differ from the one the
    # timings were chosen from (an autotuned kernel's space follows the expected pick, which the timings move).
    if confirm and not measure and hasattr(subject, "result_check"):
        from advisor.advice.result_check import limit_s

        limit_s()  # a limit that is no number is said before any work, whether or not the check then runs
    space = list(dict.fromkeys([*subject.space(), *timed_configs(subject)]))
    pruned: Counter = Counter()
    feasible = []
    stored = kernel_timings(subject)
    for config in space:
        why = (wrong_result(subject, config, stored) if config != subject.current else None) or \
            config_problem(config, subject.spec, subject.precheck)
        if why:
            pruned[_short(why)] += 1
        else:
            feasible.append(config)
    # The current config passes the same validator; one that cannot run gets no time (ceilings.validate).
    cannot_run = config_problem(subject.current, subject.spec, subject.precheck)
    # One prediction of the current config and the feasible ones: their compiles run in one parallel batch.
    batch = list(dict.fromkeys(([] if cannot_run else [subject.current]) + feasible))
    failing = subject.compile_problems(batch)  # a config that does not compile is no candidate
    for config, why in failing.items():
        if config == subject.current:
            cannot_run = why
        else:
            pruned[_short(why)] += 1
    feasible = [c for c in feasible if c not in failing]
    batch = [c for c in batch if c not in failing]
    _note_search_limit(subject, failing, len(space))
    predicted = dict(zip(batch, subject.predict(batch, model), strict=True))
    if not cannot_run:
        # Its own object: the confirm step below adds notes to the current and to each finalist.
        current = dataclasses.replace(predicted[subject.current], notes=list(predicted[subject.current].notes))
        cannot_run = launch_problem(current.ceiling, subject.spec)
    if cannot_run:
        current = Candidate(subject.current, unrunnable_ceiling(subject.spec, subject.kernel, subject.current,
                                                                cannot_run), math.inf, (math.inf, math.inf), [])
    ranked = []
    for cand in (predicted[c] for c in feasible):
        if cand.ceiling.ctas_per_sm == 0:
            pruned["a CTA does not fit on an SM (registers or shared memory)"] += 1
        else:
            ranked.append(cand)
    # Without timings a config whose knob lies past the model's fitted values (a guess, however fast it is
    # predicted) ranks after every config the model has evidence for; timings (`measure`) judge it as any.
    ranked.sort(key=lambda c: (c.extrapolated and not measure, c.predicted_us))
    ranked, twins = one_per_binary(ranked, None if cannot_run else current)
    if twins:
        pruned["the same compiled kernel as the current config or one ranked before it"] += twins
    want = top_k if not measure else 0  # with timings, advisor.advice.timed_pick chooses what to time
    if confirm:  # the finalists' and the current config's confirming compiles, in parallel, into the cache
        first = [c.config for c in ranked[:max(want, measure)]] + ([] if cannot_run else [subject.current])
        launches = subject.confirm_launches(first)
        if launches:
            compile_ahead(launches, subject.spec.arch)
    # Without timings a config that spills registers where the current config does not is listed after every
    # config that does not, and never named (SPILL_NOTE); timings judge it as any.
    current_notes = subject.confirm(subject.current)[1] if confirm and not cannot_run else []
    demote = bool(confirm and want and not cannot_run and not spill_bytes(current_notes))
    finalists, spilling = _confirmed(subject, ranked, want, confirm, demote, pruned)
    if confirm and not measure and not cannot_run and hasattr(subject, "result_check"):
        finalists, search_notes = _results_checked(subject, finalists, ranked, pruned, want)
    else:
        search_notes = []
    if finalists and finalists[0] in spilling:  # every config that would gain spills: the current config stays
        finalists = [current] + [c for c in finalists if c.config != subject.current]
        search_notes.insert(0, f"the configs predicted faster all spill registers where {subject.current.label()} "
                              "does not: not named without timings; time them with --measure")
    if confirm and not cannot_run:
        current.notes = current_notes + current.notes
    advice = Advice(subject, current, finalists, len(space), pruned, cannot_run=cannot_run)
    advice.notes += search_notes
    if measure:
        from advisor.advice.timed_pick import made_up_control_data, made_up_indices, time_configs

        timed = time_configs(subject, advice, current, ranked, measure, subject.measurer(), confirm, model)
        advice.ranked = timed
        advice.measured = len(timed)
        untimed = [c.config for c in ranked if c.config not in {t.config for t in timed}]
        advice.notes += rerank_untimed(subject, untimed, timed, model)
        advice.notes += made_up_control_data(subject, current)  # advisor.advice.timed_pick
        advice.notes += made_up_indices(subject)
    listed = subject.listed
    list_size = len(listed) or len(space)  # the configs the autotuner picks among
    if subject.autotuner_picks:
        from advisor.advice.autotuner_pick import stand_for_autotuner

        in_list = [c for c in (advice.ranked if measure else (predicted[c] for c in feasible))
                   if (not listed or c.config in listed) and c.ceiling.ctas_per_sm]
        stand_for_autotuner(advice, in_list, subject.confirm if confirm and not measure else None, list_size)
    if advice.ranked and advice.speedup < NO_GAIN:
        # Nothing ranked beats the current config by a gain the report can show: it stays the suggestion
        # (listed once), so a "1.00x" is never reported as a change.
        advice.ranked = [advice.current] + [c for c in advice.ranked if c.config != advice.current.config]
    kept = keep_current(advice, model)
    advice.why = explain(advice)
    if subject.autotuner_picks and not advice.cannot_run and advice.best.config == advice.current.config:
        cur = advice.current
        advice.why = (f"autotuned: the autotuner picks among its {list_size} configs by timing "
                      f"on the GPU; {'the fastest timed' if advice.measured else 'its expected pick'}, "
                      f"{cur.config.label()}, runs at {cur.ceiling.ceiling_us / advice.time_of(cur):.0%} of its "
                      f"ceiling, bound by {cur.ceiling.binding}, and no config searched is expected to beat it")
    if kept:
        advice.notes += kept
        advice.why = kept[0]
    if listed and advice.best.config not in listed and advice.gains(1.0):
        built = subject.location is not None and "built by code" in subject.location.what
        advice.notes.append(f"{advice.best.config.label()} is not in the kernel's autotune list, so the autotuner "
                            "cannot pick it until it is added ("
                            + ("the list is built by code: `advisor apply` says what to add where)" if built
                               else "`advisor apply` adds it)"))
    close = close_call(advice, model)
    if close:
        advice.notes += close
        advice.why += "; a gain within the model's error, not a measured one: confirm it with --measure"
    return advice


SPILL_LOOK = 4  # configs confirmed per finalist wanted, at most, while looking past ones that spill
SPILL_NOTE = ("{} B per thread of register spills where the current config has none: listed after the configs "
              "without and never named without timings (on the corpus a launch's fastest spilling config beat its "
              "fastest non-spilling one at 3 of 23 launches, H100, RESULTS 53); time it with --measure")


def _confirmed(subject: Subject, ranked: list[Candidate], want: int, confirm: bool, demote: bool, pruned: Counter
               ) -> tuple[list[Candidate], list[Candidate]]:
    """The first `want` of `ranked` whose confirming compile passes (the others counted in `pruned`), with those
    that spill registers listed after the others when `demote` (the current config does not spill); and the
    spilling ones."""
    finalists: list[Candidate] = []
    spilling: list[Candidate] = []
    for cand in ranked:
        if len(finalists) >= want or len(finalists) + len(spilling) >= SPILL_LOOK * want:
            break
        if confirm:
            why, notes = subject.confirm(cand.config)
            if why:
                pruned[_short(why)] += 1
                continue
            cand.notes = notes + cand.notes
            if demote and spill_bytes(notes):
                cand.notes.insert(0, SPILL_NOTE.format(spill_bytes(notes)))
                spilling.append(cand)
                continue
        finalists.append(cand)
    return finalists + spilling[:max(0, want - len(finalists))], spilling


def spill_bytes(notes: Sequence[str]) -> int:
    """The local memory per thread a confirming compile found (`subjects._confirm`'s note), 0 if none."""
    found = [re.match(r"(\d+) B per thread of register spills", n) for n in notes]
    return max((int(m.group(1)) for m in found if m), default=0)


INTERPRETED_SAME = "computes the same result as the current config in Triton's interpreter"
INTERPRETED_OTHER = "another result than the current config in Triton's interpreter"
INTERPRETED_WRONG = f"computes {INTERPRETED_OTHER}"
INTERPRETED_UNCHECKED = "not checked in Triton's interpreter"
INTERPRETED_NOTES = (INTERPRETED_SAME, INTERPRETED_UNCHECKED)


def _results_checked(subject: Subject, finalists: list[Candidate], ranked: list[Candidate], pruned: Counter,
                     want: int) -> tuple[list[Candidate], list[str]]:
    """The finalists without those that compute another result than the current config, run in Triton's
    interpreter without a GPU (`advisor.advice.result_check`, the ranking in order as far as its limits allow),
    topped up from the ranking. A config of the same meta-parameters as one found wrong goes too (num_warps /
    num_stages do not change what a program computes). Each config kept says what the check found or why it was
    not checked; a note names what was found wrong."""
    from advisor.advice.result_check import MAX_CANDIDATES, SAME

    if all(c.config.program == subject.current.program for c in finalists):
        return finalists, []  # nothing listed would change the program
    order = [*finalists, *(c for c in ranked if c not in finalists)]  # the finalists' order first (spills last)
    verdicts = subject.result_check([c.config for c in order])
    if not verdicts.of and not verdicts.unchecked:
        return finalists, []
    said = {c.program: why for c, why in verdicts.of.items()}
    kept: list[Candidate] = []
    for cand in order:
        if len(kept) >= want:
            break
        verdict = said.get(cand.config.program, "unchecked")
        if verdict not in (SAME, None, "unchecked"):
            pruned[INTERPRETED_WRONG] += 1
            continue
        if cand not in finalists:  # a config the first pass did not reach: confirmed as the finalists were
            why, notes = subject.confirm(cand.config)
            if why:
                continue
            cand.notes = [n for n in notes if n not in cand.notes] + cand.notes
        if verdict == SAME:
            cand.notes.insert(0, f"{INTERPRETED_SAME} ({verdicts.how()})")
        elif cand.config.program != subject.current.program:
            cand.notes.insert(0, f"{INTERPRETED_UNCHECKED}: " + (
                f"the programs run ({verdicts.how()}) wrote no element in common with the current config's"
                if verdict is None else verdicts.unchecked or f"the check stops after {MAX_CANDIDATES} configs"))
        kept.append(cand)
    # "OUT differs from the reference: relative error 1.29 > 0.01 over 64 elements" -> "OUT differs: relative
    # error 1.29"
    wrong = [f"{c.label()} ({why.split(' > ')[0].replace(' from the reference', '')})"
             for c, why in verdicts.of.items() if why not in (SAME, None)]
    if not wrong:
        return kept, []
    many = len(wrong) > 1
    shown = "; ".join(wrong[:3]) + (f"; and {len(wrong) - 3} more" if len(wrong) > 3 else "")
    return kept, [f"{len(wrong)} config{'s' if many else ''} compute{'' if many else 's'} {INTERPRETED_OTHER} "
                  f"({verdicts.how()}), not listed nor {'their' if many else 'its'} num_warps / num_stages twins: "
                  f"{shown}"]


AUTOTUNED_NOTE = "autotuned over"  # the start of advisor.advice.autotuner_pick's note


def _note_search_limit(subject: Subject, failing: dict[Config, str], searched: int) -> None:
    """First among the launch's caveats (its own search's), how many configs the time limit left unranked."""
    notes = getattr(subject, "notes", None)
    if not isinstance(notes, list):
        return
    notes[:] = [n for n in notes if not n.startswith(SEARCH_CUT_NOTE)]  # a new search says it anew
    late = [why for why in failing.values() if why.startswith(OUT_OF_TIME)]
    if late:
        notes.insert(0, f"{SEARCH_CUT_NOTE}: {len(late)} of {searched} configs were {late[0]} and are not ranked "
                        "(raise the limit to search them)")


SEARCH_CUT_NOTE = "search cut short"  # the caveat's start (the TUI raises it as a warning)


def rerank_untimed(subject: Subject, untimed: Sequence[Config], timed: Sequence[Candidate], model=None) -> list[str]:
    """The configs not timed, re-predicted with the timings just kept: a note when one of them is now
    predicted faster than the best measured (worth timing next)."""
    best = min((c.measured_us for c in timed if c.measured_us is not None), default=None)
    stored = kernel_timings(subject)  # configs found to compute another result are no lead to time
    untimed = [c for c in untimed if stored is None or wrong_result(subject, c, stored) is None]
    if best is None or not untimed:
        return []
    again = sorted(subject.predict(list(untimed)[:64], model), key=lambda c: c.predicted_us)
    if not again or not again[0].corrected_by or again[0].predicted_us >= best:
        return []
    lead = again[0]
    return [f"re-ranked with this kernel's {lead.corrected_by} timings on {subject.spec.name}, "
            f"{lead.config.label()} (not timed) is predicted {lead.predicted_us:.1f} us against {best:.1f} us "
            "measured for the best timed: time more configs (a larger --measure)"]


def ranking_spread(advice: Advice, model=None) -> tuple[float | None, bool, bool]:
    """(the model's spread between configs of one launch, in log units; whether the launch is outside its
    data; whether the transfer model predicts it): its meta's `intervals.ranking_sd`, `ranking_sd_outside`
    for a launch outside its data, `ranking_sd_generic` for a generic-path launch."""
    model = model or _model(advice.subject.gpu)
    intervals = model.meta.get("intervals") or {}
    outside = advice.current.outside_data or advice.best.outside_data
    sd = intervals.get("ranking_sd_outside" if outside else "ranking_sd")
    generic = bool(intervals.get("ranking_sd_generic")) and advice.current.ceiling.demand_source.startswith("generic")
    if generic:
        # Predicted by the transfer model (advisor.model.routing): its spread on libraries it never saw.
        sd = max(intervals["ranking_sd_generic"], sd or 0.0) if outside else intervals["ranking_sd_generic"]
    return sd, outside, generic


# One-sided z of the gain the model's best must show over the current config of a generic-path launch before
# `suggest`, without timings, names it instead of the current config: exp(KEEP_Z sqrt(2) sd). Chosen by
# simulating the choice over the corpus's timed configs with the transfer model's held-out-library predictions
# (benchmarks/corpus/sim_advice.py, RESULTS section 28). On the design half of the kernels z 0.25 was the one
# value of the grid (0, 0.25, 0.5, 0.84) meeting both targets (not slower than own >= 95%, within 1.05x of
# the best >= 80%); on the check half it was not slower in only 84-88%, z 0.5 in 93-96% (within 1.05x: 73-76%
# either way), so 0.5, chosen on both halves. The 80% margin of `close_call` (z 0.84) kept the current config
# where the model's best was the better one too often (65-70% within 1.05x).
KEEP_Z = 0.5
# A config only the climb reached (LaunchSubject._climb: two or more steps in some knob from the current
# config) differs from it more than the corpus lists KEEP_Z was chosen on, so the model's error between the
# two is larger: it is named without timings only past `close_call`'s 80% margin. Chosen after the first
# climb named flashnn's int8 GEMM config M256 N128 K256 G4 w16 s1 at 1.21x predicted, which ran 0.71x
# (RESULTS 38 item 8): those unseen launches are not held out for this choice.
CLIMBED_Z = 0.8416


def keep_current(advice: Advice, model=None) -> list[str]:
    """Without timings, on a launch the transfer model predicts: when the model's best beats the current config
    by less than exp(KEEP_Z sqrt(2) sd), the current config stays the suggestion (listed first, the model's best
    second) and a note says so. The shipped families' exact-demand launches keep the model's best (their
    in-family error is small, RESULTS 8); the close-call note (`close_call`) still covers them. Where the kernel's
    own timings corrected the predictions, `keep_timed` decides instead."""
    if advice.measured or advice.cannot_run or advice.best.config == advice.current.config:
        return []
    if advice.current.corrected_by:
        return keep_timed(advice)
    sd, _, generic = ranking_spread(advice, model)
    if not generic or not sd:
        return []
    climbed = advice.best.config in getattr(advice.subject, "climbed", ())
    margin = math.exp((CLIMBED_Z if climbed else KEEP_Z) * math.sqrt(2.0) * sd)
    gain, lead = advice.speedup, advice.best
    if gain >= margin:
        return []
    advice.ranked = [advice.current] + [c for c in advice.ranked if c.config != advice.current.config]
    far = " (for a config several steps from the current one)" if climbed else ""
    # as many decimals as it takes to show the gain under the margin ("1.16x ... less than the 1.16x" read as a fault)
    digits = next((d for d in (2, 3, 4) if f"{gain:.{d}f}" != f"{margin:.{d}f}"), 4)
    return [f"{lead.config.label()} is predicted {gain:.{digits}f}x faster, less than the {margin:.{digits}f}x the "
            f"model's error between configs of one launch asks of a change made without timings{far}: the current "
            "config stays; time the leading configs with --measure"]


def keep_timed(advice: Advice) -> list[str]:
    """Where the kernel's own timings corrected the model (`advisor calibrate --kernel`, an earlier --measure): an
    untimed config replaces the fastest timed one only when predicted faster by more than the corrected
    prediction's own error, exp(KEEP_Z sqrt(2) SIGMA) (SIGMA: kernel_calibration's spread of one kernel's residuals
    after its correction); else the fastest timed config is the suggestion and a note says so. Without it a change
    inside timing noise was named (RESULTS 49: 4 of 14 fresh launches 0.4-1.8% slower after three timings); the
    corpus's three-timing simulation keeps its top-1 (86-90% within 1.03x) and is never slower than the launch's
    own config on 99-100% (92-95% before)."""
    from advisor.model.kernel_calibration import SIGMA

    timed = [c for c in (advice.current, *advice.ranked) if c.timed_before]
    if not timed or advice.best.timed_before:
        return []
    fastest = min(timed, key=lambda c: c.predicted_us)
    margin = math.exp(KEEP_Z * math.sqrt(2.0) * SIGMA)
    gain = fastest.predicted_us / advice.best.predicted_us
    if gain >= margin:
        return []
    lead = advice.best
    advice.ranked = [fastest] + [c for c in advice.ranked if c.config != fastest.config]
    return [f"{lead.config.label()} (not timed) is predicted {gain:.2f}x faster than {fastest.config.label()}, "
            f"measured {fastest.predicted_us:.1f} us here, less than the {margin:.2f}x a corrected prediction can be "
            "off: the fastest timed config stays; time the leading configs with --measure"]


def close_call(advice: Advice, model=None) -> list[str]:
    """A note when a predicted speed-up is within the model's error between two configs of one launch
    (`ranking_spread`)."""
    if advice.measured or advice.cannot_run or advice.best.config == advice.current.config:
        return []
    sd, outside, _ = ranking_spread(advice, model)
    if not sd or advice.current.corrected_by:  # the kernel's own timings already set its level
        return []
    # The error of a predicted ratio of two configs: sqrt(2) x the within-launch spread, one-sided 80%.
    margin = math.exp(0.8416 * math.sqrt(2.0) * sd)
    if advice.speedup >= margin:
        return []
    return [f"the predicted {advice.speedup:.2f}x is within the model's error between configs of one launch "
            f"(about {margin:.2f}x{' for a kernel outside its data' if outside else ''}): not a measured gain; "
            "time the top configs with --measure before changing the config"]


def _short(reason: str) -> str:
    """A reason's kind, for counting: its first clause with the numbers left out."""
    return re.sub(r"\d+", "#", reason.split(";")[0])[:80]


# ----------------------------------------------------------------------------------------------- reasons

def explain(advice: Advice) -> str:
    """One sentence: why the best config beats the current one, from their ceilings and predictions."""
    cur, best, s = advice.current, advice.best, advice.subject
    if advice.cannot_run:
        if best.config == cur.config:
            return (f"the current config cannot run on {s.spec.name}: {advice.cannot_run}; no config searched can "
                    "run either")
        return (f"the current config cannot run on {s.spec.name}: {advice.cannot_run}; {best.config.label()} is the "
                f"fastest {'measured' if advice.measured else 'predicted'} config that can")
    if best.config == cur.config or advice.speedup < NO_GAIN:
        eff = cur.ceiling.ceiling_us / advice.time_of(cur)
        return (f"the current config is already the best found; it runs at {eff:.0%} of its ceiling, "
                f"bound by {cur.ceiling.binding}")
    gain = f"{advice.speedup:.2f}x {_basis(advice)}"
    spills = [n for n in cur.notes if "spill" in n]
    if spills:
        return f"{spills[0]} in the current config; {best.config.label()} does not ({gain})"
    useful = s.useful_flops()
    cd, bd = cur.ceiling.demand, best.ceiling.demand
    if useful and cd and bd and cd.tensor_flops_per_cta and bd.tensor_flops_per_cta:
        waste_c = 1 - useful / (cd.tensor_flops_per_cta * cd.active_ctas)
        waste_b = 1 - useful / (bd.tensor_flops_per_cta * bd.active_ctas)
        if waste_c - waste_b > 0.1:
            effect = (f"which cuts the {cur.ceiling.binding}-bound ceiling from {cur.ceiling.ceiling_us:.1f} to "
                      f"{best.ceiling.ceiling_us:.1f} us" if best.ceiling.ceiling_us < 0.98 * cur.ceiling.ceiling_us
                      else "less wasted issue for the same ceiling")
            return (f"{waste_c:.0%} of the current tensor work is tile padding, {waste_b:.0%} with "
                    f"{best.config.label()}: {effect} ({gain})")
    sms = s.spec.sms
    if cur.ceiling.waves < 0.6 and best.ceiling.active_ctas > cur.ceiling.active_ctas * 1.5:
        return (f"the current config fills {cur.ceiling.active_ctas} CTAs on {sms} SMs ({cur.ceiling.waves:.2f} "
                f"waves); {best.config.label()} spreads the work over {best.ceiling.active_ctas} ({gain})")
    tail_c = cur.ceiling.waves - math.floor(cur.ceiling.waves) if math.isfinite(cur.ceiling.waves) else 0.0
    whole = math.isfinite(best.ceiling.waves) and abs(best.ceiling.waves - round(best.ceiling.waves)) < 0.15
    if cur.ceiling.waves > 1 and 0 < tail_c < 0.5 and whole:
        return (f"the current config ends in a partial wave ({cur.ceiling.waves:.2f} waves); "
                f"{best.config.label()} runs {best.ceiling.waves:.2f} waves ({gain})")
    if best.ceiling.ceiling_us < cur.ceiling.ceiling_us * 0.9:
        return (f"{best.config.label()} lowers the ceiling from {cur.ceiling.ceiling_us:.1f} to "
                f"{best.ceiling.ceiling_us:.1f} us (bound by {best.ceiling.binding}; current by "
                f"{cur.ceiling.binding}) ({gain})")
    if best.ceiling.ctas_per_sm != cur.ceiling.ctas_per_sm:
        return (f"{best.config.label()} runs {best.ceiling.ctas_per_sm} CTAs per SM (current "
                f"{cur.ceiling.ctas_per_sm}) and the model expects it nearer its ceiling: "
                f"{best.efficiency:.0%} vs {cur.efficiency:.0%} ({gain})")
    head = f"same {cur.ceiling.binding} ceiling within 10%, but"
    if best.timed_before and not cur.timed_before:
        return (f"{head} {best.config.label()} ran at {best.efficiency:.0%} of it here before, against the "
                f"{cur.efficiency:.0%} the model expects of the current config ({gain})")
    expects = (f"timings put {best.config.label()} at" if best.timed_before
               else f"the model expects {best.config.label()} to run at")
    return f"{head} {expects} {best.efficiency:.0%} of it against {cur.efficiency:.0%} for the current config ({gain})"


def _basis(advice: Advice) -> str:
    """What a speed-up rests on: this run's timings, earlier timings of both configs at this launch, one of
    each, or the model's predictions."""
    if advice.measured:
        return "measured"
    best, cur = advice.best.timed_before, advice.current.timed_before
    if best and cur:
        return "measured here before"
    if best or cur:
        return f"{'the suggestion' if best else 'the current config'} measured here before, the other predicted"
    return "predicted"
