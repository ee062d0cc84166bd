"""Compile a Triton kernel for a target GPU without a GPU, exactly as the JIT would for a launch.

The JIT specialises a launch's arguments (pointers and integers divisible by 16, integers equal to
1, per-parameter `do_not_specialize`) before compiling (ANCHORS section 5); an AOT compile that
skips this builds a different kernel. So this module runs the JIT's own binder on stand-ins for the
launch's arguments (fake tensors with the right dtype and a 16-byte aligned address, the real
integer values), then `triton.compile` for the target. Registers, local memory and SASS come from
the `cuobjdump` and `nvdisasm` that ship inside Triton. Results are cached on disk, keyed by the
kernel's source hash, the specialisation, the options, the arch, the Triton version and the form of
the listing (a listing without encodings, from before the issue floors, is not reused).

Tested with Triton 3.9 (here) and 3.6 (the GPU machines); the binder API is internal to Triton and
is reached through `_binder_and_pack`, the one place to adapt for other versions.

A little over 400 lines: loading a file, binding a launch's arguments and compiling it share the
cache key and the binder; split apart they would each need the other's internals.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import threading
import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ceilings import pysource
from ceilings.compile_limit import note_compiling, refuse_stalled
from ceilings.errors import AdvisorError
from ceilings.launch import Launch

ARCHS = (80, 86, 89, 90, 100)

_ITEMSIZE = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2,
             "int32": 4, "int64": 8, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}


@dataclass(frozen=True)
class CompiledKernel:
    kernel: str
    arch: int
    triton_version: str
    num_warps: int
    num_stages: int
    shared_bytes: int        # dynamic shared memory the launch needs (Triton's metadata.shared)
    registers: int | None    # per thread
    local_bytes: int | None  # local memory per thread: register spills (or local arrays)
    ttir: str
    ttgir: str
    ptx: str
    sass: str
    key: str
    # The cubin the GPU runs: built on a machine with an sm_`arch` GPU, by the Triton and ptxas that build
    # the kernel when it runs there, so its register allocation (spill code) is the real one.
    built_on_target: bool = False

    @property
    def spills(self) -> bool:
        return bool(self.local_bytes)


# ----------------------------------------------------------------------------------------------
# Finding kernels in a file.
# ----------------------------------------------------------------------------------------------
def _wrapper_chain(obj) -> list:
    """`obj` and the objects its @triton.autotune / @triton.heuristics wrappers wrap, outermost first, down to
    the JIT function (or the last object with no `fn`)."""
    from triton.runtime.jit import JITFunction

    chain = [obj]
    for _ in range(8):
        if isinstance(obj, JITFunction) or not hasattr(obj, "fn"):
            break
        obj = obj.fn
        chain.append(obj)
    return chain


def _unwrap(obj):
    """An @triton.autotune / @triton.heuristics wrapper's JIT function, or the object itself."""
    return _wrapper_chain(obj)[-1]


def kernel_heuristics(path: str | os.PathLike, name: str) -> list[dict[str, Callable]]:
    """The value functions of the `@triton.heuristics` decorators over kernel `name` of a file, the outermost
    first (the order Triton runs them in: each sees the values of those outside it). A launch records their
    values for its own config; another config needs them evaluated again (EVEN_K = K % BLOCK_K == 0)."""
    from ceilings.standin import FACTORY_KERNELS

    module = load_module(path)
    objects = {**getattr(module, FACTORY_KERNELS, {}), **vars(module)}

    def chain(obj) -> list[dict[str, Callable]]:
        values = [getattr(wrapper, "values", None) for wrapper in _wrapper_chain(obj)]
        return [v for v in values if isinstance(v, dict) and v and all(callable(f) for f in v.values())]

    named = objects.get(name)
    if not _is_jit(named):
        return []
    own = chain(named)
    if own:
        return [dict(v) for v in own]
    # The kernel bound bare, its heuristics on another name (torchao's HQQ GEMM: `_mixed_mm =
    # triton.heuristics(...)(_mixed_mm_kernel)`, then autotuned): those of the wrappers of the same JIT
    # function, the longest chain (the caller checks them against the launch's recorded values).
    target = _unwrap(named)
    chains = [chain(obj) for key, obj in objects.items() if key != name and _is_jit(obj) and _unwrap(obj) is target]
    return [dict(v) for v in max(chains, key=len, default=[])]


