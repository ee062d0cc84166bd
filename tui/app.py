"""`advisor tui FILE`: a kernel file's launches, source, ceiling and ranked suggestions in one screen.

Left: the file's Triton kernels and the launches known for each (model presets for the shipped fused-MoE
kernel, shapes for the shipped shape kernels, a launch trace with --trace, or launches typed in the form).
Centre: the source, read-only and highlighted, at the kernel, its config lines marked. Right: the
ceiling per pipeline, ceiling / predicted / measured latency, efficiency, waves and occupancy. Bottom:
the ranked suggestions. Everything shown comes from the advisor's functions (see `tui.launches`); work
runs in worker threads, and every error a person can cause becomes a notification.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from functools import partial
from pathlib import Path

from rich.console import Group as RichGroup
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import DataTable, Footer, Header, Input, ProgressBar, Static, Tree
from textual.worker import Worker, WorkerState, get_current_worker

from ceilings.errors import AdvisorError
from tui import launches as L
from tui.screens import ApplyScreen, ExplainScreen, GpuScreen, HelpScreen

SORTS = ("rank", "pred", "speedup", "meas", "config")
SORT_TITLES = {"rank": "rank", "pred": "predicted us", "speedup": "speed-up", "meas": "measured us",
               "config": "config"}
COLUMNS = (("rank", "#", 3), ("config", "config", 23), ("pred", "pred us", 7), ("interval", "interval", 11),
           ("speedup", "speed-up", 8), ("meas", "meas us", 7), ("why", "why", None))
MAIN_ACTIONS = {"apply", "measure", "gpu", "sort", "toggle_source", "help", "cancel"}
NARROW = 96   # below this width the source panel gives way (`v` brings it back)
SHORT = 28    # below this height the suggestions take fewer rows


def _message(exc: BaseException) -> str:
    if isinstance(exc, AdvisorError):
        return str(exc)
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:300]


def _interval(interval: tuple[float, float]) -> str:
    lo, hi = interval
    return f"{lo:.0f}–{hi:.0f}" if hi >= 100 else f"{lo:.1f}–{hi:.1f}"


class SourceView(ScrollView, can_focus=True):
    """The kernel file's source, read-only: highlighted once per file, config lines marked, and only the lines
    in view rendered (a kernel file can be long)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.source = ""
        self.marked: set[int] = set()
        self.top_line = 1
        self._code: list[Text] = []
        self._lines: list[Text] = []
        self._strips: dict[int, Strip] = {}

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


class SuggestionTable(DataTable):
    BINDINGS = [Binding("enter", "select_cursor", "Explain")]


