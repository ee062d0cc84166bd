"""The right pane: the ceiling of one candidate config as pipeline bars beside its latencies."""

from __future__ import annotations

from rich.console import Group as RichGroup
from rich.table import Table
from rich.text import Text
from textual.widgets import Static


class CeilingView(Static):
    """The ceiling of one candidate: pipeline bars, latencies, efficiency, waves, occupancy."""

    def __init__(self, **kwargs):
        super().__init__("", **kwargs)
        self.advice = None
        self.cand = None

    def show(self, advice, cand) -> None:
        self.advice, self.cand = advice, cand
        self.refresh(layout=True)

    def render(self):
        if self.cand is None:
            return Text("Choose a launch on the left to see its ceiling.", style="dim")
        c, ceil = self.cand, self.cand.ceiling
        width = max(self.size.width, 24)
        top = max((v for v in ceil.pipelines.values() if v), default=1.0) or 1.0
        bar_w = max(width - 16 if width < 52 else width - 38, 4)
        bars = Table.grid(padding=(0, 1))
        bars.add_column(no_wrap=True, width=6)
        bars.add_column(no_wrap=True, width=bar_w)
        bars.add_column(justify="right", no_wrap=True, width=7)
        for pipe, us in ceil.pipelines.items():
            binding = pipe == ceil.binding
            if us is None:
                bars.add_row(Text(f"{pipe:<6}"), Text("unknown", style="dim"), Text("?"))
                continue
            n = max(0, round(bar_w * us / top))
            bar = Text("█" * n, style="bold red" if binding else "cyan")
            bar.append("░" * (bar_w - n), style="grey27")
            bars.add_row(Text(f"{pipe:<6}", style="bold red" if binding else ""), bar,
                         Text(f"{us:.1f}", style="bold red" if binding else ""))
        measured = "—" if c.measured_us is None else f"{c.measured_us:.1f} us"
        eff = c.efficiency if c.measured_us is None else ceil.ceiling_us / c.measured_us
        interval = Text(f"{c.interval[0]:.0f}–{c.interval[1]:.0f}", style="dim")
        if width >= 52:  # room beside the bars: the numbers in a column of their own
            facts = Table.grid(padding=(0, 1))
            facts.add_column(style="bold", no_wrap=True)
            facts.add_column(justify="right", no_wrap=True)
            for name, value in (("ceiling", f"{ceil.ceiling_us:.1f} us"), ("predicted", f"{c.predicted_us:.1f} us"),
                                ("", interval), ("measured", measured), ("efficiency", f"{eff:.0%}"),
                                ("waves", f"{ceil.waves:.2f}"), ("CTAs/SM", str(ceil.ctas_per_sm)),
                                ("CTAs", f"{ceil.active_ctas}/{ceil.ctas}")):
                facts.add_row(name, value)
            both = Table.grid(padding=(0, 2))
            both.add_column(width=bar_w + 15, no_wrap=True)
            both.add_column(no_wrap=True)
            both.add_row(bars, facts)
            return both
        lat = Table.grid(padding=(0, 1), expand=True)
        for _ in range(3):
            lat.add_column(justify="right", ratio=1, no_wrap=True)
        lat.add_row(Text("ceiling", style="bold"), Text("predicted", style="bold"), Text("measured", style="bold"))
        lat.add_row(f"{ceil.ceiling_us:.1f} us", f"{c.predicted_us:.1f} us", measured)
        lat.add_row("", interval, "")
        lines = [bars, lat,
                 Text.assemble(("efficiency ", "bold"), f"{eff:.0%}", ("  waves ", "bold"), f"{ceil.waves:.2f}"),
                 Text.assemble(("occupancy ", "bold"), f"{ceil.ctas_per_sm} CTA/SM, "
                               f"{ceil.active_ctas}/{ceil.ctas} CTAs")]
        return RichGroup(*lines)