def kernel_def_line(path: str | os.PathLike, kernel: str) -> int | None:
    """1-based line of `def kernel(` in a file; None when it has none or cannot be read."""
    try:
        lines = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    pattern = re.compile(rf"\s*def\s+{re.escape(kernel)}\s*\(")
    return next((i for i, line in enumerate(lines, 1) if pattern.match(line)), None)


def _compile_error_line(exc: Exception, launch: Launch | None = None) -> str:
    """One line for a compile error. Triton's CompilationError reads "at L:C:" (L counted from the kernel's
    `def`), the kernel's source up to the line, a caret, then its message (for a bf16 operand libdevice has
    no function for, only the KeyError's "(triton.language.bfloat16)"): the file's line, the statement it
    points at and the message are what say why."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    caret = next((i for i, line in enumerate(lines) if line.strip() == "^"), None)
    at = re.match(r"at (\d+):(\d+):", lines[0]) if lines else None
    if caret is None or caret == 0 or at is None:
        return f"{exc.__class__.__name__}: {lines[0] if lines else ''}"[:300]
    cause = exc.__cause__ or exc.__context__
    why = " ".join(lines[caret + 1:]) or "no message"
    if cause is not None and type(cause).__name__ not in why:
        why = f"{type(cause).__name__} {why}"
    start = kernel_def_line(launch.source, launch.kernel) if launch is not None else None
    where = (f"{Path(launch.source).name}:{start + int(at.group(1)) - 1}" if start is not None
             else f"line {at.group(1)} of the kernel")
    return f"{exc.__class__.__name__} at {where}, `{lines[caret - 1].strip()}`: {why}"[:300]


def _is_jit(obj) -> bool:
    from triton.runtime.jit import JITFunction

    return isinstance(_unwrap(obj), JITFunction)


def load_module(path: str | os.PathLike, gpu: str | None = None, source: str | None = None):
    """A kernel file as a module, opened the same way on every machine: its top-level statements run
    one at a time with a stand-in GPU driver and tensors without data (`ceilings.standin`), so a file
    that asks the GPU things at import time, or checks itself by launching its kernels, opens here too.
    Statements that fail are skipped and listed in `module.__advisor_skipped__`. The driver answers
    for `gpu` (default the H100); a file opened for another GPU is another module, since its
    top-level code may size things from the device's answers. `source`: the file's text as edited (the host code
    with another config written in, `advisor.capture.call.relauncher`), run in the file's place as another module."""
    from ceilings import standin

    path = Path(path)
    if not path.is_file():
        raise AdvisorError(f"kernel file {path} does not exist; give the path of a Python file with Triton kernels")
    edited = source is not None
    try:
        source = source if edited else path.read_text()
        compile(source, str(path), "exec")
    except SyntaxError as exc:
        raise AdvisorError(f"{path}:{exc.lineno}: syntax error ({exc.msg}); fix the file first") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AdvisorError(f"kernel file {path} cannot be read ({exc.__class__.__name__})") from None
    spec = standin.gpu_spec(gpu)
    key = str(path.resolve()) + ("" if spec == standin.gpu_spec(None) else f"@{spec.name}")
    if edited:
        key += "#" + hashlib.sha1(source.encode()).hexdigest()
    name = "_advisor_kernel_" + hashlib.sha1(key.encode()).hexdigest()[:12]
    # One load at a time: it swaps sys.stdout and os.environ for the whole process, and two threads whose
    # swaps interleave leave sys.stdout on one's StringIO for good (a check's log lost every line after
    # its threads first opened kernel files at once); the lock also keeps one file from being run twice.
    with _LOADING:
        return _load_locked(path, source, spec, name, standin)


