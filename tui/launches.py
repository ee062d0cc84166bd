"""What the TUI shows, gathered through the advisor's own functions (no textual here).

The TUI holds no advice logic: kernels come from `ceilings.compile.find_kernels`, launches from
`advisor.advice.suggest.subjects_for` (the same call `advisor suggest` makes: model presets, shapes, a
launch trace, or a call of the file's host code captured without a GPU), rankings from
`advisor.advice.search.search`, edits from `advisor.advice.suggest.plan_apply` and
`advisor.advice.apply.write`. This module only decides what to list (which presets, token counts
and shapes) and where to look in the source. A little over 400 lines: each kind of target (preset,
shape, trace, call, launch JSON) has its listing here, so that the TUI's widgets hold none.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ceilings import pysource
from ceilings.errors import AdvisorError
from ceilings.hardware import resolve_gpu

DEFAULT_TOKENS = (1, 16, 64, 256, 1024, 4096)


@dataclass(frozen=True)
class LaunchRef:
    """One launch in the left panel: enough to rebuild its subject for any GPU with `subjects_for`."""

    kind: str                   # "moe", "shape", "trace" or "call"
    kernel: str
    label: str
    preset: str | None = None
    tp: int = 1
    tokens: int | None = None
    shape: str | None = None
    trace: str | None = None
    index: int = 0
    call: str | None = None     # a call of the file's host code, e.g. "matmul(randn(64, 64, f16), ...)"

    @property
    def key(self) -> tuple:
        return (self.kind, self.kernel, self.preset, self.tp, self.tokens, self.shape, self.trace, self.index,
                self.call)


@dataclass
class Group:
    """A folder of launches under a kernel (a model preset at a TP size)."""

    label: str
    launches: list[LaunchRef] = field(default_factory=list)


@dataclass
class FileModel:
    """The kernels of a file and the launches known for each."""

    path: Path
    kind: str                                       # "moe", "shape", "generic"
    kernels: dict[str, int]                         # name -> line of its `def`
    launches: dict[str, list[LaunchRef | Group]]    # kernel -> launches or groups of them
    form_hint: str = ""                             # what the launch form takes
    hint: str = ""                                  # shown under the tree when a kernel has no launch
    shape_what: str = ""                            # "M,N,K" for the shipped shape kernels
    host_calls: list[str] = field(default_factory=list)  # the file's functions that launch its kernels


# ----------------------------------------------------------------------------------------- the file

def read_source(path: str | Path) -> str:
    path = Path(path)
    try:
        return path.read_text()
    except FileNotFoundError:
        raise AdvisorError(f"{path} does not exist; give the path of a Python file with Triton kernels") from None
    except IsADirectoryError:
        raise AdvisorError(f"{path} is a folder; give the path of a Python file with Triton kernels") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AdvisorError(f"{path} cannot be read ({exc.__class__.__name__}); check its permissions") from None


def def_lines(source: str) -> dict[str, int]:
    """Line of each top-level `def` (1-based), by name."""
    out = {}
    for i, text in enumerate(source.splitlines(), 1):
        m = re.match(r"^def\s+([A-Za-z_]\w*)\s*\(", text)
        if m:
            out.setdefault(m.group(1), i)
    return out


def kernel_top_line(source: str, kernel: str) -> int:
    """The line a reader starts a kernel at: its first decorator (@triton.autotune, @triton.jit)."""
    try:
        tree = pysource.parse(source)
    except SyntaxError:
        return def_lines(source).get(kernel, 1)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == kernel:
            return min([node.lineno] + [d.lineno for d in node.decorator_list])
    return 1


def config_lines(path: str | Path, source: str, kernel: str, params: Sequence[str] = ()) -> set[int]:
    """Lines where a kernel's config is written or declared: its @triton.autotune configs, a module-level
    CONFIG_SPACE, and the constexpr meta-parameters of its signature (those of `params`, or any
    BLOCK/GROUP/TILE one when no config is known yet)."""
    marked: set[int] = set()
    try:
        from advisor.advice.apply import read_autotune_configs

        marked.update(line for _, line in read_autotune_configs(path, kernel))
    except (ImportError, AdvisorError, SyntaxError, OSError):
        pass
    lines = source.splitlines()
    for i, text in enumerate(lines):
        if re.match(r"^CONFIG_SPACE\s*[:=]", text):
            j = i
            while j < len(lines):
                marked.add(j + 1)
                if j > i and re.match(r"^[}\])]", lines[j]):
                    break
                if j == i and text.rstrip().endswith(("}", ")", "]")):
                    break
                j += 1
    try:
        tree = pysource.parse(source)
    except SyntaxError:
        return marked
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == kernel:
            for arg in node.args.args + node.args.kwonlyargs:
                ann = ast.unparse(arg.annotation) if arg.annotation is not None else ""
                if "constexpr" not in ann:
                    continue
                if (arg.arg in params) if params else re.match(r"^(BLOCK|GROUP|TILE)", arg.arg):
                    marked.add(arg.lineno)
    return marked


# ---------------------------------------------------------------------------------------- discovery

def moe_default_tp(preset: str) -> int:
    """The smallest TP size of a preset that has a shipped tuned config file (for any GPU), else 1."""
    from kernels.moe_configs import SHIPPED_DIR
    from kernels.moe_presets import TP_SIZES, get_preset

    p = get_preset(preset)
    for tp in TP_SIZES:
        if p.intermediate % tp:
            continue
        shape = p.shape(tp)
        if any(SHIPPED_DIR.glob(f"E={shape.num_experts},N={shape.config_file_n},device_name=*.json")):
            return tp
    return 1


def moe_group(preset: str, tp: int, tokens: Sequence[int] = DEFAULT_TOKENS) -> Group:
    from kernels.moe_presets import get_preset

    name = get_preset(preset).name
    return Group(f"{name} TP{tp}", [LaunchRef("moe", "fused_moe_kernel", f"M={m}", preset=name, tp=tp, tokens=m)
                                    for m in tokens])


def discover(path: str | Path, trace: str | None = None, preset: str | None = None, tp: int | None = None,
             shapes: Sequence[str] | None = None) -> FileModel:
    """The kernels of `path` and their known launches (a trace's come from `trace_launches`, so that a bad
    trace leaves the kernels listed). Raises AdvisorError for a file that cannot be read or imported."""
    from advisor.advice import moe
    from ceilings.compile import find_kernels, load_module
    from kernels.family import family_of_file

    path = Path(path)
    source = read_source(path)
    module = load_module(path)
    found = find_kernels(module)
    if not found:
        raise AdvisorError(f"{path} defines no Triton kernel (no @triton.jit function at top level)")
    lines = def_lines(source)
    family = family_of_file(path)
    kernels = {name: lines.get(name, 1) for name in found}
    launches: dict[str, list] = {name: [] for name in kernels}
    model = FileModel(path, "generic", kernels, launches)
    model.host_calls = host_calls(source, kernels)
    if trace:
        model.form_hint = "+ call or launch JSON ⏎"
    elif moe.is_layer_kernel(path):
        from kernels.moe_presets import PRESETS, get_preset

        model.kind = "moe"
        names = [get_preset(preset).name] if preset else list(PRESETS)
        for name in names:
            use_tp = tp if tp and PRESETS[name].intermediate % tp == 0 else moe_default_tp(name)
            launches["fused_moe_kernel"].append(moe_group(name, use_tp))
        model.form_hint = "+ [PRESET] TOKENS [TP] ⏎"
    elif family is not None and family.read_shape is not None:
        what = family.shape_form
        model.kind, model.shape_what = "shape", what
        model.form_hint = f"+ {what} ⏎"
        kernel = next(iter(kernels))
        for s in shapes or ():
            launches[kernel].append(shape_ref(kernel, s))
        if not shapes:
            model.hint = f"type a launch's {what} below (or pass --shape)"
    else:
        model.form_hint = "+ call or launch JSON ⏎"
        model.hint = call_hint(model)
    return model


def unopened(path: str | Path, source: str) -> FileModel:
    """The model of a file that could not be opened: its `def`s as they read, no launches; a launch JSON or
    trace typed in the form (which names its own kernel file) still works."""
    return FileModel(Path(path), "generic", {}, {}, form_hint="+ launch JSON ⏎",
                     host_calls=host_calls(source, def_lines(source)))


def call_hint(model: FileModel) -> str:
    """What to type in the form for a file whose launches come from a call of its host code."""
    if model.host_calls:
        return f"type a call of {model.host_calls[0]} below; tensors as randn(4096, 4096, f16)"
    return "pass --trace TRACE.json or type a launch JSON below (no function of the file launches its kernels)"


def host_calls(source: str, kernels) -> list[str]:
    """The file's top-level functions a person would call to launch its kernels, as signatures to type a
    call of (`matmul(a, b, activation='')`): those naming a kernel or launching one (`x[grid](...)`, a kernel
    a factory built: torchao's `impls.act_quant[grid](x, y, s)`), public names first; not a factory that
    defines the kernels inside itself (torchao's `_build_triton_impls()` launches nothing)."""
    try:
        tree = pysource.parse(source)
    except SyntaxError:
        return []
    public, private = [], []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or node.name in kernels:
            continue
        inner = list(ast.walk(node))[1:]
        if any(isinstance(n, ast.FunctionDef) and n.name in kernels for n in inner):
            continue  # a factory: it defines the kernels, a call of it launches none
        named = {n.id for n in inner if isinstance(n, ast.Name)}
        launches = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) for n in inner)
        if named & set(kernels) or launches:
            args = ast.unparse(node.args).replace(": torch.Tensor", "")
            args = re.sub(r":\s*[A-Za-z_.\[\]| ]+(?=[,=]|$)", "", args)  # annotations say nothing to type
            (private if node.name.startswith("_") else public).append(f"{node.name}({args})")
    return public + private


