"""`--call "matmul(randn(4096, 4096, f16), randn(4096, 4096, f16))"`: the launches of one call of a
kernel file's own host code, captured without a GPU as a launch trace.

The call is one Python expression evaluated against the file's top-level names (opened with
`ceilings.compile.load_module`) plus these helpers, which shadow the file's names of the same
spelling inside the expression only:

* tensors without data: `randn`, `rand`, `zeros`, `ones`, `empty`, each taking sizes and an optional
  dtype (`randn(8, 4096, bf16)`, `zeros((8, 4096), dtype=f32)`); they are torch `meta` tensors;
* a tensor with data: `randint(high, sizes..., dtype)`, integers in [0, high) drawn from a fixed seed
  (`randint(128, 4096, 8, i32)`: routing ids for 128 experts), or as torch writes it, `randint(low, high,
  (sizes), dtype)` in [low, high), a CPU tensor; `torch` itself makes
  others (`torch.arange(8, dtype=i32)`). Launches whose tensors all hold data run in Triton's
  interpreter (`advisor.capture.nogpu`), so what they compute reaches the launches after them;
* dtypes: `f16`, `bf16`, `f32`, `f64`, `f8` (float8_e4m3fn), `f8e5` (float8_e5m2), `i8`, `i16`,
  `i32`, `i64`, `u8`, `bool_`.

The host code runs with the capture of `advisor.capture.nogpu` (nothing compiled or run, except a
`kernel.warmup` the host code reads registers from); what it prints goes to stderr, so the
advisor's own output stays clean. Every way the call can fail is one AdvisorError line: a name the
file does not define, arguments that do not fit the function or a kernel, host code that needs
tensor values (`.item()`, `.tolist()`, `if x.any()`), or any other error, with the file and line
where it happened.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import os
import sys
import traceback
from pathlib import Path

from advisor.capture.nogpu import KernelArgumentError, NoGPUCapture, NoGPURecorder
from advisor.capture.record import trace_of_capture
from advisor.capture.trace import Trace
from ceilings import pysource
from ceilings.errors import AdvisorError

_WHERE = "<--call>"
_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "f8": "float8_e4m3fn",
           "f8e5": "float8_e5m2", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
           "bool_": "bool"}
_FACTORIES = ("randn", "rand", "zeros", "ones", "empty")


def helpers() -> dict:
    """The names a call may use besides the file's own."""
    import torch

    names: dict = {"torch": torch}
    names.update((short, getattr(torch, long)) for short, long in _DTYPES.items())
    for name in _FACTORIES:
        names[name] = _factory(name)
    names["randint"] = _randint
    return names


def _randint(*args, dtype=None):
    """Integers from a fixed seed, a CPU tensor with data: `randint(high, sizes..., dtype)` in [0, high), or as
    torch spells it, `randint(high, (sizes), dtype)` and `randint(low, high, (sizes), dtype)` in [low, high)."""
    import torch

    usage = ("give the bound and the sizes, and optionally a dtype: randint(128, 4096, 8, i32) for [0, 128), or "
             "as torch: randint(-128, 128, (4096, 8), i8) for [-128, 128)")
    shown = f"randint({', '.join(map(_shown, args))})"
    values = list(args)
    if values and isinstance(values[-1], torch.dtype):
        if dtype is not None:
            raise AdvisorError(f"{shown} got two dtypes; {usage}")
        dtype = values.pop()
    sized = [i for i, v in enumerate(values) if isinstance(v, tuple | list)]
    if sized:  # torch's form: the bounds, then one sequence of sizes
        if sized != [len(values) - 1]:
            raise AdvisorError(f"{shown}: {usage}")
        bounds, sizes = values[:-1], tuple(values[-1])
    else:
        bounds, sizes = values[:1], tuple(values[1:])
    if not 1 <= len(bounds) <= 2 or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
        raise AdvisorError(f"{shown}: {usage}")
    low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
    if high <= low or not sizes:
        raise AdvisorError(f"{shown}: the bounds need low < high and the sizes at least one size; {usage}")
    shape = _factory("randint")(*sizes, dtype=dtype).shape
    return torch.randint(low, high, tuple(shape), dtype=dtype or torch.int64,
                         generator=torch.Generator().manual_seed(0))


def _shown(value) -> str:
    """A call argument as the user wrote it (`i8`, not `torch.int8`)."""
    import torch

    names = {getattr(torch, long): short for short, long in _DTYPES.items()}
    return names.get(value, repr(value))