_LOADING = threading.RLock()


@contextlib.contextmanager
def running_file_code():
    """For running a kernel file's host code as `load_module` runs its top level (`advisor record --call`):
    under the same lock (the swap of os.environ and sys.stdout is process-wide), with TRITON_INTERPRET=0 so
    that kernels it decorates are JIT functions whose launches a capture sees, not the CPU interpreter's."""
    with _LOADING, _env(TRITON_INTERPRET="0"):
        yield


def _load_locked(path: Path, source: str, spec, name: str, standin) -> Any:
    if name in sys.modules:
        return sys.modules[name]
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, path))
    sys.modules[name] = module
    # Compile needs the real JIT functions, also in a process that runs kernels interpreted.
    folders = [str(path.resolve().parent)]  # `import helpers` beside the file works as under `python file.py`
    package = _package_of(path)
    if package:  # a file inside a package: `from .utils import x` resolves as when the package imports it
        module.__package__ = package[0]
        folders.append(str(package[1]))
    added = [f for f in folders if f not in sys.path]
    sys.path[:0] = added
    try:
        with contextlib.redirect_stdout(io.StringIO()), _env(TRITON_INTERPRET="0"), warnings.catch_warnings():
            warnings.simplefilter("ignore", ImportWarning)  # __package__ set beside a spec without a parent
            module.__advisor_skipped__ = standin.execute(source, str(path), vars(module), spec)
    except (Exception, SystemExit) as exc:  # a file that calls sys.exit() at import is a broken kernel file too
        del sys.modules[name]
        raise AdvisorError(f"opening {path} failed: {exc.__class__.__name__}: {exc}".splitlines()[0]) from None
    finally:
        for f in added:
            if f in sys.path:
                sys.path.remove(f)
    return module


def _package_of(path: Path) -> tuple[str, Path] | None:
    """(dotted name of the package a file sits in, the folder that holds its top package), from the
    folders with an `__init__.py` above the file; None for a file outside any package."""
    parts: list[str] = []
    folder = path.resolve().parent
    while (folder / "__init__.py").is_file() and folder.name.isidentifier():
        parts.insert(0, folder.name)
        folder = folder.parent
    return (".".join(parts), folder) if parts else None


def skipped_note(module) -> str:
    """Why a kernel may be missing: the first top-level statement that failed, if any."""
    skipped = getattr(module, "__advisor_skipped__", [])
    if not skipped:
        return ""
    line, error = skipped[0]
    more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
    missing = re.search(r"No module named '([\w.]+)'", error)
    # a library's own dependency that this environment lacks: what the user can do about it
    fix = f" (install {missing.group(1).split('.')[0]} where the advisor runs)" if missing else ""
    return f"; line {line} of the file failed here and was skipped: {error}{more}{fix}"


def find_kernels(module) -> dict[str, object]:
    """Triton kernels defined at the top level of a module, then those a top-level factory function
    defines (`standin.execute`, FACTORY_KERNELS) under names the top level does not use, by name
    (autotune wrappers unwrapped).

    JIT functions that return a value are device functions other kernels call (a fused activation,
    an attention inner loop), not kernels one launches: they are left out."""
    found = {name: _unwrap(obj) for name, obj in vars(module).items() if _is_jit(obj)}
    from ceilings.standin import FACTORY_KERNELS

    for name, obj in getattr(module, FACTORY_KERNELS, {}).items():
        if name not in found and _is_jit(obj):
            found[name] = _unwrap(obj)
    return {name: fn for name, fn in found.items() if not _returns_value(fn)}


def _returns_value(fn) -> bool:
    import ast

    try:
        tree = pysource.parse(textwrap.dedent(fn.src))
    except (SyntaxError, AttributeError, TypeError):
        return False
    return any(isinstance(node, ast.Return) and node.value is not None for node in ast.walk(tree))


