"""Two diagnoses side by side: what a change (a second config, or a kernel change measured before and
after) removed, cause by cause (`advisor diagnose --compare CONFIG`).

Each cause is shown with its us before, after and the difference (before - after: + is time the change
removed), the estimate before capping on both sides (a cause capped by the gap on one side shows a
smaller share than its estimate), and the measured (or predicted) times, ideals and gaps. The cause the
change removed is read off the largest positive difference among the named causes; what the named
causes do not account for of the time difference is the difference of "unexplained" plus that of the
ideal (a change that adds useful work, or moves the ideal, is said so). A cause read off two loop probes
(K-loop rate, CTA ramp) whose change is under what two probes of one K loop differ by (its resolution) is
shown but not named as removed: the probes cannot tell it from no change.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from advisor.advice.diagnose import Diagnosis


@dataclass
class CauseChange:
    name: str
    before_us: float
    after_us: float
    before_estimate_us: float
    after_estimate_us: float
    resolution_us: float = 0.0  # changes under this are not resolved (the larger side's)

    @property
    def resolved(self) -> bool:
        """Whether the change can be told from no change (always, for a cause with no resolution given)."""
        return self.resolution_us <= 0 or abs(self.removed_estimate_us) > self.resolution_us

    @property
    def removed_us(self) -> float:
        return self.before_us - self.after_us

    @property
    def removed_estimate_us(self) -> float:
        return self.before_estimate_us - self.after_estimate_us

    def to_json(self) -> dict:
        return {"name": self.name, "before_us": round(self.before_us, 3), "after_us": round(self.after_us, 3),
                "removed_us": round(self.removed_us, 3), "before_estimate_us": round(self.before_estimate_us, 3),
                "after_estimate_us": round(self.after_estimate_us, 3), "resolution_us": round(self.resolution_us, 3)}


@dataclass
class Comparison:
    before: Diagnosis
    after: Diagnosis
    causes: list[CauseChange]  # every cause of either side, "unexplained" last
    one_sided: tuple[str, ...] = ()  # causes estimated on one side only (e.g. a loop probe of one kernel)

    @property
    def time_saved_us(self) -> float:
        return self.before.time_us - self.after.time_us

    @property
    def removed(self) -> CauseChange | None:
        """The named cause the change removed most of (None when no named cause shrank)."""
        named = [c for c in self.causes if c.name != "unexplained" and c.removed_us > 0
                 and c.name not in self.one_sided and c.resolved]
        return max(named, key=lambda c: c.removed_us, default=None)

    @property
    def removed_by_estimate(self) -> CauseChange | None:
        """The named cause whose estimate (before capping) the change lowered most: a cause's capped share
        also shrinks when only the gap shrank, where its estimate passed the gap left to it."""
        named = [c for c in self.causes if c.name != "unexplained" and c.removed_estimate_us > 0
                 and c.name not in self.one_sided and c.resolved]
        return max(named, key=lambda c: c.removed_estimate_us, default=None)

    @property
    def unresolved(self) -> list[CauseChange]:
        """Causes whose estimate moved, but by less than the probes resolve."""
        return [c for c in self.causes if c.resolution_us > 0 and c.removed_estimate_us != 0 and not c.resolved]

    def to_json(self) -> dict:
        removed = self.removed
        return {"launch": self.before.label, "gpu": self.before.gpu,
                "before": {"config": self.before.config.label(), "basis": self.before.basis,
                           "time_us": round(self.before.time_us, 3), "ideal_us": round(self.before.ideal_us, 3),
                           "gap_us": round(self.before.gap_us, 3)},
                "after": {"launch": self.after.label, "config": self.after.config.label(), "basis": self.after.basis,
                          "time_us": round(self.after.time_us, 3), "ideal_us": round(self.after.ideal_us, 3),
                          "gap_us": round(self.after.gap_us, 3)},
                "time_saved_us": round(self.time_saved_us, 3),
                "causes": [c.to_json() for c in self.causes],
                "removed": removed.name if removed else None,
                "removed_by_estimate": self.removed_by_estimate.name if self.removed_by_estimate else None,
                "one_sided": list(self.one_sided),
                "unresolved": [c.name for c in self.unresolved],
                "notes": list(dict.fromkeys(self.before.notes + self.after.notes))}


def compare(before: Diagnosis, after: Diagnosis) -> Comparison:
    """Cause by cause, `before` against `after` (same launch, another config or kernel version)."""
    names = [c.name for c in before.causes if c.name != "unexplained"]
    names += [c.name for c in after.causes if c.name != "unexplained" and c.name not in names]

    def get(dx: Diagnosis, name: str) -> tuple[float, float, float]:
        c = next((c for c in dx.causes if c.name == name), None)
        return (c.us, c.estimate_us, c.resolution_us) if c else (0.0, 0.0, 0.0)

    rows = []
    for name in [*names, "unexplained"]:
        (b, be, br), (a, ae, ar) = get(before, name), get(after, name)
        rows.append(CauseChange(name, b, a, be, ae, max(br, ar)))
    # A cause only one side could estimate (no loop probe of the other kernel) is shown, never named removed.
    sides = [{c.name for c in dx.causes} for dx in (before, after)]
    return Comparison(before, after, rows, tuple(n for n in names if (n in sides[0]) != (n in sides[1])))


def render_compare(cmp: Comparison, width: int = 80) -> list[str]:
    """The comparison as plain lines of at most `width` characters."""
    b, a = cmp.before, cmp.after
    after = f"{a.label}, {a.config.label()}" if a.label != b.label else a.config.label()  # another kernel variant
    lines = textwrap.wrap(f"{b.label} on {b.gpu}: before {b.config.label()}, after {after}", width)
    lines += textwrap.wrap(
        f"time {b.time_us:.1f} -> {a.time_us:.1f} us ({b.basis} -> {a.basis}), {cmp.time_saved_us:+.1f} us saved; "
        f"ideal {b.ideal_us:.1f} -> {a.ideal_us:.1f} us; gap {b.gap_us:.1f} -> {a.gap_us:.1f} us", width)
    lines += ["", f"{'cause':<18}{'before':>10}{'after':>10}{'removed':>10}   estimates before / after"]
    for c in cmp.causes:
        capped = "" if c.name == "unexplained" else f"   {c.before_estimate_us:.1f} / {c.after_estimate_us:.1f}"
        lines.append(f"{c.name:<18}{c.before_us:10.1f}{c.after_us:10.1f}{c.removed_us:+10.1f}{capped}"[:width])
    ideal = b.ideal_us - a.ideal_us
    lines.append(f"{'ideal':<18}{b.ideal_us:10.1f}{a.ideal_us:10.1f}{ideal:+10.1f}")
    removed = cmp.removed
    lines.append("")
    if removed is None:
        lines += textwrap.wrap("no named cause shrank: what changed is unexplained (or the ideal)", width)
    else:
        named = sum(c.removed_us for c in cmp.causes if c.name != "unexplained")
        lines += textwrap.wrap(
            f"removed: {removed.name} ({removed.removed_us:.1f} us); named causes {named:+.1f} us of the "
            f"{cmp.time_saved_us:+.1f} us saved, unexplained {cmp.causes[-1].removed_us:+.1f} us, ideal {ideal:+.1f} "
            "us", width)
    by_estimate = cmp.removed_by_estimate
    if by_estimate is not None and by_estimate is not removed:
        # The capped share names another cause: say why where its own estimate did not fall.
        capped_only = removed is not None and removed.removed_estimate_us <= 0
        lines += textwrap.wrap(
            f"by the estimates before capping: {by_estimate.name} ({by_estimate.removed_estimate_us:.1f} us)"
            + (f"; {removed.name}'s share moved with the gap it is capped by" if capped_only else ""), width)
    elif by_estimate is None and removed is not None:
        lines += textwrap.wrap(f"no named cause's estimate fell: {removed.name}'s share shrank only because the gap "
                               "it is capped by did", width)
    if cmp.unresolved:
        lines += textwrap.wrap("within what two probes of one K loop differ by, not named: " + ", ".join(
            f"{c.name} {c.removed_estimate_us:+.1f} us (resolution {c.resolution_us:.1f})" for c in cmp.unresolved),
            width)
    if cmp.one_sided:
        lines += textwrap.wrap(f"estimated on one side only, not named as removed: {', '.join(cmp.one_sided)}", width)
    for note in dict.fromkeys(b.notes + a.notes):
        lines += textwrap.wrap(f"note: {note}", width, subsequent_indent="      ")
    return lines