def _factory(name: str):
    import torch

    def make(*sizes, dtype=None, device=None, requires_grad=False):
        dims = list(sizes)
        if dims and isinstance(dims[-1], torch.dtype):
            if dtype is not None:
                raise AdvisorError(f"{name}(...) got two dtypes; give one, e.g. {name}(4096, 4096, f16)")
            dtype = dims.pop()
        if len(dims) == 1 and isinstance(dims[0], tuple | list):
            dims = list(dims[0])
        if not dims or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
            raise AdvisorError(f"{name}({', '.join(map(repr, sizes))}): give sizes as non-negative integers and "
                               f"optionally a dtype, e.g. {name}(4096, 4096, f16)")
        if dtype is not None and not isinstance(dtype, torch.dtype):
            raise AdvisorError(f"{name}(...): dtype {dtype!r} is not a dtype; use one of {', '.join(_DTYPES)}")
        return torch.empty(dims, dtype=dtype or torch.float32, device="meta")

    make.__name__ = name
    return make


def parse_call(call: str) -> ast.Expression:
    try:
        tree = pysource.parse(call.strip(), _WHERE, mode="eval")
    except SyntaxError as exc:
        raise AdvisorError(f"--call {call!r} is not a Python expression ({exc.msg}); write a call such as "
                           "\"matmul(randn(4096, 4096, f16), randn(4096, 4096, f16))\"") from None
    if not isinstance(tree.body, ast.Call):
        raise AdvisorError(f"--call {call!r} is not a call; write the host function and its arguments, such as "
                           "\"matmul(randn(4096, 4096, f16), randn(4096, 4096, f16))\"")
    return tree


def host_functions(module) -> list[str]:
    """The file's own top-level functions a call can name (its kernels and classes aside)."""
    from ceilings.compile import _is_jit

    return [name for name, obj in vars(module).items()
            if callable(obj) and not name.startswith("__") and not _is_jit(obj)
            and getattr(obj, "__module__", None) == module.__name__ and not isinstance(obj, type)]


def _check_names(tree: ast.Expression, namespace: dict, module, call: str, path: Path) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in namespace and not hasattr(builtins, node.id):
            from ceilings.compile import skipped_note

            defined = ", ".join(host_functions(module)) or "no host functions"
            raise AdvisorError(f"--call {call!r}: {node.id} is not defined in {path.name} (it defines {defined}; "
                               f"tensors: {', '.join(_FACTORIES)}; with data: randint; dtypes: {', '.join(_DTYPES)})"
                               + skipped_note(module))


def _failure_site(exc: BaseException, path: Path) -> tuple[str, bool]:
    """Where the call failed ('file.py:LINE'), preferring the kernel file's deepest frame, and whether
    it failed in the call expression itself (arguments that do not fit the called function)."""
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if os.path.abspath(f.filename) == str(path)]
    frame = (mine or frames or [None])[-1]
    at_call = bool(frames) and frames[-1].filename == _WHERE
    return (f"{Path(frame.filename).name}:{frame.lineno}" if frame else "?"), at_call


def capture_call_with_data(path: str | os.PathLike, call: str, gpu: str | None = None,
                           written=None) -> tuple[Trace, bool]:
    """`capture_call` with integer tensors the host asks for on the GPU made with data
    (advisor.capture.integer_data), where that capture runs and makes the same launches (kernels, grids, configs,
    tensors' shapes and dtypes) as the capture without it; else the capture without it. With whether data was
    used, for the re-runs per config to use the same (`relauncher`'s `integer_data`). A host that cannot run without
    data in the tensors it draws (a bincount of ids it drew with `randint` on the GPU: a LoRA kernel's buckets of
    tokens per adapter) is captured with the data, or fails as the capture without it does."""
    try:
        plain = capture_call(path, call, gpu, written=written)
    except AdvisorError as without_data:
        try:
            return capture_call(path, call, gpu, written=written, integer_data=True), True
        except AdvisorError:
            raise without_data from None
    try:
        with_data = capture_call(path, call, gpu, written=written, integer_data=True)
    except AdvisorError:
        return plain, False
    return (with_data, True) if _same_launches(plain, with_data) else (plain, False)


def launch_form(launch) -> tuple:
    """A launch's kernel and its tensors' names, shapes, dtypes and strides: what two captures of one call share
    whatever the tensors' contents."""
    return launch.kernel, tuple((t.name, t.shape, t.dtype, t.stride) for t in launch.tensors)


def _same_launches(a: Trace, b: Trace) -> bool:
    def shape(trace):
        return [(launch_form(x), x.grid, x.config) for x in trace.launches]
    return shape(a) == shape(b)