def load_kernel(path: str | os.PathLike, name: str | None = None):
    module = load_module(path)
    kernels = find_kernels(module)
    if not kernels:
        raise AdvisorError(f"{path} defines no Triton kernel (no @triton.jit function at top level or in a "
                           "function that defines kernels)" + skipped_note(module))
    if name is None:
        if len(kernels) > 1:
            raise AdvisorError(f"{path} defines several Triton kernels ({', '.join(kernels)}); pick one with --kernel")
        return next(iter(kernels.values()))
    if name not in kernels:
        raise AdvisorError(f"{path} has no Triton kernel {name!r}; it defines {', '.join(kernels)}"
                           + skipped_note(module))
    return kernels[name]


# ----------------------------------------------------------------------------------------------
# Stand-ins for a launch's arguments, and the JIT's binder.
# ----------------------------------------------------------------------------------------------
class _FakeDtype:
    """Enough of a torch dtype for Triton's binder: its name (`torch.bfloat16`) and size."""

    def __init__(self, name: str):
        if name not in _ITEMSIZE:
            raise AdvisorError(f"tensor dtype {name!r} is not supported; use one of {', '.join(_ITEMSIZE)}")
        self.name = name
        self.itemsize = _ITEMSIZE[name]
        self.is_floating_point = name.startswith(("float", "bfloat"))

    def __str__(self) -> str:
        return f"torch.{self.name}"


# One dtype object per name, alive for the whole process: Triton's native specialiser caches what it
# learns about a dtype object by its identity, so a freed object whose address is reused by another
# dtype would be taken for the old one (seen as pointers typed *i32 instead of *bf16).
_FAKE_DTYPES: dict[str, _FakeDtype] = {}


def _fake_dtype(name: str) -> _FakeDtype:
    if name not in _FAKE_DTYPES:
        _FAKE_DTYPES[name] = _FakeDtype(name)
    return _FAKE_DTYPES[name]


class _FakeTensor:
    """A tensor the binder sees as 16-byte aligned (what the caching allocator returns)."""

    def __init__(self, dtype: str, shape=(1,)):
        self.dtype = _fake_dtype(dtype)
        self.shape = tuple(shape)

    @staticmethod
    def data_ptr() -> int:
        return 0


def _constexpr_value(value):
    """JSON-friendly constexpr values back to Triton objects: dtype names become `tl` dtypes."""
    import triton.language as tl

    if isinstance(value, str):
        dtype = getattr(tl, value, None)
        if isinstance(dtype, tl.dtype):
            return dtype
    return value


