"""`suggest --measure K`: which K configs to time besides the current one, and how a close finish is settled.

The current config is timed first (the reference every other config's result is checked against, and the
first point of the kernel's calibration, advisor.model.kernel_calibration). Then K more, one at a time,
each the config predicted fastest among those not yet timed, re-predicted after every timing with the
timings stored so far, so that the kernel's correction re-ranks what is left (from 4 points its slope
can change the order, not only the level). Simulated over the corpus's timed configs, this choice and
"the K predicted fastest" found the same configs on the design half (benchmarks/corpus/sim_advice.py,
RESULTS section 28); so did a variant that spent one step on the lowest-ceiling config, which is why
there is no such step.

A config that differs from one already tried only in num_stages is chosen only once every other has been:
the model and the timed twin's neighbour correction predict such twins within a few percent of each other,
so the loop spent timings on near-copies (three of four on a sliding-window decode) while a config of
another tile or warp count was 1.4x faster. Over six fresh sets' GPU samples, simulated with the product's
loop (benchmarks/sim_measure_fresh.py, RESULTS section 54), the pick within 1.02x of the sample's fastest
went from 96 to 102 of 112 launches; skipping configs of another num_warps too did worse (99), as did
choosing by expected gain over the best time (96).

A config that fails to run or gives another result is left out with a note and does not count; as many
again may be tried. One that gives another result is kept with the kernel's timings (`search.record_wrong`), and
configs of its meta-parameters under other num_warps / num_stages are not tried (they compute the same).
Timings of microsecond launches differ by a few percent from one run to the next,
so when the two fastest are within RETIME_WITHIN of each other both are timed again and each keeps its
faster time: a 2% call is made on two timings each, not one.

The current config is timed again last: if its two times differ by more than STEADY_WITHIN, the GPU was
not steady while the configs were timed (another process on it, a clock change): every other timed config
is timed once more and keeps its faster time, and a note says the ranking may still be off. Four
`suggest --measure` runs sharing one H100 timed 26 of 127 configs more than 5% away from a lone timing,
up to 2.4x; one at a time, none (RESULTS 34b).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from advisor.advice.search import Advice, Candidate, Subject, _short, record_timings, record_wrong
from ceilings.launch import Config

RETIME_WITHIN = 1.04   # the two fastest closer than this are timed again (the noise of one timing: RESULTS 21)
STEADY_WITHIN = 1.05  # the current config's first and last times further apart: the GPU was not steady
POOL = 64              # configs re-predicted per step, the best of the first ranking (each costs a prediction)


def choose(untimed: Sequence[Candidate], tried: Sequence[Config] = ()) -> Candidate:
    """The config to time next among `untimed`: the predicted fastest of those that differ from every config in
    `tried` in more than num_stages, of all once none is left (module docstring)."""
    done = {(c.program, c.num_warps) for c in tried}
    other = [c for c in untimed if (c.config.program, c.config.num_warps) not in done]
    return min(other or untimed, key=lambda c: c.predicted_us)


def time_configs(subject: Subject, advice: Advice, current: Candidate, ranked: Sequence[Candidate], count: int,
                 run: Callable[[Config], float], confirm: bool, model=None) -> list[Candidate]:
    """Time the current config and `count` others of `ranked` (module docstring); the timed candidates,
    fastest first. Wrong or failed configs are counted in `advice.pruned` with a note."""
    from advisor.measure.timing import GPUFault, MeasurementError, WrongResult

    timed: list[Candidate] = []
    if current.measured_us is None and math.isfinite(current.predicted_us):
        current.measured_us = run(current.config)
        timed.append(current)
        record_timings(subject, [(current, current.measured_us)])
    pool = [c for c in ranked[:POOL] if c.config != current.config]
    tried: set[Config] = set()
    wrong: set[tuple] = set()  # programs that computed another result (Config.program)
    others = 0
    for _attempt in range(2 * count):  # configs that fail do not count, up to as many again
        if others >= count:
            break
        # a config whose meta-parameters computed another result here does again under any warps or stages
        left = [c for c in pool if c.config not in tried and c.config.program not in wrong]
        if not left:
            break
        # re-predicted with the timings stored so far: the kernel's correction re-ranks what is left
        fresh = {c.config: c for c in subject.predict([c.config for c in left], model)} if timed else {}
        cand = choose([fresh.get(c.config, c) for c in left], [current.config, *tried])
        cand.notes = next((c.notes for c in left if c.config == cand.config), cand.notes)
        tried.add(cand.config)
        if confirm:
            why, notes = subject.confirm(cand.config)
            if why:
                advice.pruned[_short(why)] += 1
                continue
            cand.notes = [n for n in notes if n not in cand.notes] + cand.notes
        try:
            cand.measured_us = run(cand.config)
        except MeasurementError as exc:  # a wrong result or a failed launch: that config, not the command
            if isinstance(exc, GPUFault):  # nothing more can run in this process: the timings so far stand
                advice.pruned["made the GPU fault when measured"] += 1
                advice.notes.append(f"{exc}: timing stopped there; the configs timed before it are compared")
                return sorted(timed, key=lambda c: c.measured_us)
            if isinstance(exc, WrongResult):
                record_wrong(subject, cand.config)
                wrong.add(cand.config.program)
            advice.pruned["did not reproduce the current config's result, or failed, when measured"] += 1
            advice.notes.append(f"{exc} (left out of the measured configs)")
            continue
        record_timings(subject, [(cand, cand.measured_us)])
        timed.append(cand)
        others += 1
    def time_again(cand: Candidate) -> float | None:
        """One more timing of `cand`, which keeps the faster of its times; None if it failed this time."""
        try:
            again = run(cand.config)
        except MeasurementError:  # it ran right once: its first time stands
            return None
        cand.measured_us = min(cand.measured_us, again)
        return again

    first = current.measured_us if current in timed else None
    last = None
    timed.sort(key=lambda c: c.measured_us)
    if len(timed) >= 2 and timed[1].measured_us <= RETIME_WITHIN * timed[0].measured_us:
        for cand in timed[:2]:
            again = time_again(cand)
            last = again if cand is current else last
        timed.sort(key=lambda c: c.measured_us)
        advice.notes.append(f"the two fastest were within {RETIME_WITHIN - 1:.0%} of each other and were timed "
                            "twice each (the faster of two timings kept)")
    if first is not None and len(timed) >= 2:
        if last is None:
            last = time_again(current)
            timed.sort(key=lambda c: c.measured_us)
        if last is not None and max(first, last) > STEADY_WITHIN * min(first, last):
            # Another process's kernels slow a timing, never speed it up (RESULTS 34b: 25 of 26 disturbed
            # configs were slower), so each config's faster of two timings is the better estimate.
            for cand in timed:
                if cand is not current:
                    time_again(cand)
            timed.sort(key=lambda c: c.measured_us)
            advice.notes.append(
                f"the current config timed {first:.1f} us first and {last:.1f} us last "
                f"({max(first, last) / min(first, last) - 1:.0%} apart): the GPU was not steady while the configs "
                "were timed (another process on it?); every timed config was timed once more and keeps its faster "
                "time, but the ranking may still be off: time again on an idle GPU")
    return timed


def _timed(subject: Subject):
    """The launch the subject's timings ran (with a call's real-run contents, LaunchSubject.timed_launch), or its
    launch; None for subjects without one."""
    timed = getattr(subject, "timed_launch", None)
    return timed(run=False) if callable(timed) else getattr(subject, "launch", None)


# The ceiling's notes for work that the contents of memory decide (ceilings.demand): an exit, a branch, a loop bound.
_DATA_DECIDED = ("condition not determined by the launch", "bound depends on memory")


def made_up_control_data(subject: Subject, current: Candidate) -> list[str]:
    """A note when the configs were timed on integer tensors the trace has no contents for (the measurer fills
    them with zeros, advisor.measure.launch_run) while the kernel's exits or loop bounds depend on memory: a
    grouped GEMM whose group sizes an earlier kernel computes then times its CTAs exiting (DeepSpeed's, RESULTS 39:
    2.4 us for a 120-GFLOP launch), not the program's work."""
    launch = _timed(subject)
    if launch is None or current.ceiling is None:
        return []
    if not any(k in n for n in current.ceiling.notes for k in _DATA_DECIDED):
        return []
    made_up = [t.name for t in launch.tensors
               if t.values is None and t.sample is None and not (t.dtype.startswith(("float", "bfloat")))]
    if not made_up:
        return []
    return [f"timed with zeros in {', '.join(made_up[:4])}{' ...' if len(made_up) > 4 else ''} (the trace has no "
            "contents for them) while the kernel's exits or loop bounds depend on memory: these times may not be "
            "the program's; record the program on a GPU (`advisor record`) so that their contents travel with it"]