def looks_like_call(text: str) -> bool:
    return bool(re.match(r"^[A-Za-z_][\w.]*\s*\(.*\)\s*$", text, re.S))


def looks_like_shape(text: str) -> bool:
    return bool(re.match(r"^\s*\d+(\s*[,x× ]\s*\d+)*\s*$", text))


def form_problem(model: FileModel, text: str) -> str | None:
    """Why `text` is not what this file's form takes, saying what to type instead; None when it may be."""
    if model.kind in ("moe", "shape"):
        return None
    if looks_like_shape(text):
        what = (f"a call of its host code, e.g. {model.host_calls[0]} with tensors as randn(4096, 4096, f16)"
                if model.host_calls else "a launch JSON (no function of the file launches its kernels)")
        return f"{text}: this file's kernels take no shape; type {what}"
    if looks_like_call(text) and not model.kernels:
        return f"{text}: the file did not open, so its functions cannot be called; type a launch JSON"
    return None


def shape_ref(kernel: str, shape: str) -> LaunchRef:
    return LaunchRef("shape", kernel, shape.replace(" ", ""), shape=shape.replace(" ", ""))


def trace_launches(path: str | Path | None, trace: str, gpu: str) -> list[tuple[LaunchRef, object]]:
    """One launch per subject of `subjects_for(path, trace=...)`, as `advisor suggest` lists them, on the GPU
    named `gpu` (resolved here: the TUI's edge), each with its subject; `path` None: the launches of the
    trace's own kernel files."""
    from advisor.advice.suggest import subjects_for

    if path is None:  # the kernel file did not open: the launch JSON's own source
        subjects, kind = subjects_for(str(trace), gpu=resolve_gpu(gpu)), "json"
    else:
        subjects, kind = subjects_for(str(path), trace=trace, gpu=resolve_gpu(gpu)), "trace"
    return [(LaunchRef(kind, s.kernel, short_label(s.label, s.kernel), trace=str(trace), index=i), s)
            for i, s in enumerate(subjects)]