def launch_arguments(fn, launch: Launch, tensors: Mapping[str, Any] | None = None) -> tuple[list, dict]:
    """Positional arguments and keyword constexprs for `fn`, from the launch: stand-in tensors for
    compiling, or the given real `tensors` (by argument name) for running it. Runtime arguments after
    the first constexpr parameter go by name too: passed by position, a runtime parameter declared
    after a constexpr would take the constexpr's slot ("got multiple values for argument")."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    real = tensors
    tensors = {t.name: t for t in launch.tensors}
    scalars = dict(launch.scalars)
    constexprs = {**dict(launch.constexprs), **launch.config.params}
    args, kwargs = [], {}
    by_name = False
    for param in fn.params:
        name = param.name
        if param.is_constexpr:
            by_name = True
            if name in constexprs:
                kwargs[name] = _constexpr_value(constexprs[name])
            elif not param.has_default:
                raise AdvisorError(f"launch of {launch.kernel} gives no value for constexpr {name}")
            continue
        put = (lambda v, name=name: kwargs.__setitem__(name, v)) if by_name else args.append
        if real is not None and name in real:
            put(real[name])
        elif name in tensors:
            t = tensors[name]
            base = _FakeTensor(t.dtype, t.shape)
            block = getattr(t, "block_shape", None)
            put(TensorDescriptor(base, list(t.shape), list(t.stride), list(block)) if block else base)
        elif name in scalars:
            put(scalars[name])
        elif param.has_default:
            put(param.default)
        else:
            raise AdvisorError(f"launch of {launch.kernel} gives no value for argument {name}; add it to the "
                               "launch's tensors or scalars")
    unknown = set(constexprs) - {p.name for p in fn.params if p.is_constexpr}
    if unknown:
        raise AdvisorError(f"launch of {launch.kernel} sets {', '.join(sorted(unknown))}, which are not constexpr "
                           f"parameters of the kernel")
    return args, kwargs


def _binder_and_pack(fn, backend, args, kwargs):
    from triton.runtime.jit import create_function_from_signature

    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    return fn._pack_args(backend, kwargs, bound, specialization, options)


# ----------------------------------------------------------------------------------------------
# Compile, with a disk cache.
# ----------------------------------------------------------------------------------------------
def cache_dir() -> Path:
    base = os.environ.get("TRITON_ADVISOR_HOME") or Path.home() / ".cache" / "triton-advisor"
    return Path(base) / "compile"


def _tool(name: str) -> str:
    import triton

    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    if not path.exists():
        raise AdvisorError(f"{name} is not bundled with this Triton ({path}); install a Triton with the NVIDIA "
                           "backend")
    return str(path)


def _resource_usage(cubin: bytes) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([_tool("cuobjdump"), "--dump-resource-usage", f.name], capture_output=True,
                             text=True, check=True).stdout
        # -gi: each instruction's source line, for ceilings.sass_map; -hex: the encodings, whose control
        # bits carry the stall counts (ceilings.sass.stall_count) of the issue floors (ceilings.issue).
        sass = subprocess.run([_tool("nvdisasm"), "-c", "-gi", "-hex", f.name], capture_output=True, text=True,
                              check=True).stdout
    usage = {key.lower(): int(value) for key, value in re.findall(r"\b(REG|STACK|SHARED|LOCAL):(\d+)", out)}
    return {"registers": usage.get("reg"), "local_bytes": usage.get("local", 0) + usage.get("stack", 0),
            "sass": sass}


def compile_launch(launch: Launch, arch: int = 90, use_cache: bool = True, fn=None,
                   cached_only: bool = False) -> CompiledKernel | None:
    """Compile the launch's kernel for sm_`arch` with the launch's specialisation; no GPU needed.
    `cached_only`: the cached result, or None instead of compiling (to plan parallel compiles)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend

    if arch not in ARCHS:
        raise AdvisorError(f"arch sm_{arch} is not supported; use one of {', '.join(f'sm_{a}' for a in ARCHS)}")
    fn = fn or load_kernel(launch.source, launch.kernel)
    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    args, kwargs = launch_arguments(fn, launch)
    kwargs.update(num_warps=launch.config.num_warps, num_stages=launch.config.num_stages)
    # The binder's first use imports Triton's gluon package, which checks that the process interprets when
    # Triton's library was built so: bind with the variable as it was then.
    try:
        with _quiet_knob_warnings(), interpret_as_imported():
            options, signature, constexprs, attrs = _binder_and_pack(fn, backend, args, kwargs)
    except (TypeError, ValueError, KeyError) as exc:  # Triton's binder refusing an argument of the launch
        raise AdvisorError(f"{launch.kernel}: the launch's arguments do not bind to the kernel's parameters "
                           f"({exc.__class__.__name__}: {' '.join(str(exc).split())[:200]}); fix the launch") from None
    key_text = json.dumps([fn.cache_key, signature, sorted((str(k), str(v)) for k, v in constexprs.items()),
                           sorted((str(k), str(v)) for k, v in attrs.items()), sorted(options.__dict__.items(),
                                                                                      key=lambda kv: kv[0]),
                           arch, triton.__version__, "sass-line-info-hex"], default=str)
    key = hashlib.sha256(key_text.encode()).hexdigest()[:32]
    path = cache_dir() / f"{key}.json"
    if use_cache and path.exists():
        try:
            return CompiledKernel(**{**json.loads(path.read_text()), "built_on_target": gpu_here(arch)})
        except (json.JSONDecodeError, TypeError):
            path.unlink(missing_ok=True)
    if use_cache:
        refuse_stalled(launch, arch, key)
    if cached_only:
        return None
    if _interpreting():
        return _compile_in_child(launch, arch, use_cache)
    note_compiling(launch, arch, key)
    try:
        # Triton prints a failed ptxas run's report to stdout (its "Internal Triton PTX codegen error" block),
        # which would land in the middle of `--format json`; the error it raises says the same, and is reported.
        with _quiet_knob_warnings(), contextlib.redirect_stdout(io.StringIO()):
            compiled = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target,
                                      options=options.__dict__)
    except Exception as exc:
        raise AdvisorError(f"{launch.kernel} does not compile for sm_{arch} with {launch.config.label()}: "
                           f"{_compile_error_line(exc, launch)}") from None
    finally:
        note_compiling(None, arch, key)
    usage = _resource_usage(compiled.asm["cubin"])
    result = CompiledKernel(kernel=launch.kernel, arch=arch, triton_version=triton.__version__,
                            num_warps=launch.config.num_warps, num_stages=launch.config.num_stages,
                            shared_bytes=int(compiled.metadata.shared), registers=usage["registers"],
                            local_bytes=usage["local_bytes"], ttir=compiled.asm.get("ttir", ""),
                            ttgir=compiled.asm.get("ttgir", ""), ptx=compiled.asm.get("ptx", ""),
                            sass=usage["sass"], key=key, built_on_target=gpu_here(arch))
    if use_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(result), f)
        os.replace(tmp, path)
    return result