# indices and ids; int8 / uint8 tensors hold quantised payloads, whose zeros time alike
_INDEX_TYPES = ("int32", "int64")


def made_up_indices(subject: Subject) -> list[str]:
    """A note when the configs were timed with zeros in an index tensor the kernel loads (int32 / int64, no contents
    in the trace: over ceilings.launch.MAX_VALUES_BYTES, and no sample of them, TensorArg.sample, as a trace written
    by hand or by an older capture has): every index then points at element 0, so a gather reads one
    row and atomics or a scatter hit one address. A MoE combine of 65,536 rows timed that way ran 4-5x faster than
    its bytes allow; an expert histogram's atomics all contended for one counter (RESULTS 55)."""
    import ast

    from advisor.advice.launch_rule import file_defs
    from advisor.advice.operands import call_name, names_in
    from ceilings.launch import MAX_VALUES_BYTES

    launch = _timed(subject)
    if launch is None:
        return []
    kernel = file_defs(launch).get(launch.kernel)
    if kernel is None:
        return []

    # pointers derived from each argument (`row_idx = idx_ptr + row * stride`), then the arguments loads read from
    derived = {t.name: {t.name} for t in launch.tensors}
    assigns = [(n.targets[0].id, names_in(n.value)) for n in ast.walk(kernel)
               if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)]
    for _ in range(3):
        for target, used in assigns:
            for aliases in derived.values():
                if used & aliases:
                    aliases.add(target)
    read = set().union(*(names_in(call.args[0]) for call in ast.walk(kernel)
                         if isinstance(call, ast.Call) and call_name(call) == "load" and call.args))
    zeros = [t for t in launch.tensors
             if t.values is None and t.sample is None and t.dtype in _INDEX_TYPES and derived[t.name] & read]
    if not zeros:
        return []
    listed = ", ".join(f"{t.name} ({t.dtype}, {'x'.join(map(str, t.shape))})" for t in zeros[:3])
    return [f"timed with zeros in {listed}: the trace keeps neither the contents (integer tensors up to "
            f"{MAX_VALUES_BYTES >> 10} KiB) nor a sample of them, so every index the kernel loads from it is 0 (a "
            "gather reads one row, atomics hit one address) and these times may be far from the program's; record "
            "the launch again with `advisor record` (it keeps a sample of large integer tensors) or time the kernel "
            "in its own benchmark"]
