"""The centre pane: the kernel file's source at one kernel, its config lines marked."""

from __future__ import annotations

from rich.syntax import Syntax
from rich.text import Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip


class SourceView(ScrollView, can_focus=True):
    """The kernel file's source, read-only: highlighted once per file, config lines marked, and only the lines
    in view rendered (a kernel file can be long)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.source = ""
        self.marked: set[int] = set()
        self.kernel: str | None = None  # the kernel the view was last moved to
        self.top_line = 1
        self._scroll_wanted: int | None = None  # the kernel's first line, until the view has scrolled there
        self._code: list[Text] = []
        self._lines: list[Text] = []
        self._strips: dict[int, Strip] = {}

    def show_kernel(self, source: str, kernel: str, marked: set[int], top_line: int, file_name: str) -> None:
        """Show `source` at `kernel` (its first line `top_line`) with `marked` lines; scroll only when the
        kernel changes, so a person's own scrolling survives a re-marking of the same kernel."""
        if kernel == self.kernel and marked == self.marked:
            return
        moved = kernel != self.kernel
        self.kernel = kernel
        self.show(source, marked)
        self.top_line = top_line
        self.border_title = f"{file_name}:{top_line} {kernel}"
        if moved:
            self._scroll_wanted = max(top_line - 1, 0)
            self.call_after_refresh(self._scroll_to_kernel)

    def _scroll_to_kernel(self) -> None:
        """Scroll to the kernel's first line. Before the view's first layout it may not yet allow vertical
        scrolling and a scroll is dropped (the source then stayed at line 1, under load): so the scroll is
        forced, and tried again at each resize until the view stands there."""
        if self._scroll_wanted is None:
            return
        self.scroll_to(x=0, y=self._scroll_wanted, animate=False, force=True, immediate=True)
        if self.size.height and self.scroll_offset.y == min(self._scroll_wanted, self.max_scroll_y):
            self._scroll_wanted = None

    def on_resize(self) -> None:
        self._scroll_to_kernel()

    def show(self, source: str, marked: set[int]) -> None:
        if source != self.source or not self._code:
            highlighted = Syntax(source, "python", theme="monokai").highlight(source)
            self._code = highlighted.split("\n", allow_blank=True)
        self.source, self.marked = source, set(marked)
        width = len(str(len(self._code)))
        self._lines = []
        for i, code in enumerate(self._code, 1):
            mark = i in self.marked
            line = Text(f"{'▶' if mark else ' '}{i:>{width}} ", style="bold yellow" if mark else "grey42", end="")
            line.append_text(code)
            if mark:
                line.stylize("on #3b3a1c", width + 2)
            self._lines.append(line)
        self._strips.clear()
        self.virtual_size = Size(max((ln.cell_len for ln in self._lines), default=0) + 1, len(self._lines))
        self.refresh()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        i = scroll_y + y
        width = self.scrollable_content_region.width
        if i >= len(self._lines):
            return Strip.blank(width, self.rich_style)
        strip = self._strips.get(i)
        if strip is None:
            strip = self._strips[i] = Strip(list(self._lines[i].render(self.app.console)))
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)
