"""The status line above the suggestions: what is being computed, or the chosen launch's summary (now, best,
speed-up, binding pipeline, where its config lives), and a progress bar while a measurement runs."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.widgets import ProgressBar, Static


class StatusLine(Static):
    """One line; `show_advice` writes an advice's summary, `update` anything else."""

    def show_advice(self, advice, confirming: bool) -> None:
        """The summary of `advice`; `confirming` while its finalists are still being compiled for the GPU."""
        s = advice.subject
        how = "measured" if advice.measured else "predicted"
        text = Text()
        if confirming:
            text.append(f"confirming for sm_{s.spec.arch}… ", style="bold yellow")
        text.append_text(Text.assemble((s.label, "bold"), f" · now {advice.current.config.label()} "
                                       f"{advice.time_of(advice.current):.1f} us · best ",
                                       (f"{advice.best.config.label()} {advice.speedup:.2f}x",
                                        "bold green" if advice.speedup > 1.005 else ""),
                                       f" {how} · bound by {advice.current.ceiling.binding}"))
        if s.location:
            text.append(f" · config at {Path(s.location.path).name}:{s.location.line}", style="dim")
        self.update(text)


class MeasureProgress(ProgressBar):
    """Configs timed so far of one measurement; shown only while one runs (the `running` class)."""

    def start(self, total: int) -> None:
        self.update(total=total, progress=0)
        self.add_class("running")

    def stop(self) -> None:
        self.remove_class("running")