def capture_call(path: str | os.PathLike, call: str, gpu: str | None = None,
                 override: tuple[str, dict] | None = None, written=None, source: str | None = None,
                 integer_data: bool = False) -> Trace:
    """The trace of the launches `call` makes, evaluated against the kernel file at `path`. `override`:
    (kernel, meta-parameters and num_warps/num_stages) its launches take instead of the host code's.
    `written`: which arguments a kernel may store into (`advisor.advice.stores.stored_outputs`), so that a
    launch not run forgets only those tensors' contents (`advisor.capture.nogpu`). `source`: the file's text edited
    (`relauncher`), run in its place. `integer_data`: integer tensors the host asks for on the GPU are made with data
    (advisor.capture.integer_data)."""
    from ceilings import standin
    from ceilings.compile import load_module, running_file_code

    path = Path(path).resolve()
    tree = parse_call(call)
    spec = standin.gpu_spec(gpu)
    module = load_module(path, spec.name, source)
    namespace = {**vars(module), **helpers()}
    _check_names(tree, namespace, module, call, path)
    rec = NoGPURecorder("", spec.name)
    code = compile(tree, _WHERE, "eval")
    try:
        # Kernels the call decorates (a factory building one on first use) must be JIT functions whose launches
        # the capture sees, not the CPU interpreter's, which would run them on tensors without data.
        capture = NoGPUCapture(rec, spec, override, written, integer_data)
        with running_file_code(), contextlib.redirect_stdout(sys.stderr), capture.active():
            eval(code, namespace)
    except AdvisorError as exc:
        raise AdvisorError(f"--call {call!r}: {exc}") from None
    except standin.NeedsData as exc:
        where, _ = _failure_site(exc, path)
        raise AdvisorError(f"--call {call!r}: {exc.what} at {where} needs tensor values, which a capture without "
                           "a GPU does not have (its tensors hold no data); call a function that only prepares "
                           "and launches kernels, or record on a GPU with `advisor record`") from None
    except KernelArgumentError as exc:
        where, _ = _failure_site(exc, path)
        raise AdvisorError(f"--call {call!r}: {exc} (at {where})") from None
    except Exception as exc:
        where, at_call = _failure_site(exc, path)
        first = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
        if at_call and isinstance(exc, TypeError):
            raise AdvisorError(f"--call {call!r}: wrong arguments ({exc})") from None
        from ceilings.compile import skipped_note

        # a name the file's top level would have defined, had its statement not failed here (an import of a
        # dependency this environment lacks): that statement is the cause to report
        cause = skipped_note(module) if isinstance(exc, NameError) else ""
        raise AdvisorError(f"--call {call!r} failed at {where}: {first}{cause}") from None
    data = rec.data()
    if not data["launches"]:
        raise AdvisorError(f"--call {call!r} launched no Triton kernel; call the host function that launches "
                           f"one (in {path.name}: {', '.join(host_functions(module)) or 'none'})")
    return trace_of_capture(data, path.parent, [str(path), "--call", call], Path(os.devnull)).trace


def relauncher(path: str | os.PathLike, call: str, gpu: str | None, kernel: str, occurrence: int, written=None,
               edited=None, integer_data: bool = False):
    """config -> the launch the call makes of `kernel` (its `occurrence`-th launch) when that kernel is
    launched with the config: the host code re-run per config, so grids and arguments that follow the
    meta-parameters follow them. None where the re-run fails or launches it otherwise.

    `edited`: config -> the file's text with the config written into its host code (as `advisor apply` writes it:
    literals at the launch, or a name the launching function binds once, `BLOCK_H = 8; grid = (n, cdiv(heads,
    BLOCK_H))`), raising AdvisorError where it is not written so. The re-run is then of that text, so a grid and
    sizes the host computes from its own bindings follow the config as they would once applied. Else, and where
    the edited text does not run, the kernel's meta-parameters are overridden at its launch. `integer_data`: as the
    launch's own capture was made (`capture_call_with_data`), so each config's launch carries the same contents."""
    # config -> the edited re-run's trace, None where there is none: a caller asking `edited_only` first and then
    # for any re-run (`LaunchSubject._host_launch`) does not edit and run the file twice.
    from_edit: dict = {}

    def launch_of(config, edited_only: bool = False):
        """`edited_only`: None unless the host code could be re-run with the config written in."""
        meta = (kernel, {**config.params, "num_warps": config.num_warps, "num_stages": config.num_stages})
        if edited is not None and config not in from_edit:
            try:
                from_edit[config] = capture_call(path, call, gpu, meta, written, source=edited(config),
                                                 integer_data=integer_data)
            except (AdvisorError, UnicodeDecodeError):
                from_edit[config] = None
        trace = from_edit.get(config)
        if trace is None and edited_only:
            return None
        if trace is None:
            try:
                trace = capture_call(path, call, gpu, meta, written, integer_data=integer_data)
            except AdvisorError:
                return None
        mine = [launch for launch in trace.launches if launch.kernel == kernel]
        return mine[occurrence] if occurrence < len(mine) and mine[occurrence].config == config else None
    return launch_of


def record_call(path: str | os.PathLike, call: str, out: str | os.PathLike, gpu: str | None = None,
                written=None) -> str:
    """`advisor record --call EXPR FILE`: write the call's trace to `out`; the one-line summary."""
    from advisor.capture.record import RecordResult
    from advisor.capture.trace import write_trace

    if not Path(path).is_file():
        raise AdvisorError(f"advisor record --call: kernel file {path} does not exist; give the file whose host "
                           "function the call names")
    trace, _ = capture_call_with_data(path, call, gpu, written=written)
    write_trace(out, trace)
    return RecordResult(trace, 0, Path(out)).summary
