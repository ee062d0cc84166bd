"""How the TUI writes the advice's numbers, the same in every pane: a speed-up, a config that cannot run
(never "infx" or "nan%"), the caveats that change a number, and which pipelines are roofs.

No textual here; the panes (tui.widgets, tui.screens) and the app call these.
"""

from __future__ import annotations

import math


def fit_words(label: str, width: int) -> str:
    """`label` cut to `width` cells between words, with an ellipsis where words were left out; the first
    word stays whole (it tells a launch apart)."""
    if len(label) <= width:
        return label
    words = label.split(" ")
    out = words[0]
    for word in words[1:]:
        if len(out) + 1 + len(word) + 2 > width:
            break
        out += " " + word
    return out + " …"


def cannot_run(advice, cand) -> str | None:
    """Why `cand` cannot run on the advice's GPU (the validator's reason, `Advice.cannot_run` for the current
    config), or None when it can."""
    if advice is None or cand is None:
        return None
    if advice.cannot_run and (cand is advice.current or cand.config == advice.current.config):
        return advice.cannot_run
    if not math.isfinite(cand.predicted_us) or not math.isfinite(cand.ceiling.ceiling_us):
        return cand.ceiling.notes[0] if cand.ceiling.notes else "no time: it cannot launch"
    return None


def speedup(advice, cand) -> float | None:
    """How much faster `cand` is than the current config (measured where measured, else predicted); None when
    either cannot run (there is no ratio to a launch that never happens)."""
    if cannot_run(advice, cand) or cannot_run(advice, advice.current):
        return None
    t = advice.time_of(cand)
    return advice.time_of(advice.current) / t if t else 1.0


def speedup_text(advice, cand) -> str:
    s = speedup(advice, cand)
    if s is not None:
        return f"{s:.2f}x"
    return "cannot run" if cannot_run(advice, cand) else "replaces it"


def us(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.1f}"


def caveats(cand, extra=()) -> list[str]:
    """Every note behind `cand`'s numbers, once each, in order: its compile notes (spills), its ceiling's
    (loop bounds counted once, CTAs that may exit, the warm-L2 assumption and its working set) and `extra`
    (the prediction's: a kernel outside the model's data). One "outside the model's data" line: `extra` holds the
    current config's, which with another distance reads as a second launch beside `cand`'s own."""
    from advisor.model.predict import is_outside_note

    own = [*cand.notes, *cand.ceiling.notes]
    if any(is_outside_note(n) for n in own):
        extra = [n for n in extra if not is_outside_note(n)]
    return list(dict.fromkeys([*own, *extra]))


def warm_l2(cand) -> bool:
    """Whether the ceiling left DRAM time out on the warm-L2 assumption (roofline's note says so)."""
    return any(n.startswith("warm L2") for n in cand.ceiling.notes)


def roof_pipelines(ceiling) -> dict[str, float]:
    """The pipelines that bound the ceiling: a pipeline timed above the binding one while not binding is not a
    roof (its time overlaps the others': today the L2, whose measured rate is a probe's reach), nor is the
    launch overhead, which is added on top."""
    bound = ceiling.pipelines.get(ceiling.binding)
    return {p: t for p, t in ceiling.pipelines.items()
            if t is not None and p != "launch" and (bound is None or p == ceiling.binding or t <= bound)}