def call_launches(path: str | Path, call: str, gpu: str) -> list[tuple[LaunchRef, object]]:
    """The launches one call of the file's host code makes, captured without a GPU by `subjects_for(path,
    call=...)` (the CLI's `--call`), each with its subject."""
    from advisor.advice.suggest import subjects_for

    subjects = subjects_for(str(path), call=call, gpu=resolve_gpu(gpu))
    return [(LaunchRef("call", s.kernel, short_label(s.label, s.kernel), call=call, index=i), s)
            for i, s in enumerate(subjects)]


def short_label(label: str, kernel: str) -> str:
    """A launch's label for the tree: without the kernel's name (the node above says it), sizes without
    spaces (`a_ptr[4096,4096]`), the tensors before the grid (they tell two launches apart first)."""
    label = label[len(kernel):].strip() if label.startswith(kernel + " ") else label
    return compact_label(label)


def compact_label(label: str) -> str:
    """A launch's label in few columns: sizes without spaces, tensors without the `_ptr` every pointer
    argument carries (`a[4096,4096]`), the tensors before the grid (they tell two launches apart first)."""
    tokens = re.sub(r"_ptr\[", "[", re.sub(r",\s+", ",", label)).split()
    return " ".join([t for t in tokens if not t.startswith("grid=")] + [t for t in tokens if t.startswith("grid=")])