class AdvisorApp(App[int]):
    """The advisor's TUI for one kernel file (see the module docstring)."""

    TITLE = "triton-advisor"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    #main { height: 1fr; }
    #left { width: 26; border: round $primary; border-title-color: $text; }
    #tree { height: 1fr; }
    #hint { height: auto; color: $text-muted; }
    #form { height: 1; border: none; padding: 0; margin: 0; background: $boost; }
    #source-panel { width: 1fr; border: round $primary; }
    #ceiling-panel { width: 36; border: round $primary; }
    #bottom { height: 11; border: round $primary; }
    #statusbar { height: 1; }
    #status { width: 1fr; height: 1; }
    #why { height: 1; color: $text-muted; }
    #progress { width: 28; height: 1; display: none; }
    #progress.running { display: block; }
    #table { height: 1fr; overflow-x: hidden; }
    AdvisorApp.narrow #left { width: 24; }
    AdvisorApp.narrow #source-panel { display: none; }
    AdvisorApp.narrow #ceiling-panel { width: 1fr; }
    AdvisorApp.narrow.show-source #source-panel { display: block; }
    AdvisorApp.narrow.show-source #ceiling-panel { display: none; }
    AdvisorApp.-hide-source #source-panel { display: none; }
    AdvisorApp.-hide-source #ceiling-panel { width: 1fr; }
    AdvisorApp.short #bottom { height: 9; }
    ModalScreen { align: center middle; }
    #dialog { width: 90%; height: 85%; border: thick $accent; background: $surface; padding: 0 1; }
    #dialog.small { width: 76; height: auto; max-height: 90%; }
    #gpus { height: auto; max-height: 16; }
    .dialog-keys { color: $text-muted; height: 1; }
    #apply-what { height: auto; max-height: 4; }
    .buttons { height: 3; align: right middle; }
    .buttons Button { margin-left: 1; }
    """
    BINDINGS = [
        Binding("a", "apply", "Apply"),
        Binding("m", "measure", "Measure"),
        Binding("g", "gpu", "GPU"),
        Binding("s", "sort", "Sort"),
        Binding("v", "toggle_source", "Source"),
        Binding("question_mark", "help", "Keys", key_display="?"),
        Binding("q", "quit", "Quit"),
        Binding("escape", "cancel", "Cancel", show=False),
    ]

    def __init__(self, path, trace=None, gpu="h100", dry_run=False, preset=None, tp=None, shapes=None, *,
                 confirm: bool = True, top_k: int = 5, config_dir: str | None = None):
        super().__init__()
        self.path = Path(path)
        self.trace, self.gpu_arg, self.dry_run = trace, gpu, dry_run
        self.preset, self.tp, self.shapes = preset, tp, list(shapes or [])
        self.confirm, self.top_k, self.config_dir = confirm, top_k, config_dir
        self.jobs = 0                                # advisor computations running in threads
        self.gpu = gpu
        self.model: L.FileModel | None = None
        self.source = ""
        self.shown_kernel: str | None = None
        self._marks: dict[tuple, set[int]] = {}      # (kernel, config parameters) -> config lines
        self.ref: L.LaunchRef | None = None
        self.advice = None
        self.confirmed = False
        self.cache: dict[tuple, tuple] = {}          # (launch key, gpu) -> (advice, confirmed)
        self.rows: list[tuple[str, object]] = []     # (rank label, candidate) in table order
        self.sort_key, self.sort_reverse = "rank", False
        self.generation = 0
        self.measuring = None                        # the measuring worker, while one runs
        self._lock = threading.Lock()                # one advisor computation at a time
        self._focus_table_for = -1
        self.notices: list[tuple[str, str]] = []     # (severity, message) of every notification

    # ------------------------------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield Tree("kernels", id="tree")
                yield Static("", id="hint")
                yield Input(placeholder="type a launch", id="form")
            yield SourceView(id="source-panel")
            with VerticalScroll(id="ceiling-panel"):
                yield CeilingView(id="ceiling")
        with Vertical(id="bottom"):
            with Horizontal(id="statusbar"):
                yield Static("", id="status")
                yield ProgressBar(id="progress", show_eta=False)
            yield Static("", id="why")
            yield SuggestionTable(id="table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"triton-advisor · {self.path.name}"
        self.query_one("#left").border_title = "Launches"
        self.query_one("#source-panel").border_title = "Source"
        self.query_one("#ceiling-panel").border_title = "Ceiling"
        self.query_one("#bottom").border_title = "Suggestions"
        tree = self.query_one("#tree", Tree)
        tree.show_root = False
        tree.guide_depth = 2
        tree.loading = True
        self._setup_table()
        self._layout_classes(self.size.width, self.size.height)
        self._set_gpu(self.gpu_arg)
        try:
            self.source = L.read_source(self.path)
        except AdvisorError as exc:
            tree.loading = False
            self.query_one("#hint", Static).update(Text(f"cannot open {self.path}", style="red"))
            self.error(str(exc))
            return
        self.query_one("#status", Static).update(f"reading {self.path.name}…")
        self.run_worker(self._discover_job, thread=True, group="discover", exit_on_error=False)

    def on_resize(self, event: events.Resize) -> None:
        self._layout_classes(event.size.width, event.size.height)
        if self.advice is not None:
            self.call_after_refresh(self._fill_table)

    def _layout_classes(self, width: int, height: int) -> None:
        self.set_class(width < NARROW, "narrow")
        self.set_class(height < SHORT, "short")

    def _set_gpu(self, name: str) -> None:
        from ceilings.hardware import get_spec

        try:
            self.gpu = get_spec(name).name
        except AdvisorError as exc:
            self.gpu = get_spec("h100").name
            self.error(f"{exc}; showing {self.gpu} (press g to choose)")
        mode = " · dry run" if self.dry_run else ""
        self.sub_title = f"{self.gpu}{mode}"

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = False) -> None:
        """Every notification, also kept in `notices`; messages are plain text (file names hold brackets)."""
        self.notices.append((severity, str(message)))
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def error(self, text: str) -> None:
        self.notify(text, severity="error", timeout=12)

    @property
    def errors(self) -> list[str]:
        return [text for severity, text in self.notices if severity == "error"]

    # ---------------------------------------------------------------------------------- discovery
    @contextlib.contextmanager
    def _job(self):
        self.jobs += 1
        try:
            yield
        finally:
            self.jobs -= 1

    def _discover_job(self) -> None:
        try:
            model = L.discover(self.path, self.trace, self.preset, self.tp, self.shapes)
        except Exception as exc:  # an unreadable or broken file: a notification, never a crash
            self.call_from_thread(self._discover_failed, _message(exc))
            return
        refs, problem = [], None
        if self.trace:
            try:
                refs = L.trace_launches(self.path, self.trace, self.gpu)
            except Exception as exc:
                problem = _message(exc)
        self.call_from_thread(self._show_model, model, refs, problem)

    def _discover_failed(self, text: str) -> None:
        self.query_one("#source-panel", SourceView).show(self.source, set())  # a broken file still shows
        tree = self.query_one("#tree", Tree)
        tree.loading = False
        self.query_one("#hint", Static).update(Text(f"cannot open {self.path.name}", style="red"))
        self.query_one("#status", Static).update("")
        self.error(text)

    def _show_model(self, model: L.FileModel, refs: list, problem: str | None) -> None:
        self.model = model
        tree = self.query_one("#tree", Tree)
        tree.loading = False
        tree.clear()
        first = None
        nodes = {}
        for kernel in model.kernels:
            nodes[kernel] = tree.root.add(Text(kernel, style="bold"), data=kernel, expand=True)
        for kernel, items in model.launches.items():
            for i, item in enumerate(items):
                if isinstance(item, L.Group):
                    group = nodes[kernel].add(item.label, data=item, expand=i == 0)
                    for ref in item.launches:
                        leaf = group.add_leaf(ref.label, data=ref)
                        first = first or leaf
                else:
                    leaf = nodes[kernel].add_leaf(item.label, data=item)
                    first = first or leaf
        for ref in refs:
            if ref.kernel not in nodes:
                nodes[ref.kernel] = tree.root.add(Text(ref.kernel, style="bold"), data=ref.kernel, expand=True)
            leaf = nodes[ref.kernel].add_leaf(ref.label, data=ref)
            first = first or leaf
        hint = model.hint if not (refs or first) else ""
        if model.kind == "shape" and first is None:
            hint = model.hint
        self.query_one("#hint", Static).update(Text(hint, style="italic") if hint else "")
        self.query_one("#form", Input).placeholder = model.form_hint or "type a launch"
        self.query_one("#status", Static).update(
            "choose a launch on the left (enter)" if first else "no launches yet: " + (model.hint or ""))
        self.show_source(next(iter(model.kernels)))
        tree.focus()
        if first is not None:
            self.call_after_refresh(tree.move_cursor, first)
        if problem:
            self.error(problem)

    # ------------------------------------------------------------------------------------- source
    def show_source(self, kernel: str, params=()) -> None:
        if not self.source:
            return
        view = self.query_one("#source-panel", SourceView)
        key = (kernel, tuple(sorted(params)))
        if key not in self._marks:
            self._marks[key] = L.config_lines(self.path, self.source, kernel, key[1])
        marked = self._marks[key]
        if kernel == self.shown_kernel and marked == view.marked:
            return
        moved = kernel != self.shown_kernel
        self.shown_kernel = kernel
        view.show(self.source, marked)
        view.top_line = L.kernel_top_line(self.source, kernel)
        view.border_title = f"{self.path.name}:{view.top_line} {kernel}"
        if moved:
            self.call_after_refresh(view.scroll_to, x=0, y=max(view.top_line - 1, 0), animate=False)

    # ------------------------------------------------------------------------------------ choosing
    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        kernel = self._kernel_of(event.node.data)
        if kernel and kernel != self.shown_kernel and kernel in (self.model.kernels if self.model else {}):
            self.show_source(kernel)

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        data = event.node.data
        if isinstance(data, L.LaunchRef):
            self._focus_table_for = self.generation + 1
            self.choose(data)

    @staticmethod
    def _kernel_of(data) -> str | None:
        if isinstance(data, L.LaunchRef):
            return data.kernel
        if isinstance(data, L.Group):
            return data.launches[0].kernel if data.launches else None
        return data if isinstance(data, str) else None

    def choose(self, ref: L.LaunchRef) -> None:
        """Fill the screen for a launch: from the cache, or computed by the advisor in a worker."""
        self.generation += 1
        gen = self.generation
        self.ref = ref
        self.show_source(ref.kernel)
        cached = self.cache.get((ref.key, self.gpu))
        if cached and (cached[1] or not self.confirm):
            self.show_advice(cached[0], True)
            return
        if cached:
            self.show_advice(cached[0], False)
        else:
            self._loading(True)
            self.query_one("#status", Static).update(f"computing {ref.label} on {self.gpu}…")
        self.run_worker(partial(self._advice_job, ref, self.gpu, gen, cached[0] if cached else None),
                        thread=True, group="advice", exit_on_error=False)

    def _loading(self, on: bool) -> None:
        self.query_one("#ceiling-panel").loading = on
        self.query_one("#table").loading = on

    def _advice_job(self, ref: L.LaunchRef, gpu: str, gen: int, ranked=None) -> None:
        with self._lock, self._job():
            if gen != self.generation:
                return  # a newer choice superseded this one while it waited
            try:
                subject = ranked.subject if ranked is not None else L.subject_for(self.path, ref, gpu,
                                                                                  self.config_dir)
                if ranked is None:
                    ranked = L.advise_one(subject, self.top_k, confirm=False)
                    self.call_from_thread(self._advice_ready, ref, gpu, gen, ranked, not self.confirm)
                if not self.confirm or gen != self.generation:
                    return
                confirmed = L.advise_one(subject, self.top_k, confirm=True)
            except Exception as exc:
                self.call_from_thread(self._job_failed, gen, f"{ref.label}: {_message(exc)}")
                return
            self.call_from_thread(self._advice_ready, ref, gpu, gen, confirmed, True)

    def _advice_ready(self, ref, gpu, gen, advice, confirmed: bool) -> None:
        old = self.cache.get((ref.key, gpu))
        if not (old and old[1] and not confirmed):
            self.cache[(ref.key, gpu)] = (advice, confirmed)
        if gen == self.generation:
            self.show_advice(advice, confirmed)

    def _job_failed(self, gen: int, text: str) -> None:
        if gen == self.generation:
            self._loading(False)
            self.query_one("#status", Static).update(Text(f"failed: {text}", style="red"))
        self.error(text)

    # ------------------------------------------------------------------------------------ showing
    def show_advice(self, advice, confirmed: bool) -> None:
        self.advice, self.confirmed = advice, confirmed
        self._loading(False)
        self._fill_table()
        self._update_status()
        self.show_source(advice.subject.kernel, advice.current.config.params)
        self.query_one("#ceiling", CeilingView).show(advice, self._highlighted() or advice.current)
        self.query_one("#ceiling-panel").border_title = f"Ceiling · {advice.current.config.label()}"
        if self._focus_table_for == self.generation and isinstance(self.focused, Tree):
            self.query_one("#table").focus()
        self._focus_table_for = -1

    def _update_status(self) -> None:
        a = self.advice
        if a is None:
            return
        s = a.subject
        how = "measured" if a.measured else "predicted"
        text = Text()
        if not (self.confirmed or not self.confirm):
            text.append(f"confirming for sm_{s.spec.arch}… ", style="bold yellow")
        text.append_text(Text.assemble((s.label, "bold"), f" · now {a.current.config.label()} "
                                       f"{a.time_of(a.current):.1f} us · best ",
                                       (f"{a.best.config.label()} {a.speedup:.2f}x",
                                        "bold green" if a.speedup > 1.005 else ""),
                                       f" {how} · bound by {a.current.ceiling.binding}"))
        if s.location:
            text.append(f" · config at {Path(s.location.path).name}:{s.location.line}", style="dim")
        self.query_one("#status", Static).update(text)

    def _setup_table(self) -> None:
        table = self.query_one("#table", DataTable)
        for key, label, width in COLUMNS:
            table.add_column(label, key=key, width=width)

    def _rows(self) -> list[tuple[str, object]]:
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
            out = sorted(rows, key=lambda r: -self._speedup(r[1]))
        else:
            out = sorted(rows, key=lambda r: (r[1].measured_us is None, r[1].measured_us or 0.0))
        return list(reversed(out)) if self.sort_reverse else out

    def _speedup(self, cand) -> float:
        t = self.advice.time_of(cand)
        return self.advice.time_of(self.advice.current) / t if t else 1.0

    def _why(self, rank: str, cand) -> str:
        a = self.advice
        eff = f"{cand.ceiling.binding}-bound, {cand.efficiency:.0%} of its {cand.ceiling.ceiling_us:.1f} us ceiling"
        if rank == "cur":
            return "current config; " + eff
        if cand is a.best:
            return a.why
        return eff + (f"; {cand.notes[0]}" if cand.notes else "")

    def _fill_table(self) -> None:
        table = self.query_one("#table", DataTable)
        keep = self._highlighted()
        self.rows = self._rows()
        fixed = sum(w for _, _, w in COLUMNS if w) + 2 * len(COLUMNS)
        why_width = max(12, table.size.width - fixed - 2) if table.size.width else 40
        table.clear(columns=True)
        for key, label, width in COLUMNS:
            width = width or why_width
            if key == self.sort_key:
                label += " ▼" if not self.sort_reverse else " ▲"
            table.add_column(label, key=key, width=width)
        cursor = 0
        for i, (rank, cand) in enumerate(self.rows):
            speed = self._speedup(cand)
            style = "bold green" if speed > 1.005 else ("dim" if speed < 0.995 else "")
            table.add_row(Text(rank, style="bold" if rank == "cur" else ""), cand.config.label(),
                          Text(f"{cand.predicted_us:.1f}", justify="right"),
                          Text(_interval(cand.interval), justify="right"),
                          Text(f"{speed:.2f}x", style=style, justify="right"),
                          Text("—" if cand.measured_us is None else f"{cand.measured_us:.1f}", justify="right"),
                          self._why(rank, cand), key=str(i))
            if keep is not None and cand.config == keep.config:
                cursor = i
        if self.rows:
            table.move_cursor(row=cursor, animate=False)

    def _highlighted(self):
        table = self.query_one("#table", DataTable)
        if not self.rows or table.row_count == 0:
            return None
        row = table.cursor_row
        return self.rows[row][1] if 0 <= row < len(self.rows) else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        cand = self._highlighted()
        if cand is not None and self.advice is not None:
            self.query_one("#ceiling", CeilingView).show(self.advice, cand)
            label = "current" if cand.config == self.advice.current.config else "suggested"
            self.query_one("#ceiling-panel").border_title = f"Ceiling · {cand.config.label()} ({label})"
            rank = self.rows[self.query_one("#table", DataTable).cursor_row][0]
            self.query_one("#why", Static).update(Text(f"why: {self._why(rank, cand)}", no_wrap=True,
                                                       overflow="ellipsis"))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        cand = self._highlighted()
        if cand is not None:
            self.push_screen(ExplainScreen(self.advice, cand))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = event.column_key.value
        if key not in SORTS:
            return
        if key == self.sort_key:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_key, self.sort_reverse = key, False
        if self.advice is not None:
            self._fill_table()

    # ------------------------------------------------------------------------------------ the form
    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text or self.model is None:
            return
        tree = self.query_one("#tree", Tree)
        try:
            leaves = self._add_typed(text, tree)
        except Exception as exc:
            self.error(_message(exc))
            return
        event.input.value = ""
        if leaves:
            tree.focus()
            self.call_after_refresh(tree.select_node, leaves[0])

    def _add_typed(self, text: str, tree: Tree) -> list:
        model = self.model
        kernel_nodes = {n.data: n for n in tree.root.children if isinstance(n.data, str)}
        if model.kind == "moe":
            node = tree.cursor_node
            data = node.data if node is not None else None
            if isinstance(data, L.Group) and data.launches:
                data = data.launches[0]
            if isinstance(data, L.LaunchRef) and data.kind == "moe":
                ref = L.parse_moe_form(text, data.preset, data.tp)
            else:
                ref = L.parse_moe_form(text, self.preset, self.tp)
            parent = kernel_nodes["fused_moe_kernel"]
            label = f"{ref.preset} TP{ref.tp}"
            group = next((g for g in parent.children if isinstance(g.data, L.Group) and g.data.label == label), None)
            if group is None:
                group = parent.add(label, data=L.Group(label, [ref]), expand=True)
            else:
                group.data.launches.append(ref)
                group.expand()
            return [group.add_leaf(ref.label, data=ref)]
        if model.kind == "shape":
            kernel = next(iter(model.kernels))
            ref = L.shape_ref(kernel, text)
            L.subject_for(self.path, ref, self.gpu, self.config_dir)  # the advisor's own check of the shape
            self.query_one("#hint", Static).update("")
            return [kernel_nodes[kernel].add_leaf(ref.label, data=ref)]
        refs = L.trace_launches(self.path, text, self.gpu)
        self.query_one("#hint", Static).update("")
        out = []
        for ref in refs:
            parent = kernel_nodes.get(ref.kernel) or tree.root.add(ref.kernel, data=ref.kernel, expand=True)
            out.append(parent.add_leaf(ref.label, data=ref))
        return out

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The jobs turn their own errors into notifications; anything that still escapes one lands here."""
        if event.state == WorkerState.ERROR:
            self._loading(False)
            if event.worker is self.measuring:
                self.measuring = None
                self.query_one("#progress", ProgressBar).remove_class("running")
            self.error(f"internal error in {event.worker.group}: {_message(event.worker.error)}")

    # ------------------------------------------------------------------------------------- actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """While a dialog is open, the main screen's keys wait (its own keys answer)."""
        return not (action in MAIN_ACTIONS and isinstance(self.screen, ModalScreen))

    def action_sort(self) -> None:
        i = SORTS.index(self.sort_key)
        self.sort_key, self.sort_reverse = SORTS[(i + 1) % len(SORTS)], False
        if self.advice is not None:
            self._fill_table()
        self.notify(f"suggestions sorted by {SORT_TITLES[self.sort_key]}", timeout=2)

    def action_toggle_source(self) -> None:
        if self.has_class("narrow"):
            self.toggle_class("show-source")
        else:
            self.toggle_class("-hide-source")

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_gpu(self) -> None:
        from ceilings.hardware import known_names

        def chosen(name: str | None) -> None:
            if not name or name == self.gpu:
                return
            self._set_gpu(name)
            self.notify(f"advice for {self.gpu}", timeout=3)
            if self.ref is not None:
                self.choose(self.ref)

        self.push_screen(GpuScreen(known_names(), self.gpu), chosen)

    def action_apply(self) -> None:
        if self.advice is None:
            self.notify("choose a launch first: applying writes one of its suggestions", severity="warning")
            return
        cand = self._highlighted() or self.advice.best
        try:
            edits = L.plan_edits(self.advice, cand)
        except Exception as exc:
            self.error(f"cannot apply {cand.config.label()}: {_message(exc)}")
            return
        if not edits:
            self.notify(f"nothing to change: {cand.config.label()} is already what {self.advice.subject.label} "
                        "uses", severity="warning")
            return

        def confirmed(ok: bool | None) -> None:
            if not ok:
                self.notify("not applied", timeout=3)
                return
            if self.dry_run:
                self.notify(f"dry run: {len(edits)} file(s) not written ({', '.join(e.path.name for e in edits)})",
                            timeout=6)
                return
            try:
                done = L.write_edits(edits)
            except Exception as exc:
                self.error(f"apply failed: {_message(exc)}")
                return
            self.notify("; ".join(done), timeout=8)
            self.cache.clear()
            if self.ref is not None:
                self.choose(self.ref)

        self.push_screen(ApplyScreen(edits, self.dry_run), confirmed)

    def action_measure(self) -> None:
        if self.measuring is not None:
            self.notify("a measurement is running; escape cancels it", severity="warning")
            return
        if self.advice is None:
            self.notify("choose a launch first: measuring times its current and top configs", severity="warning")
            return
        import torch

        if not torch.cuda.is_available():
            self.notify("cannot measure: torch sees no CUDA GPU on this machine; the times shown are the "
                        "model's predictions", severity="warning", timeout=8)
            return
        bar = self.query_one("#progress", ProgressBar)
        bar.update(total=self.top_k + 1, progress=0)
        bar.add_class("running")
        self.query_one("#status", Static).update(
            f"measuring {self.advice.subject.label}: current and top {self.top_k} configs (escape cancels)")
        self.measuring = self.run_worker(partial(self._measure_job, self.advice, self.ref, self.gpu),
                                         thread=True, group="measure", exit_on_error=False)

    def _measure_job(self, advice, ref, gpu) -> None:
        worker = get_current_worker()
        with self._lock, self._job():
            try:
                measured = L.measure_advice(advice.subject, self.top_k, self.confirm,
                                            on_timed=lambda n: self.call_from_thread(self._measured_one, n),
                                            cancelled=lambda: worker.is_cancelled)
            except L.Cancelled:
                self.call_from_thread(self._measure_done, ref, gpu, None, "measurement cancelled")
                return
            except Exception as exc:
                self.call_from_thread(self._measure_done, ref, gpu, None, _message(exc), True)
                return
        self.call_from_thread(self._measure_done, ref, gpu, measured, None)

    def _measured_one(self, n: int) -> None:
        self.query_one("#progress", ProgressBar).update(progress=n)

    def _measure_done(self, ref, gpu, advice, problem: str | None, failed: bool = False) -> None:
        self.measuring = None
        self.query_one("#progress", ProgressBar).remove_class("running")
        if problem:
            if failed:
                self.error(f"measuring failed: {problem}")
            else:
                self.notify(problem, severity="warning")
            self._update_status()
            return
        self.cache[(ref.key, gpu)] = (advice, True)
        if ref == self.ref and gpu == self.gpu:
            self.show_advice(advice, True)
        self.notify(f"measured {advice.measured} configs of {advice.subject.label}", timeout=5)

    def action_cancel(self) -> None:
        if self.measuring is not None:
            self.measuring.cancel()
            self.query_one("#status", Static).update("cancelling: the timing in progress finishes first…")

    def action_quit(self) -> None:
        self.generation += 1  # computations still waiting for their turn give up
        if self.measuring is not None:
            self.measuring.cancel()
        self.exit(0)


