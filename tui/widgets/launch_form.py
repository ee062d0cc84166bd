"""The left pane's one-line form: a launch the list lacks, typed in (a token count for the fused-MoE kernel,
a shape for a shipped shape kernel; for any other kernel a call of the file's host code, captured without
a GPU, or a launch or trace JSON file). Its keys show in the footer while it has focus (the main screen's
letter keys type into it then)."""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input

PROMPT = "type a launch"


class LaunchForm(Input):
    """Posts `Typed` with the stripped text on enter; the app parses it (the parse needs the advisor)."""

    BINDINGS = [Binding("enter", "submit", "Add launch"), Binding("tab", "app.focus_next", "Next pane"),
                Binding("escape", "leave", "Back to launches"), Binding("ctrl+c", "app.quit", "Quit")]

    class Typed(Message):
        """Enter on a non-empty form."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, **kwargs):
        super().__init__(placeholder=PROMPT, **kwargs)

    def expect(self, what: str) -> None:
        """Say in the empty form what it takes for this file (e.g. "+ M,N,K ⏎")."""
        self.placeholder = what or PROMPT

    def action_leave(self) -> None:
        self.app.query_one("#tree").focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if text:
            self.post_message(self.Typed(text))