@functools.cache
def gpu_here(arch: int) -> bool:
    """Whether this machine has an sm_`arch` GPU (then what it compiles is what runs there). Asked of
    nvidia-smi, not torch: a compile worker must not open a CUDA context (GPU memory, seconds) to know it."""
    if not any(Path("/dev").glob("nvidia[0-9]*")):  # no NVIDIA device: no need to ask
        return False
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):  # no driver tools: compiled as for another machine's GPU
        return False
    wanted = f"{arch // 10}.{arch % 10}"
    return done.returncode == 0 and wanted in {line.strip() for line in done.stdout.splitlines()}


def _interpreting() -> bool:
    """Whether this process cannot compile in place: TRITON_INTERPRET is set, or was when Triton was imported."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") or _set_up_to_interpret()


def interpret_as_imported():
    """TRITON_INTERPRET set as it was when Triton's library was built, for the time of a `with`: the first use of
    Triton's binder or interpreter imports its gluon package, which checks that the process interprets when the
    library was built so (a `--call` turns the variable off while host code decorates kernels)."""
    return _env(TRITON_INTERPRET="1") if _set_up_to_interpret() else contextlib.nullcontext()


def _set_up_to_interpret() -> bool:
    """Whether Triton was imported for the CPU interpreter: its own library functions (tl.cdiv and the like)
    were then built as interpreted ones, whatever TRITON_INTERPRET says now (a `--call` turns it off while it
    runs host code that decorates kernels, advisor.capture.call)."""
    import triton.language.standard as standard
    from triton.runtime.jit import JITFunction

    return not isinstance(standard.cdiv, JITFunction)


def _compile_in_child(launch: Launch, arch: int, use_cache: bool) -> CompiledKernel:
    """Compile in a child process without the CPU interpreter (`ceilings.compile_child`: one for the process)."""
    from ceilings.compile_child import compile_in_child

    return compile_in_child(launch, arch, use_cache)


@contextlib.contextmanager
def _env(**values: str):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _quiet_knob_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION.*")
        yield