def run(path, trace=None, gpu="h100", dry_run=False, preset=None, tp=None, shapes=None, *, confirm: bool = True,
        top_k: int = 5, config_dir: str | None = None) -> int:
    """Open the TUI on a kernel file; the exit code (2: a file or GPU that cannot be used, one line on stderr)."""
    from ceilings.hardware import get_spec

    try:
        L.read_source(path)
        get_spec(gpu)
        if preset or tp is not None:
            from kernels.moe_presets import TP_SIZES, get_preset

            if tp is not None and tp not in TP_SIZES:
                raise AdvisorError(f"--tp {tp}: the tensor-parallel size must be one of {TP_SIZES}")
            if preset:
                get_preset(preset).shape(tp or 1)
        if trace and not Path(trace).is_file():
            raise AdvisorError(f"trace {trace} does not exist; record one with `advisor record -- python prog.py`")
    except AdvisorError as exc:
        print(f"advisor: error: {exc}", file=sys.stderr)
        return 2
    app = AdvisorApp(path, trace=trace, gpu=gpu, dry_run=dry_run, preset=preset, tp=tp, shapes=shapes,
                     confirm=confirm, top_k=top_k, config_dir=config_dir)
    code = app.run()
    code = code if isinstance(code, int) else 0
    if app.jobs:
        # A computation thread (a compile, a timing) cannot be interrupted and would hold the exit until it
        # ends: the screen is already restored, so leave now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
