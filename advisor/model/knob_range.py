"""Which values of a config's knobs (num_warps, num_stages) a latency model was fitted on, by kind of work:
a prediction for a value outside them is an extrapolation that no held-out figure covers.

Why a range and not only the feature distance (`advisor.model.confidence`): one knob one step past the
data is near every training row in a space of 30-40 standardised features, yet it can change the code
Triton emits. The transfer model's corpus holds no tensor-core loop at num_stages=1 (Triton pipelines
no loads there: each K step waits for its operands) and none at 16 warps; the ceiling of such a config is
lower, the model follows it, and on kernels it never saw it ranked single-stage dot loops 1.25-1.38x
faster than they ran (0.87x; benchmarks/RESULTS.md section 49). So the range of each knob is kept per
kind of work, and `advisor.advice.search` names no config outside it without timing it.

Kinds of work: rows with tensor-core work in their ceiling (`share_tensor` > 0) and rows without. A
value counts as seen when at least MIN_ROWS training rows of that kind have it; the range is from the
smallest to the largest such value (knobs are ordered: a value between two seen ones is interpolated).

The shipped transfer model keeps the ranges of the corpus's rows, though it is also fitted on the user-style
sets, which hold a few single-stage dot loops: held out by set, those are still predicted 0.41-0.72x of their
time (benchmarks/RESULTS.md section 57), so having seen them does not make the value safe to name untimed.
"""

from __future__ import annotations

import numpy as np

from advisor.model.features import FEATURES

KNOBS = ("num_warps", "num_stages")
MIN_ROWS = 5
_TENSOR = "tensor-core loops"
_OTHER = "kernels without tensor-core work"
KNOB_NOTE = ("{knob}={value} lies outside the {lo}-{hi} the model was fitted on for {kind}: its prediction is an "
             "extrapolation, not evidence; time it (--measure)")
_MIDDLE = " the model was fitted on for "


def _kinds(x: np.ndarray) -> np.ndarray:
    """Each row's kind of work (rows of all FEATURES)."""
    tensor = np.asarray(x)[:, FEATURES.index("share_tensor")] > 0
    return np.where(tensor, _TENSOR, _OTHER)


def knob_ranges(x: np.ndarray) -> dict[str, dict[str, list[int]]]:
    """{kind: {knob: [low, high]}} over training rows `x` (all FEATURES); a kind without a value of
    MIN_ROWS rows is left out (no range claimed for it)."""
    x = np.asarray(x)
    kinds = _kinds(x)
    out: dict[str, dict[str, list[int]]] = {}
    for kind in (_TENSOR, _OTHER):
        mine = x[kinds == kind]
        ranges = {}
        for knob in KNOBS:
            values, counts = np.unique(np.rint(mine[:, FEATURES.index(knob)]).astype(int), return_counts=True)
            seen = values[counts >= MIN_ROWS]
            if len(seen):
                ranges[knob] = [int(seen.min()), int(seen.max())]
        if ranges:
            out[kind] = ranges
    return out


def knob_notes(ranges: dict | None, x: np.ndarray) -> list[list[str]]:
    """For each row (all FEATURES), a KNOB_NOTE per knob whose value lies outside `ranges` for the row's
    kind of work (none where the model carries no ranges, or none for that kind)."""
    x = np.asarray(x)
    out: list[list[str]] = [[] for _ in range(len(x))]
    if not ranges:
        return out
    for i, kind in enumerate(_kinds(x)):
        for knob, (lo, hi) in ranges.get(str(kind), {}).items():
            value = int(round(float(x[i, FEATURES.index(knob)])))
            if not lo <= value <= hi:
                out[i].append(KNOB_NOTE.format(knob=knob, value=value, lo=lo, hi=hi, kind=kind))
    return out


def is_knob_note(note: str) -> bool:
    """Whether a note is KNOB_NOTE (a knob outside the model's fitted range)."""
    return _MIDDLE in note and note.endswith(KNOB_NOTE.rsplit("}", 1)[-1])
