"""The TUI's modal screens: explain a suggestion, apply one (diff + confirm), pick a GPU, list the keys."""

from __future__ import annotations

from rich.console import Group
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, OptionList, Static
from textual.widgets.option_list import Option

from tui.figures import cannot_run, caveats, speedup, us

KEYS = (
    ("enter", "on a launch: choose it; on a suggestion: explain it"),
    ("a", "apply the highlighted suggestion (shows the diff first; --dry-run writes nothing)"),
    ("m", "measure the current and top configs on this machine's GPU (escape cancels)"),
    ("g", "switch the GPU spec the advice is for"),
    ("s", "sort the suggestions by the next column (or click a column header)"),
    ("v", "show or hide the kernel source"),
    ("tab", "move between the launches, the launch form and the suggestions"),
    ("escape", "cancel a measurement; close a dialog"),
    ("?", "this list of keys"),
    ("q", "quit"),
)


class ExplainScreen(ModalScreen[None]):
    """Why a suggestion ranks where it does: its numbers next to the current config's."""

    BINDINGS = [Binding("escape,enter,q", "close", "Close")]

    def __init__(self, advice, cand, prediction_notes=()):
        super().__init__()
        self.advice, self.cand, self.prediction_notes = advice, cand, list(prediction_notes)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield VerticalScroll(Static(self.body(), id="explain-body"))
            yield Static("escape: close", classes="dialog-keys")

    def body(self) -> Group:
        a, c, cur = self.advice, self.cand, self.advice.current
        s = a.subject
        is_current = c is cur or c.config == cur.config
        speed = speedup(a, c)
        title = Text(f"{c.config.label()}  ", style="bold")
        if is_current:
            title.append("(the current config)", style="italic")
        elif speed is not None:
            title.append(f"{speed:.2f}x against the current config", style="italic")
        else:
            title.append("replaces the current config, which cannot run", style="italic")
        if cannot_run(a, c):
            why = f"cannot run: {cannot_run(a, c)}"
        elif c is a.best:
            why = a.why
        elif is_current:
            why = (f"the current config: {cur.ceiling.binding}-bound, expected at {cur.efficiency:.0%} of its "
                   f"{cur.ceiling.ceiling_us:.1f} us ceiling")
        else:
            why = (f"ranked by its predicted time: {c.predicted_us:.1f} us against {cur.predicted_us:.1f} us now; "
                   f"bound by {c.ceiling.binding} (now {cur.ceiling.binding}); the best found is "
                   f"{a.best.config.label()}: {a.why}")
        table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
        table.add_column("")
        table.add_column("current", justify="right")
        table.add_column("this", justify="right")
        def interval(x) -> str:
            return "—" if us(x.interval[1]) == "—" else f"{x.interval[0]:.1f}–{x.interval[1]:.1f}"

        def eff(x) -> str:
            return "—" if cannot_run(a, x) else f"{x.efficiency:.0%}"

        def waves(x) -> str:
            return "—" if cannot_run(a, x) else f"{x.ceiling.waves:.2f}"

        rows = [("ceiling us", us(cur.ceiling.ceiling_us), us(c.ceiling.ceiling_us)),
                ("bound by", cur.ceiling.binding, c.ceiling.binding),
                ("predicted us", us(cur.predicted_us), us(c.predicted_us)),
                ("interval us", interval(cur), interval(c)),
                ("measured us", us(cur.measured_us), us(c.measured_us)),
                ("efficiency", eff(cur), eff(c)),
                ("waves", waves(cur), waves(c)),
                ("CTAs per SM", str(cur.ceiling.ctas_per_sm), str(c.ceiling.ctas_per_sm)),
                ("CTAs working", f"{cur.ceiling.active_ctas}/{cur.ceiling.ctas}",
                 f"{c.ceiling.active_ctas}/{c.ceiling.ctas}")]
        for pipe in c.ceiling.pipelines:
            rows.append((f"  {pipe} us", us(cur.ceiling.pipelines.get(pipe)), us(c.ceiling.pipelines.get(pipe))))
        for row in rows:
            table.add_row(*row)
        parts = [title, Text(f"{s.label} on {s.spec.name}", style="dim"), Text(""), Text(why), Text(""), table]
        notes = caveats(c, self.prediction_notes)
        if notes:
            parts += [Text(""), Text("caveats: what these numbers assume", style="bold")]
            parts += [Text(f"• {n}") for n in notes]
        if s.location:
            loc = s.location
            parts += [Text(""), Text(f"current config from {loc.path}:{loc.line} ({loc.what})", style="dim")]
        return Group(*parts)

    def action_close(self) -> None:
        self.dismiss(None)


class ApplyScreen(ModalScreen[bool]):
    """The unified diff of an apply, and a confirm."""

    BINDINGS = [Binding("y", "confirm", "Confirm"), Binding("escape,n,q", "cancel", "Cancel")]

    def __init__(self, edits, dry_run: bool):
        super().__init__()
        self.edits, self.dry_run = edits, dry_run

    def compose(self) -> ComposeResult:
        text = "".join(e.diff() for e in self.edits)
        head = "\n".join(e.what for e in self.edits)
        with Vertical(id="dialog"):
            yield Static(Text(head, style="bold"), id="apply-what")
            yield VerticalScroll(Static(Syntax(text, "diff", theme="ansi_dark", word_wrap=False), id="diff"))
            with Horizontal(classes="buttons"):
                label = "Confirm (dry run: write nothing)" if self.dry_run else "Write (y)"
                yield Button(label, id="confirm", variant="warning" if self.dry_run else "success")
                yield Button("Cancel (n)", id="cancel")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)


class GpuScreen(ModalScreen[str | None]):
    """Pick the GPU spec the advice is for."""

    BINDINGS = [Binding("escape,q", "cancel", "Cancel")]

    def __init__(self, names: list[str], current: str):
        super().__init__()
        self.names, self.current = names, current

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="small"):
            yield Static(Text("GPU spec for the advice", style="bold"))
            yield OptionList(*(Option(n, id=n) for n in self.names), id="gpus")
            yield Static("enter: choose  escape: cancel", classes="dialog-keys")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        if self.current in self.names:
            options.highlighted = self.names.index(self.current)
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close")]

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, pad_edge=False)
        table.add_column(style="bold")
        table.add_column()
        for key, what in KEYS:
            table.add_row(key, what)
        with Vertical(id="dialog", classes="small"):
            yield Static(Text("Keys", style="bold"))
            yield Static(table, id="keys")
            yield Static("escape: close", classes="dialog-keys")

    def action_close(self) -> None:
        self.dismiss(None)
