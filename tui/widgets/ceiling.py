"""The right pane: the ceiling of one candidate config as pipeline bars beside its latencies, with the caveats
that change those numbers under them.

Bars are drawn to the scale of the ceiling's roofs. A pipeline timed above the binding one is not a roof
(tui.figures.roof_pipelines: its time overlaps the others', today the L2's): its bar is capped and its time
marked, never drawn as a share above 100%. A config that cannot run shows why, never a time.
"""

from __future__ import annotations

from rich.console import Group as RichGroup
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from tui.figures import cannot_run, caveats, roof_pipelines, warm_l2

MARK = "*"  # after a number that rests on an assumption; the assumption is listed under the numbers


class CeilingView(Static):
    """The ceiling of one candidate: pipeline bars, latencies, efficiency, waves, occupancy, caveats."""

    def __init__(self, **kwargs):
        super().__init__("", **kwargs)
        self.advice = None
        self.cand = None
        self.prediction_notes: list[str] = []

    def show(self, advice, cand, prediction_notes=()) -> None:
        self.advice, self.cand, self.prediction_notes = advice, cand, list(prediction_notes)
        self.refresh(layout=True)

    def render(self):
        if self.cand is None:
            return Text("Choose a launch on the left to see its ceiling.", style="dim")
        reason = cannot_run(self.advice, self.cand)
        if reason:
            return RichGroup(Text(f"cannot run: {reason}", style="bold red"),
                             Text(f"{self.cand.config.label()} gets no ceiling and no time on "
                                  f"{self.advice.subject.spec.name}; the suggestions below can run.", style="dim"))
        width = max(self.size.width, 24)
        bars, overlapping = self._bars(width)
        numbers = self._numbers(width)
        if width >= 52:  # room beside the bars: the numbers in a column of their own
            both = Table.grid(padding=(0, 2))
            both.add_column(no_wrap=True)
            both.add_column(no_wrap=True)
            both.add_row(bars, numbers)
            parts = [both]
        else:
            parts = [bars, numbers]
        return RichGroup(*parts, *self._caveats(overlapping))

    def _bar_width(self, width: int) -> int:
        return max(width - 16 if width < 52 else width - 38, 4)

    def _bars(self, width: int) -> tuple[Table, list[str]]:
        """The pipeline rows, and the pipelines drawn capped because they are not roofs."""
        ceil = self.cand.ceiling
        roofs = roof_pipelines(ceil)
        top = max([*roofs.values(), ceil.pipelines.get("launch") or 0.0], default=1.0) or 1.0
        bar_w = self._bar_width(width)
        bars = Table.grid(padding=(0, 1))
        bars.add_column(no_wrap=True, width=6)
        bars.add_column(no_wrap=True, width=bar_w)
        bars.add_column(justify="right", no_wrap=True, width=7)
        overlapping = []
        for pipe, us in ceil.pipelines.items():
            binding = pipe == ceil.binding
            strong = "bold red" if binding else ""
            if us is None:
                bars.add_row(Text(f"{pipe:<6}"), Text("unknown", style="dim"), Text("?"))
                continue
            if pipe == "dram" and warm_l2(self.cand) and not us:
                bars.add_row(Text(f"{pipe:<6}"), Text("warm L2: left out", style="yellow"),
                             Text(f"{us:.1f}{MARK}", style="yellow"))
                continue
            if us > top * 1.0005 and pipe not in roofs:
                # Not a roof: capped at the scale's end, its own time marked; it overlaps the binding one.
                overlapping.append(pipe)
                bar = Text("▒" * (bar_w - 1) + "»", style="yellow")
                bars.add_row(Text(f"{pipe:<6}", style="yellow"), bar, Text(f"{us:.1f}{MARK}", style="yellow"))
                continue
            n = max(0, min(bar_w, round(bar_w * us / top)))
            bar = Text("█" * n, style="bold red" if binding else "cyan")
            bar.append("░" * (bar_w - n), style="grey27")
            bars.add_row(Text(f"{pipe:<6}", style=strong), bar, Text(f"{us:.1f}", style=strong))
        return bars, overlapping

    def _numbers(self, width: int):
        c, ceil = self.cand, self.cand.ceiling
        ceiling = f"{ceil.ceiling_us:.1f} us" + (MARK if ceil.notes else "")
        predicted = f"{c.predicted_us:.1f} us" + (MARK if self.prediction_notes else "")
        measured = "—" if c.measured_us is None else f"{c.measured_us:.1f} us"
        eff = c.efficiency if c.measured_us is None else ceil.ceiling_us / c.measured_us
        interval = Text(f"{c.interval[0]:.0f}–{c.interval[1]:.0f}", style="dim")
        if width >= 52:
            facts = Table.grid(padding=(0, 1))
            facts.add_column(style="bold", no_wrap=True)
            facts.add_column(justify="right", no_wrap=True)
            for name, value in (("ceiling", ceiling), ("predicted", predicted), ("", interval),
                                ("measured", measured), ("efficiency", f"{eff:.0%}"), ("waves", f"{ceil.waves:.2f}"),
                                ("CTAs/SM", str(ceil.ctas_per_sm)), ("CTAs", f"{ceil.active_ctas}/{ceil.ctas}")):
                facts.add_row(name, value)
            return facts
        lat = Table.grid(padding=(0, 1), expand=True)
        for _ in range(3):
            lat.add_column(justify="right", ratio=1, no_wrap=True)
        lat.add_row(Text("ceiling", style="bold"), Text("predicted", style="bold"), Text("measured", style="bold"))
        lat.add_row(ceiling, predicted, measured)
        lat.add_row("", interval, "")
        return RichGroup(lat, Text.assemble(("efficiency ", "bold"), f"{eff:.0%}", ("  waves ", "bold"),
                                            f"{ceil.waves:.2f}"),
                         Text.assemble(("occupancy ", "bold"), f"{ceil.ctas_per_sm} CTA/SM, "
                                       f"{ceil.active_ctas}/{ceil.ctas} CTAs"))

    def _caveats(self, overlapping: list[str]) -> list[Text]:
        ceil = self.cand.ceiling
        bound = ceil.pipelines.get(ceil.binding) or 0.0
        lines = [f"{pipe} is not a roof: its {ceil.pipelines[pipe]:.1f} us overlaps {ceil.binding}'s {bound:.1f} us, "
                 "left out of the ceiling" for pipe in overlapping]
        lines += caveats(self.cand, self.prediction_notes)
        return [Text(f"{MARK} {line}", style="yellow") for line in lines]