def parse_moe_form(text: str, default_preset: str | None, default_tp: int | None = None) -> LaunchRef:
    """`512`, `mixtral-8x7b 512` or `mixtral-8x7b 512 4` (preset, tokens, TP); without a preset, the
    default preset at the default TP size."""
    from kernels.moe_presets import get_preset

    words = text.replace(",", " ").split()
    preset, tp = default_preset, None
    if words and not words[0].isdigit():
        preset = get_preset(words.pop(0)).name
    if not words or not words[0].isdigit() or int(words[0]) < 1 or len(words) > 2:
        raise AdvisorError(f"{text!r}: type a token count (e.g. 512), optionally after a preset and before a TP size")
    tokens = int(words[0])
    if len(words) == 2:
        if not words[1].isdigit():
            raise AdvisorError(f"{text!r}: the TP size must be 1, 2, 4 or 8")
        tp = int(words[1])
    if preset is None:
        raise AdvisorError(f"{text!r}: name a preset first, e.g. mixtral-8x7b {tokens}")
    tp = tp or (default_tp if preset == default_preset else None) or moe_default_tp(preset)
    get_preset(preset).shape(tp)  # a clear error for a TP size the preset does not split over
    return LaunchRef("moe", "fused_moe_kernel", f"M={tokens}", preset=preset, tp=tp, tokens=tokens)


# ------------------------------------------------------------------------------------------ advice

def subject_for(path: str | Path, ref: LaunchRef, gpu: str, config_dir: str | None = None):
    """The advisor's subject of a launch, through `subjects_for` (the CLI's own entry point), on the GPU
    named `gpu` (resolved here: the TUI's edge)."""
    from advisor.advice.suggest import subjects_for

    gpu = resolve_gpu(gpu)
    if ref.kind == "moe":
        return subjects_for(str(path), preset=ref.preset, tp=ref.tp, tokens=[ref.tokens], gpu=gpu,
                            config_dir=config_dir)[0]
    if ref.kind == "shape":
        return subjects_for(str(path), shapes=[ref.shape], gpu=gpu)[0]
    if ref.kind == "call":
        subjects = subjects_for(str(path), call=ref.call, gpu=gpu)
    elif ref.kind == "json":
        subjects = subjects_for(str(ref.trace), gpu=gpu)
    else:
        subjects = subjects_for(str(path), trace=ref.trace, gpu=gpu)
    if ref.index >= len(subjects):
        raise AdvisorError(f"{ref.call or ref.trace}: launch {ref.index + 1} is no longer made; open the file again")
    return subjects[ref.index]


def prediction_notes(subject) -> list[str]:
    """The caveats of the subject's predictions (a kernel outside the model's data), as `advisor predict`
    writes them."""
    from advisor.advice.search import predict_candidates
    from advisor.model.predict import is_outside_note

    (current,) = predict_candidates(subject, [subject.current])
    return [n for n in current.notes if is_outside_note(n)]


def advise_one(subject, top_k: int = 5, confirm: bool = True, progress=None):
    """`advise` of one subject; `progress(done, total, what)` is told of the candidates' compiles."""
    from advisor.advice.suggest import advise

    return advise([subject], top_k=top_k, confirm=confirm, progress=progress)[0]


def measure_advice(subject, top_k: int, confirm: bool, on_timed: Callable[[int], None] | None = None,
                   cancelled: Callable[[], bool] | None = None):
    """`search(subject, top_k, confirm, measure=top_k)` with a hook around each timing (progress, cancel).

    The hook wraps the subject's own measurer; `Cancelled` stops the search between two timings."""
    from advisor.advice.search import search

    original = subject.measurer
    count = [0]

    def measurer():
        run = original()

        def timed(config):
            if cancelled and cancelled():
                raise Cancelled
            us = run(config)
            count[0] += 1
            if on_timed:
                on_timed(count[0])
            return us

        return timed

    subject.measurer = measurer
    try:
        return search(subject, top_k, confirm, measure=top_k)
    finally:
        del subject.measurer


class Cancelled(Exception):
    """A measurement stopped by the person (escape)."""


def plan_edits(advice, chosen) -> list:
    """The edits that write `chosen` (a candidate of `advice`) where its launch reads its config,
    from `advisor.advice.suggest.plan_apply`; raises AdvisorError when it cannot be written."""
    from advisor.advice.suggest import check_fit, plan_apply

    others = [c for c in advice.ranked if c is not chosen]
    picked = replace(advice, ranked=[chosen, *others])
    check_fit([picked])
    return [e for e in plan_apply([picked], min_speedup=0.0) if e.changed]


def write_edits(edits) -> list[str]:
    from advisor.advice import apply

    done = []
    for edit in edits:
        backup = apply.write(edit)
        done.append(f"wrote {edit.path}" + (f" (backup {backup.name})" if backup else ""))
    return done
