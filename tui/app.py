"""`advisor tui FILE`: a kernel file's launches, source, ceiling and ranked suggestions in one screen.

Left: the file's Triton kernels and the launches known for each (model presets for the shipped fused-MoE
kernel, shapes for the shipped shape kernels, a launch trace with --trace, or launches typed in the form:
a call of the file's host code such as `matmul(randn(4096, 4096, f16), randn(4096, 4096, f16))`, captured
without a GPU, or a launch JSON).
Centre: the source, read-only and highlighted, at the kernel, its config lines marked. Right: the
ceiling per pipeline, ceiling / predicted / measured latency, efficiency, waves and occupancy. Bottom:
the ranked suggestions. Everything shown comes from the advisor's functions (see `tui.launches`); the
advisor's calls run off the screen's thread (`tui.background`, so `q` never waits for them); an error a
person can cause is said where it happened (the form's, the file's under the launches) or notified.

This module is the composition: the panes are `tui.widgets` (styles in app.tcss), the dialogs
`tui.screens`, the command line `tui.__main__`; here are the key bindings, the panes' messages, and the
workers that run the advisor's calls (discovery, advice, measurement, apply) and hand each result to the
pane that shows it. It runs past the ~400-line guide because those workers share one state -- the chosen
launch, the GPU, the advice and subject caches, the generation number that retires a superseded result,
the lock that runs one computation at a time -- and splitting them would spread that state over modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from pathlib import Path

from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Header, Static
from textual.worker import Worker, WorkerState

from ceilings.errors import AdvisorError
from tui import launches as L
from tui.background import Running, off_thread
from tui.figures import speedup
from tui.screens import ApplyScreen, ExplainScreen, GpuScreen, HelpScreen
from tui.widgets import (
    CeilingView,
    CompileProgress,
    LaunchForm,
    LaunchList,
    MeasureProgress,
    SourceView,
    StatusLine,
    SuggestionTable,
)

MAIN_ACTIONS = {"apply", "measure", "gpu", "sort", "toggle_source", "help", "cancel"}
NARROW = 96   # below this width the source panel gives way (`v` brings it back)
WIDE = 120    # from this width the launches and the ceiling take more columns
SHORT = 28    # below this height the suggestions take fewer rows


def _message(exc: BaseException) -> str:
    if isinstance(exc, AdvisorError):
        return str(exc)
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:300]


class AdvisorApp(App[int]):
    """The advisor's TUI for one kernel file (see the module docstring)."""

    TITLE = "triton-advisor"
    ENABLE_COMMAND_PALETTE = False
    CSS_PATH = "app.tcss"
    BINDINGS = [
        Binding("a", "apply", "Apply"),
        Binding("m", "measure", "Measure"),
        Binding("g", "gpu", "GPU"),
        Binding("s", "sort", "Sort"),
        Binding("v", "toggle_source", "Source"),
        Binding("question_mark", "help", "Keys", key_display="?"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("escape", "cancel", "Cancel", show=False),
    ]

    def __init__(self, path, trace=None, gpu="h100", dry_run=False, preset=None, tp=None, shapes=None, *,
                 confirm: bool = True, top_k: int = 5, config_dir: str | None = None, call: str | None = None):
        super().__init__()
        self.path = Path(path)
        self.trace, self.gpu_arg, self.dry_run = trace, gpu, dry_run
        self.preset, self.tp, self.shapes = preset, tp, list(shapes or [])
        self.confirm, self.top_k, self.config_dir = confirm, top_k, config_dir
        self.running = Running()                     # advisor calls in flight in background threads
        self.gpu = gpu
        self.model: L.FileModel | None = None
        self.source = ""
        self._source_at: dict[tuple, tuple[int, set[int]]] = {}  # (kernel, config params) -> (top line, marks)
        self.ref: L.LaunchRef | None = None
        self.advice = None
        self.confirmed = False
        self.cache: dict[tuple, tuple] = {}          # (launch key, gpu) -> (advice, confirmed)
        self.subjects: dict[tuple, object] = {}      # (launch key, gpu) -> its subject (a capture is slow)
        self.prediction_notes: dict[tuple, list[str]] = {}  # (kernel, gpu) -> the model's caveats
        self.generation = 0
        self.measuring = None                        # the measuring worker, while one runs
        self._stop_measuring = threading.Event()
        self._lock = asyncio.Lock()                  # one advisor computation at a time
        self._held: list[tuple] = []                 # notifications held while a dialog is open
        self._focus_table_for = -1
        self.notices: list[tuple[str, str]] = []     # (severity, message) of every notification
        self._typed_early: str | None = call         # a launch typed before the file was read (or --call)

    # ------------------------------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield LaunchList(id="tree")
                yield Static("", id="hint")
                yield LaunchForm(id="form")
            yield SourceView(id="source-panel")
            with VerticalScroll(id="ceiling-panel"):
                yield CeilingView(id="ceiling")
        with Vertical(id="bottom"):
            with Horizontal(id="statusbar"):
                yield StatusLine("", id="status")
                yield CompileProgress(id="compiling")
                yield MeasureProgress(id="progress", show_eta=False)
            yield Static("", id="why")
            yield SuggestionTable(id="table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"triton-advisor · {self.path.name}"
        self.query_one("#left").border_title = "Launches"
        self.query_one("#source-panel").border_title = "Source"
        self.query_one("#ceiling-panel").border_title = "Ceiling"
        self.query_one("#bottom").border_title = "Suggestions"
        tree = self.query_one("#tree", LaunchList)
        tree.loading = True
        self._layout_classes(self.size.width, self.size.height)
        self._set_gpu(self.gpu_arg)
        try:
            self.source = L.read_source(self.path)
        except AdvisorError as exc:
            tree.loading = False
            self.model = L.unopened(self.path, "")
            self._cannot_open(str(exc))
            return
        self.query_one("#status", StatusLine).update(f"reading {self.path.name}…")
        self._discover_job()

    def on_resize(self, event: events.Resize) -> None:
        self._layout_classes(event.size.width, event.size.height)
        if self.advice is not None:
            self.call_after_refresh(self.query_one("#table", SuggestionTable).fill)

    def _layout_classes(self, width: int, height: int) -> None:
        self.set_class(width < NARROW, "narrow")
        self.set_class(width >= WIDE, "wide")
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
        """Every notification, also kept in `notices`; messages are plain text (file names hold brackets).
        While a dialog is open it waits, so that a toast never covers the dialog."""
        self.notices.append((severity, str(message)))
        if isinstance(self.screen, ModalScreen):
            self._held.append((message, title, severity, timeout))
            return
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def push_screen(self, screen, *args, **kwargs):
        if isinstance(screen, ModalScreen):
            self.clear_notifications()  # the toasts shown go with the screen they were about
        return super().push_screen(screen, *args, **kwargs)

    def pop_screen(self):
        done = super().pop_screen()
        self.call_after_refresh(self._show_held)
        return done

    def _show_held(self) -> None:
        """The notifications held while a dialog was open, once none is."""
        if not isinstance(self.screen, ModalScreen):
            held, self._held = self._held, []
            for message, title, severity, timeout in held:
                super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    def error(self, text: str) -> None:
        self.notify(text, severity="error", timeout=12)

    @property
    def errors(self) -> list[str]:
        return [text for severity, text in self.notices if severity == "error"]

    # What the panes show, readable on the app (the tests and the actions ask the app, not the panes).
    @property
    def rows(self) -> list[tuple[str, object]]:
        """The suggestion table's rows, (rank label, candidate), in table order."""
        return self.query_one("#table", SuggestionTable).shown_rows

    @property
    def sort_key(self) -> str:
        return self.query_one("#table", SuggestionTable).sort_key

    @property
    def sort_reverse(self) -> bool:
        return self.query_one("#table", SuggestionTable).sort_reverse

    def _speedup(self, cand) -> float:
        return speedup(self.advice, cand)

    @property
    def jobs(self) -> int:
        """Advisor calls still running in background threads."""
        return self.running.count

    @property
    def shown_kernel(self) -> str | None:
        return self.query_one("#source-panel", SourceView).kernel

    # ---------------------------------------------------------------------------------- discovery
    async def _call(self, fn, *args, **kwargs):
        """An advisor call off the screen's thread (tui.background)."""
        return await off_thread(self.running, fn, *args, **kwargs)

    @work(group="discover", exit_on_error=False, description="the kernels and launches of the file")
    async def _discover_job(self) -> None:
        try:
            model = await self._call(L.discover, self.path, self.trace, self.preset, self.tp, self.shapes)
        except Exception as exc:  # an unreadable or broken file: said in the pane, never a crash
            self._discover_failed(_message(exc))
            return
        pairs, problem = [], None
        if self.trace:
            try:
                pairs = await self._call(L.trace_launches, self.path, self.trace, self.gpu)
            except Exception as exc:
                problem = _message(exc)
        self._show_model(model, pairs, problem)

    def _discover_failed(self, text: str) -> None:
        self.query_one("#source-panel", SourceView).show(self.source, set())  # a broken file still shows
        self.query_one("#tree", LaunchList).loading = False
        self.model = L.unopened(self.path, self.source)
        self.query_one("#form", LaunchForm).expect(self.model.form_hint)
        self._cannot_open(text)
        self._take_typed_early()  # a launch JSON works without the file

    def _cannot_open(self, text: str) -> None:
        """Why the file did not open, under the launches where it stays (a launch JSON can still be typed)."""
        self.query_one("#hint", Static).update(Text(f"cannot open {self.path.name}: {text}", style="red"))
        self.query_one("#status", StatusLine).update(
            Text(f"cannot open {self.path.name}; a launch JSON typed on the left still works", style="red"))
        self.error(text)

    def _form_says(self, text: str) -> None:
        """A problem with what was typed in the form: one red line under the launches that stays there until
        the next launch is added."""
        self.query_one("#hint", Static).update(Text(text, style="red"))
        self.query_one("#hint", Static).add_class("problem")

    def _show_model(self, model: L.FileModel, pairs: list, problem: str | None) -> None:
        self.model = model
        tree = self.query_one("#tree", LaunchList)
        tree.loading = False
        refs = []
        for ref, subject in pairs:
            self.subjects[(ref.key, self.gpu)] = subject
            refs.append(ref)
        first = tree.show_model(model, refs)
        hint = model.hint if not (refs or first) else ""
        if model.kind == "shape" and first is None:
            hint = model.hint
        self.query_one("#hint", Static).update(Text(hint, style="italic") if hint else "")
        self.query_one("#form", LaunchForm).expect(model.form_hint)
        self.query_one("#status", StatusLine).update(
            "choose a launch on the left (enter)" if first else "no launches yet: " + (model.hint or ""))
        self.show_source(next(iter(model.kernels)))
        if first is None and model.host_calls:
            # nothing to choose yet and the hint says "type a call below": what is typed goes there
            self.query_one("#form", LaunchForm).focus()
        else:
            tree.focus()
        if first is not None:
            self.call_after_refresh(tree.move_cursor, first)
        if problem:  # the toast goes; the line under the launches stays until a launch is added
            self.error(problem)
            self._form_says(f"the trace's launches: {problem}")
        self._take_typed_early()

    def show_source(self, kernel: str, params=()) -> None:
        """The source at `kernel`, the lines of its config (of `params`, when the launch's config is known)
        marked."""
        if not self.source:
            return
        key = (kernel, tuple(sorted(params)))
        if key not in self._source_at:
            self._source_at[key] = (L.kernel_top_line(self.source, kernel),
                                    L.config_lines(self.path, self.source, kernel, key[1]))
        top_line, marked = self._source_at[key]
        self.query_one("#source-panel", SourceView).show_kernel(self.source, kernel, marked, top_line,
                                                                self.path.name)

    # ------------------------------------------------------------------------------------ choosing
    def on_launch_list_kernel_highlighted(self, event: LaunchList.KernelHighlighted) -> None:
        if event.kernel != self.shown_kernel and event.kernel in (self.model.kernels if self.model else {}):
            self.show_source(event.kernel)

    def on_launch_list_launch_chosen(self, event: LaunchList.LaunchChosen) -> None:
        self._focus_table_for = self.generation + 1
        self.choose(event.ref)

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
            self.query_one("#status", StatusLine).update(f"computing {ref.label} on {self.gpu}…")
        self._advice_job(ref, self.gpu, gen, cached[0] if cached else None)

    def _loading(self, on: bool) -> None:
        self.query_one("#ceiling-panel").loading = on
        self.query_one("#table").loading = on

    @work(group="advice", exit_on_error=False, description="the advice for a launch")
    async def _advice_job(self, ref: L.LaunchRef, gpu: str, gen: int, ranked=None) -> None:
        async with self._lock:
            if gen != self.generation:
                return  # a newer choice superseded this one while it waited
            try:
                if ranked is None:
                    subject = self.subjects.get((ref.key, gpu))
                    if subject is None:
                        subject = await self._call(L.subject_for, self.path, ref, gpu, self.config_dir)
                        self.subjects[(ref.key, gpu)] = subject
                    if (subject.kernel, gpu) not in self.prediction_notes:
                        self.prediction_notes[(subject.kernel, gpu)] = await self._call(L.prediction_notes, subject)
                    # The ranking by prediction first, shown at once; the finalists' compiles come after.
                    # While ranking, the status line says what compiles; while confirming it keeps the
                    # ranking's summary ("confirming…") and the bar alone counts the compiles.
                    ranked = await self._compiling(L.advise_one, subject, self.top_k, confirm=False,
                                                   progress=functools.partial(self._compile_progress, say=True))
                    self._advice_ready(ref, gpu, gen, ranked, not self.confirm)
                if not self.confirm or gen != self.generation:
                    return
                confirmed = await self._compiling(L.advise_one, ranked.subject, self.top_k, confirm=True,
                                                  progress=self._compile_progress)
            except Exception as exc:
                self._job_failed(gen, f"{ref.label}: {_message(exc)}")
                return
            self._advice_ready(ref, gpu, gen, confirmed, True)

    async def _compiling(self, fn, *args, **kwargs):
        """An advisor call whose compiles report to the compile bar (`progress`); the bar goes when it ends."""
        try:
            return await self._call(fn, *args, **kwargs)
        finally:
            with contextlib.suppress(Exception):  # the app may be closing
                self.query_one("#compiling", CompileProgress).hide()

    def _advice_ready(self, ref, gpu, gen, advice, confirmed: bool) -> None:
        old = self.cache.get((ref.key, gpu))
        if not (old and old[1] and not confirmed):
            self.cache[(ref.key, gpu)] = (advice, confirmed)
        if gen == self.generation:
            self.show_advice(advice, confirmed)
            from advisor.advice.search import SEARCH_CUT_NOTE

            cut = [n for n in getattr(advice.subject, "notes", ()) if n.startswith(SEARCH_CUT_NOTE)]
            if cut and confirmed:  # configs left unranked: not a caveat of one config's numbers, so said aloud
                self.notify(cut[0], severity="warning", timeout=12)

    def _job_failed(self, gen: int, text: str) -> None:
        if gen == self.generation:
            self._loading(False)
            self.query_one("#status", StatusLine).update(Text(f"failed: {text}", style="red"))
        self.error(text)

    # ------------------------------------------------------------------------------------ showing
    def show_advice(self, advice, confirmed: bool) -> None:
        self.advice, self.confirmed = advice, confirmed
        self._loading(False)
        table = self.query_one("#table", SuggestionTable)
        table.show(advice)
        self.call_after_refresh(table.fit_width)
        self._update_status()
        self.show_source(advice.subject.kernel, advice.current.config.params)
        self._show_ceiling(table.highlighted or advice.current)
        if self._focus_table_for == self.generation and isinstance(self.focused, LaunchList):
            table.focus()
        self._focus_table_for = -1

    def _update_status(self) -> None:
        if self.advice is not None:
            self.query_one("#status", StatusLine).show_advice(self.advice, self.confirm and not self.confirmed)

    def _show_ceiling(self, cand) -> None:
        """The ceiling pane on `cand`, its title saying whether that is the current or a suggested config."""
        a = self.advice
        notes = self.prediction_notes.get((a.subject.kernel, self.gpu), [])
        self.query_one("#ceiling", CeilingView).show(a, cand, notes)
        if cand.config == a.current.config:
            role = "current"
        else:
            rank = next((r for r, c in self.rows if c.config == cand.config), "")
            role = f"suggested #{rank}" if rank.isdigit() else "suggested"
        self.query_one("#ceiling-panel").border_title = f"Ceiling · {role} {cand.config.label()}"

    def on_suggestion_table_highlighted(self, event: SuggestionTable.Highlighted) -> None:
        self._show_ceiling(event.candidate)
        self.query_one("#why", Static).update(Text(f"why: {event.why}", no_wrap=True, overflow="ellipsis"))

    def on_suggestion_table_selected(self, event: SuggestionTable.Selected) -> None:
        notes = self.prediction_notes.get((self.advice.subject.kernel, self.gpu), [])
        self.push_screen(ExplainScreen(self.advice, event.candidate, notes))

    # ------------------------------------------------------------------------------------ the form
    def on_launch_form_typed(self, event: LaunchForm.Typed) -> None:
        if self.model is None:
            # Typed before the file was read: kept and taken when it is (the reading would otherwise
            # overwrite whatever the form said, and the launch would be lost).
            self._typed_early = event.text
            self.query_one("#hint", Static).update(Text(f"{event.text}: taken once {self.path.name} is read…",
                                                        style="italic"))
            return
        self._take_typed(event.text)

    def _take_typed(self, text: str) -> None:
        problem = L.form_problem(self.model, text)
        if problem:
            self._form_says(problem)
            return
        self._typed_job(text)

    def _take_typed_early(self) -> None:
        """A launch typed while the file was being read, now that it has been."""
        text, self._typed_early = self._typed_early, None
        if text:
            self._take_typed(text)

    @work(group="typed", exclusive=True, exit_on_error=False, description="the launches typed in the form")
    async def _typed_job(self, text: str) -> None:
        """The launches `text` names (read, captured and checked by the advisor), added to the list."""
        model, tree, status = self.model, self.query_one("#tree", LaunchList), self.query_one("#status", StatusLine)
        try:
            if model.kind == "moe":
                at = tree.cursor_launch()  # a preset and TP size to default to
                if at is not None and at.kind == "moe":
                    ref = L.parse_moe_form(text, at.preset, at.tp)
                else:
                    ref = L.parse_moe_form(text, self.preset, self.tp)
                pairs, group = [(ref, None)], f"{ref.preset} TP{ref.tp}"
            elif model.kind == "shape":
                ref = L.shape_ref(next(iter(model.kernels)), text)
                # the advisor's own check of the shape
                pairs, group = [(ref, await self._call(L.subject_for, self.path, ref, self.gpu))], None
            else:
                status.update(f"capturing the launches of {text}…" if L.looks_like_call(text) else f"reading {text}…")
                tree.focus()  # the main keys answer while the capture runs (q leaves; the form would take it)
                found = L.call_launches if L.looks_like_call(text) else L.trace_launches
                target = self.path if model.kernels else None  # a file that did not open: the JSON's own source
                pairs, group = await self._call(found, target, text, self.gpu), None
        except Exception as exc:
            status.update("")
            self._form_says(_message(exc))
            self.query_one("#form", LaunchForm).focus()  # to correct what was typed
            return
        status.update("")
        self.query_one("#form", LaunchForm).value = ""
        self.query_one("#hint", Static).update("")
        self.query_one("#hint", Static).remove_class("problem")
        leaves = []
        for ref, subject in pairs:
            leaf, ref = tree.add_launch(ref, group=group)
            if subject is not None:
                self.subjects[(ref.key, self.gpu)] = subject
            leaves.append(leaf)
        if leaves:
            tree.focus()
            self.call_after_refresh(tree.select_node, leaves[0])

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The jobs turn their own errors into notifications; anything that still escapes one lands here."""
        if event.state == WorkerState.ERROR:
            self._loading(False)
            if event.worker is self.measuring:
                self.measuring = None
                self.query_one("#progress", MeasureProgress).stop()
            self.error(f"internal error in {event.worker.group}: {_message(event.worker.error)}")

    # ------------------------------------------------------------------------------------- actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """While a dialog is open, the main screen's keys wait (its own keys answer)."""
        return not (action in MAIN_ACTIONS and isinstance(self.screen, ModalScreen))

    def action_sort(self) -> None:
        sorted_by = self.query_one("#table", SuggestionTable).next_sort()
        self.notify(f"suggestions sorted by {sorted_by}", timeout=2)

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
        cand = self.query_one("#table", SuggestionTable).highlighted or self.advice.best
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
            self.subjects.clear()  # a subject holds the config its file had: read it again
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
        self.query_one("#progress", MeasureProgress).start(total=self.top_k + 1)
        self.query_one("#status", StatusLine).update(
            f"measuring {self.advice.subject.label}: current and top {self.top_k} configs (escape cancels)")
        self.measuring = self._measure_job(self.advice, self.ref, self.gpu)

    @work(group="measure", exit_on_error=False, description="timing the current and top configs")
    async def _measure_job(self, advice, ref, gpu) -> None:
        stop = self._stop_measuring = threading.Event()
        async with self._lock:
            try:
                measured = await self._call(L.measure_advice, advice.subject, self.top_k, self.confirm,
                                            on_timed=lambda n: self.call_from_thread(self._measured_one, n),
                                            cancelled=stop.is_set)
            except L.Cancelled:
                self._measure_done(ref, gpu, None, "measurement cancelled")
                return
            except Exception as exc:
                self._measure_done(ref, gpu, None, _message(exc), True)
                return
        self._measure_done(ref, gpu, measured, None)

    def _compile_progress(self, done: int, total: int, what: str, say: bool = False) -> None:
        """The candidates' compiles (advisor.advice.compile_pool), told from the advisor's thread: counted on
        the compile bar as they finish, and with `say` what compiles written on the status line."""
        with contextlib.suppress(Exception):  # the app may be closing; a progress bar is not worth a crash
            self.call_from_thread(self._show_compiles, done, total, what if say else None)

    def _show_compiles(self, done: int, total: int, what: str | None) -> None:
        self.query_one("#compiling", CompileProgress).show(done, total)
        if what:
            self.query_one("#status", StatusLine).update(f"{what}…")

    def _measured_one(self, n: int) -> None:
        self.query_one("#progress", MeasureProgress).update(progress=n)

    def _measure_done(self, ref, gpu, advice, problem: str | None, failed: bool = False) -> None:
        self.measuring = None
        self.query_one("#progress", MeasureProgress).stop()
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
            self._stop_measuring.set()
            self.query_one("#status", StatusLine).update("cancelling: the timing in progress finishes first…")

    def action_quit(self) -> None:
        """Leave now: the workers' waits are cancelled with the app; the advisor calls still running in their
        threads are left behind (tui.background), and `tui.__main__` ends the process without them."""
        self.generation += 1  # computations still waiting for their turn give up
        self._stop_measuring.set()
        self.exit(0)
