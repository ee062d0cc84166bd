"""The bottom table: the ranked suggestions of one launch, sortable by any numeric column.

The table owns what it shows (the advice, its rows in display order, the sort) and tells the app what the
cursor is on with its own messages: `Highlighted` (the ceiling pane and the why line follow it) and
`Selected` (enter: explain that suggestion).
"""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from tui.figures import cannot_run, speedup, speedup_text, us

SORTS = ("rank", "pred", "speedup", "meas", "config")
SORT_TITLES = {"rank": "rank", "pred": "predicted us", "speedup": "speed-up", "meas": "measured us",
               "config": "config"}
COLUMNS = (("rank", "#", 3), ("config", "config", 23), ("pred", "pred us", 7), ("interval", "interval", 11),
           ("speedup", "speed-up", 8), ("meas", "meas us", 7), ("why", "why", None))


def why(advice, rank: str, cand) -> str:
    """One line on why a row ranks where it does: the advice's own reason for the best, the ceiling otherwise."""
    reason = cannot_run(advice, cand)
    if reason:
        return f"cannot run: {reason}"
    eff = f"{cand.ceiling.binding}-bound, {cand.efficiency:.0%} of its {cand.ceiling.ceiling_us:.1f} us ceiling"
    if rank == "cur":
        # an autotuned launch captured without a GPU: the current row is the autotuner's expected pick
        return ("the autotuner's expected pick; " if advice.subject.autotuner_picks else "current config; ") + eff
    listed = advice.subject.listed
    past = "past the autotune list; " if listed and cand.config not in listed else ""
    if cand is advice.best:
        return past + advice.why
    return past + eff + (f"; {cand.notes[0]}" if cand.notes else "")


def _interval(interval: tuple[float, float]) -> str:
    lo, hi = interval
    if us(hi) == "—":
        return "—"
    return f"{lo:.0f}–{hi:.0f}" if hi >= 100 else f"{lo:.1f}–{hi:.1f}"


class SuggestionTable(DataTable):
    """The current config and the ranked candidates of one `Advice`, one row each."""

    BINDINGS = [Binding("enter", "select_cursor", "Explain")]

    class Highlighted(Message):
        """The cursor rests on a suggestion."""

        def __init__(self, candidate, why: str) -> None:
            super().__init__()
            self.candidate, self.why = candidate, why

    class Selected(Message):
        """Enter on a suggestion: explain it."""

        def __init__(self, candidate) -> None:
            super().__init__()
            self.candidate = candidate

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.advice = None
        self.shown_rows: list[tuple[str, object]] = []  # (rank label, candidate) in table order
        self.sort_key, self.sort_reverse = "rank", False

    def on_mount(self) -> None:
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    def show(self, advice) -> None:
        """Fill the table with `advice`; the cursor stays on the config it was on, if that is still listed."""
        self.advice = advice
        self.fill()

    def fit_width(self) -> None:
        """Fill again when the table's width changed since it was filled (it was filled before its first
        layout): the why column takes the width there is."""
        if self.advice is not None and self.size.width != getattr(self, "filled_width", None):
            self.fill()

    def next_sort(self) -> str:
        """Sort by the next column of SORTS; returns what the rows are now sorted by."""
        i = SORTS.index(self.sort_key)
        self.sort_key, self.sort_reverse = SORTS[(i + 1) % len(SORTS)], False
        if self.advice is not None:
            self.fill()
        return SORT_TITLES[self.sort_key]

    @property
    def highlighted(self):
        """The candidate under the cursor, or None while the table is empty."""
        if not self.shown_rows or self.row_count == 0:
            return None
        row = self.cursor_row
        return self.shown_rows[row][1] if 0 <= row < len(self.shown_rows) else None

    def _sorted_rows(self) -> list[tuple[str, object]]:
        a = self.advice
        rows = []
        has_current = False
        for i, cand in enumerate(a.ranked, 1):
            is_current = cand is a.current or cand.config == a.current.config
            has_current = has_current or is_current
            rows.append(("cur" if is_current else str(i), cand))
        if not has_current:
            rows.insert(0, ("cur", a.current))
        if self.sort_key == "rank":
            out = rows
        elif self.sort_key == "config":
            out = sorted(rows, key=lambda r: r[1].config.label())
        elif self.sort_key == "pred":
            out = sorted(rows, key=lambda r: r[1].predicted_us)
        elif self.sort_key == "speedup":
            out = sorted(rows, key=lambda r: -(speedup(a, r[1]) or 0.0))
        else:
            out = sorted(rows, key=lambda r: (r[1].measured_us is None, r[1].measured_us or 0.0))
        return list(reversed(out)) if self.sort_reverse else out

    def fill(self) -> None:
        """Rebuild the rows (after new advice, a sort, or a resize: the why column takes the width left)."""
        keep = self.highlighted
        self.filled_width = self.size.width
        self.shown_rows = self._sorted_rows()
        # The config column as wide as its longest label (a kernel's own names, `BM=64 BN=128 BK=128 w8 s3`, pass
        # 23: rows that differ only in num_stages would read alike), up to half the table; why takes the rest.
        longest = max((len(cand.config.label()) for _, cand in self.shown_rows), default=0)
        widths = {key: width for key, _, width in COLUMNS}
        widths["config"] = max(widths["config"], min(longest, self.size.width // 2 if self.size.width else longest))
        fixed = sum(w for w in widths.values() if w) + 2 * len(COLUMNS)
        why_width = max(12, self.size.width - fixed - 2) if self.size.width else 40
        self.clear(columns=True)
        for key, label, _ in COLUMNS:
            width = widths[key] or why_width
            if key == self.sort_key:
                label += " ▼" if not self.sort_reverse else " ▲"
            self.add_column(label, key=key, width=width)
        cursor = 0
        for i, (rank, cand) in enumerate(self.shown_rows):
            speed = speedup(self.advice, cand)
            if speed is None:
                style = "bold red" if cannot_run(self.advice, cand) else "bold green"
            else:
                style = "bold green" if speed > 1.005 else ("dim" if speed < 0.995 else "")
            self.add_row(Text(rank, style="bold" if rank == "cur" else ""), cand.config.label(),
                         Text(us(cand.predicted_us), justify="right"),
                         Text(_interval(cand.interval), justify="right"),
                         Text(speedup_text(self.advice, cand), style=style, justify="right"),
                         Text("—" if cand.measured_us is None else f"{cand.measured_us:.1f}", justify="right"),
                         why(self.advice, rank, cand), key=str(i))
            if keep is not None and cand.config == keep.config:
                cursor = i
        if self.shown_rows:
            self.move_cursor(row=cursor, animate=False)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        cand = self.highlighted
        if cand is not None and self.advice is not None:
            self.post_message(self.Highlighted(cand, why(self.advice, self.shown_rows[self.cursor_row][0], cand)))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        cand = self.highlighted
        if cand is not None:
            self.post_message(self.Selected(cand))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = event.column_key.value
        if key not in SORTS:
            return
        if key == self.sort_key:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_key, self.sort_reverse = key, False
        if self.advice is not None:
            self.fill()
