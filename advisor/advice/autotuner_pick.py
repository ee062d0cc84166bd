"""An autotuned launch captured without a GPU: what runs is the autotuner's pick, not the list's first config.

The capture records each config of the list in the list's order (advisor.capture.nogpu) and the first stands
for the launch; on the GPU the autotuner times the list and runs the fastest. `suggest` shows its expected pick
as the current config, so that a gain it reports is one the program does not already have (RESULTS 39: the
lists' first configs ran a median 3.2x slower than the autotuner's picks).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from advisor.advice.search import AUTOTUNED_NOTE, Advice, Candidate


def stand_for_autotuner(advice: Advice, in_list: Sequence[Candidate], confirm, listed: int) -> None:
    """An autotuned launch captured without a GPU: the recorded config is its list's first, but on the GPU the
    autotuner times the list and runs the fastest, so a gain over the first is one the program already has.
    The current config becomes the fastest of `in_list` (the list's candidates: measured when timed, else
    predicted, the model's guess of the autotuner's pick; `confirm` compiles it for its notes and skips one
    that cannot run; `listed`: how many configs the list holds), with a note naming the first; where none of
    the list can run, the first's problem stays the finding. Configs past the list stay ranked against the pick."""
    first = advice.current
    pick = None
    for cand in sorted((c for c in in_list if math.isfinite(advice.time_of(c))), key=advice.time_of):
        if confirm is not None and cand not in advice.ranked:
            why, notes = confirm(cand.config)
            if why:
                continue
            cand.notes = [n for n in notes if n not in cand.notes] + cand.notes
        pick = cand
        break
    if pick is None:
        return
    if advice.cannot_run:
        was = f"cannot run ({advice.cannot_run}; the autotuner skips it)"
    else:
        was = f"{advice.time_of(first):.1f} us {'measured' if advice.measured and first.measured_us else 'predicted'}"
    how = "the fastest of the configs timed" if advice.measured else "the model's guess of that pick"
    same = pick.config == first.config
    advice.notes.append(f"{AUTOTUNED_NOTE} {listed} configs: the autotuner times them on the GPU "
                        f"and runs the fastest, so the current config shown is {how}, {pick.config.label()}"
                        + ("" if same else f"; the list's first ({first.config.label()}, {was}), which this capture "
                           "recorded, is not what runs"))
    advice.current, advice.cannot_run = pick, None
    advice.ranked = sorted([pick] + [c for c in advice.ranked if c.config != pick.config], key=advice.time_of)
