"""The status line above the suggestions: what is being computed, or the chosen launch's summary (now, best,
speed-up, binding pipeline, where its config lives); beside it a progress bar while the candidates compile
and another while a measurement runs."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import ProgressBar, Static

from tui.figures import cannot_run, fit_words, speedup
from tui.launches import compact_label


class StatusLine(Static):
    """One line; `show_advice` writes an advice's summary, `update` anything else."""

    def show_advice(self, advice, confirming: bool) -> None:
        """The summary of `advice`; `confirming` while its finalists are still being compiled for the GPU."""
        s = advice.subject
        how = "measured" if advice.measured else "predicted"
        text = Text()
        if confirming:
            text.append(f"confirming for sm_{s.spec.arch}… ", style="bold yellow")
        cur, best = advice.current, advice.best
        # The launch's label in at most 2/5 of the line: the numbers after it are what the line is for.
        text.append(fit_words(compact_label(s.label), max(24, self.size.width * 2 // 5)), style="bold")
        reason = cannot_run(advice, cur)
        if reason:
            text.append(f" · now {cur.config.label()} ")
            text.append(f"cannot run: {reason}", style="bold red")
            if not cannot_run(advice, best):
                text.append(f" · best {best.config.label()} {advice.time_of(best):.1f} us {how}", style="bold green")
        else:
            gain = speedup(advice, best) or 1.0
            text.append(f" · now {cur.config.label()} {advice.time_of(cur):.1f} us · best ")
            text.append(f"{best.config.label()} {gain:.2f}x", style="bold green" if gain > 1.005 else "")
            text.append(f" {how} · bound by {cur.ceiling.binding}")
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


class CompileProgress(ProgressBar):
    """The candidates' compiles of one search (advisor.advice.compile_pool's progress): a bar and "k of n
    compiled"; shown only while a computation that compiles runs (the `running` class)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(show_percentage=False, show_eta=False, **kwargs)

    def compose(self) -> ComposeResult:
        yield from super().compose()
        yield Static("", id="compiled")

    def show(self, done: int, total: int) -> None:
        self.update(total=total, progress=done)
        self.query_one("#compiled", Static).update(f" {done} of {total} compiled")
        self.add_class("running")

    def hide(self) -> None:
        self.remove_class("running")

    @property
    def count(self) -> str:
        """What the bar says in words ("12 of 40 compiled")."""
        return str(self.query_one("#compiled", Static).render()).strip()
