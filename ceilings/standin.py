"""Open a kernel file on any machine: a stand-in for Triton's CUDA driver and tensors without data.

Kernel files as people write them ask the GPU things at import time
(`DEVICE = triton.runtime.driver.active.get_active_torch_device()`, the device's SM count and
shared memory for an occupancy rule, `torch.cuda.get_device_capability()`), and many check
themselves at the top level (launch a kernel, compare with torch, run a benchmark). On a machine
without a GPU, Triton finds no active driver and the import fails on the first of these. Compiling
a kernel needs none of it: the advisor compiles ahead of time for a target it names.

So a kernel file is executed in a stand-in environment, one top-level statement at a time:

* `triton.runtime.driver.active` is a `StandInDriver` that answers device and target queries for a
  chosen GPU (the H100, sm_90, unless told otherwise) from `ceilings.hardware`; its torch device is
  `cuda:0`, and tensors made on it are made on the `meta` device, so they hold no data.
* A torch function mode sends tensors asked for on a CUDA device (`device="cuda"`, `.cuda()`,
  `.to("cuda")`) to the `meta` device, reports meta tensors as CUDA tensors (`x.is_cuda`, `x.device`), and
  turns an operation that needs tensor values (`.item()`, `.tolist()`, `if x.any()`) into
  `NeedsData`. A few `torch.cuda` queries (`get_device_capability`, `get_device_name`,
  `get_device_properties`, `current_device`, `device(...)`, `synchronize`, `is_available`) answer for the
  same GPU, and so does torch's `torch.utils._triton.has_triton()`, which libraries guard their kernel
  definitions with.
* `nvidia-smi` run through `subprocess.run` (or `check_output`) by the file's code, or by threads it
  starts, answers for the same GPU with exit code 0 (libraries such as FlagGems find their vendor by
  running the vendors' tools at import: on a machine without a GPU the import failed); other threads
  of the process, which were running before the file was opened, still run the real tool.
* While the file is opened, kernel launches and autotuning raise `NotRunHere` (nothing is compiled
  or run); `advisor.capture.nogpu` replaces that with the capture of each launch.
* A statement that fails (a self-check that compares results, a benchmark, a missing optional
  package) is skipped and remembered in `module.__advisor_skipped__` as (line, error); the
  statements after it still run, so the `@triton.jit` functions, their helpers, constexpr globals
  and autotune lists built by functions are all defined as in a real import.

This runs the file's top-level code, as importing it does (the README says so). torch is optional:
without it, only the driver is replaced.
"""

from __future__ import annotations

import ast
import contextlib
import threading
from types import SimpleNamespace

from ceilings import pysource

DEFAULT_GPU = "h100"
_LOCK = threading.RLock()


class NotRunHere(RuntimeError):
    """A kernel launch or benchmark reached while a kernel file is read without a GPU."""


class NeedsData(RuntimeError):
    """Host code asked for tensor values, which the tensors of a stand-in run do not hold."""

    def __init__(self, what: str):
        super().__init__(f"{what} needs tensor values; the tensors here hold no data")
        self.what = what


class _StandInUtils:
    def __init__(self, spec):
        self.spec = spec

    def get_device_properties(self, device=None) -> dict:
        """The keys Triton's CUDA driver returns (triton/backends/nvidia/driver.c)."""
        s = self.spec
        return {"max_shared_mem": s.smem_per_block, "max_num_regs": s.registers_per_sm,
                "multiprocessor_count": s.sms, "warpSize": 32, "sm_clock_rate": int(s.boost_clock_ghz * 1e6),
                "mem_clock_rate": 0, "mem_bus_width": 0}


class StandInDriver:
    """Duck-types Triton's `DriverBase` for device and target queries; runs nothing."""

    def __init__(self, spec):
        self.spec = spec
        self.utils = _StandInUtils(spec)
        self.launcher_cls = None

    @staticmethod
    def is_active() -> bool:
        return False

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", self.spec.arch, 32)

    def get_active_torch_device(self):
        import torch

        # cuda, as on the GPU: tensors asked for on it are made on the meta device (`_meta_mode`), and a tensor
        # standing for a CUDA one reports this device (`x.device == DEVICE`, Triton's tutorials assert it)
        return torch.device("cuda", 0)

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device) -> None:
        return None

    def get_current_stream(self, device=None) -> int:
        return 0

    def get_device_capability(self, device=None) -> tuple[int, int]:
        return divmod(self.spec.arch, 10)

    def get_device_interface(self):
        import torch

        return torch.cuda

    def map_python_to_cpp_type(self, ty: str) -> str:
        from triton.backends.nvidia.driver import ty_to_cpp

        return ty_to_cpp(ty)

    def get_benchmarker(self):
        def benchmark(*args, **kwargs):
            raise NotRunHere("timing a kernel needs a GPU; the stand-in driver runs nothing")
        return benchmark

    def get_empty_cache_for_benchmark(self):
        raise NotRunHere("timing a kernel needs a GPU; the stand-in driver runs nothing")


def gpu_spec(gpu=None):
    """A GPU name (or spec) resolved once into its spec; the stand-in's default is the H100."""
    from ceilings.hardware import get_spec

    if gpu is None or isinstance(gpu, str):
        return get_spec(gpu or DEFAULT_GPU)
    return gpu


# ----------------------------------------------------------------------------------------------
# torch: CUDA devices become the meta device.
# ----------------------------------------------------------------------------------------------
_DATA_METHODS = ("item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__", "__array__")


def _is_gpu_device(device) -> bool:
    import torch

    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, str):
        return device.split(":")[0] == "cuda"
    return isinstance(device, int) and not isinstance(device, bool)


def _meta_mode():
    import torch
    from torch.overrides import TorchFunctionMode

    data_methods = {getattr(torch.Tensor, name) for name in _DATA_METHODS if hasattr(torch.Tensor, name)}
    is_cuda_getter = torch.Tensor.is_cuda.__get__
    # `x.device` of a tensor standing for a CUDA one says cuda, as on the GPU: libraries check it before they
    # launch (DeepSpeed's RMS norm: `if tensor.device.type != "cuda": raise`); a device it is given back as
    # (`torch.empty(n, device=x.device)`) is turned into meta below, as any CUDA device is.
    device_getter = torch.Tensor.device.__get__
    cuda0 = torch.device("cuda", 0)

    class MetaDevice(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in data_methods and any(getattr(a, "is_meta", False) for a in args):
                raise NeedsData(f".{func.__name__}()")
            if func == is_cuda_getter and args and getattr(args[0], "is_meta", False):
                return True
            if func == device_getter and args and getattr(args[0], "is_meta", False):
                return cuda0
            if "device" in kwargs and _is_gpu_device(kwargs["device"]):
                kwargs["device"] = "meta"
            if func is torch.Tensor.cuda:
                return args[0].to("meta")
            if func is torch.Tensor.to:
                args = tuple("meta" if i and _is_gpu_device(a) and not isinstance(a, int) else a
                             for i, a in enumerate(args))
            try:
                return func(*args, **kwargs)
            except (NotImplementedError, RuntimeError) as exc:
                if "meta" in str(exc) and not isinstance(exc, (NotRunHere, NeedsData)):
                    name = getattr(func, "__name__", str(func))
                    raise NeedsData(f"{name}()") from exc
                raise

    return MetaDevice()


def _cuda_answers(spec) -> dict:
    major, minor = divmod(spec.arch, 10)
    properties = SimpleNamespace(name=spec.name, major=major, minor=minor, multi_processor_count=spec.sms,
                                 shared_memory_per_block_optin=spec.smem_per_block,
                                 max_threads_per_multi_processor=spec.max_warps_per_sm * 32,
                                 regs_per_multiprocessor=spec.registers_per_sm, warp_size=32,
                                 L2_cache_size=spec.l2_bytes)
    return {"get_device_capability": lambda device=None: (major, minor),
            "get_device_name": lambda device=None: spec.name,
            "get_device_properties": lambda device=None: properties,
            "current_device": lambda: 0,
            "set_device": lambda device: None,
            "synchronize": lambda device=None: None,
            "device": lambda device=None: contextlib.nullcontext(),
            "device_count": lambda: 1,
            "is_available": lambda: True}


# ----------------------------------------------------------------------------------------------
# The vendor's tool: nvidia-smi answers for the stand-in GPU.
# ----------------------------------------------------------------------------------------------
def _words(args) -> list[str]:
    """A command as subprocess.run takes it (a string, bytes, or a sequence) as its words."""
    import shlex

    if isinstance(args, bytes):
        args = args.decode()
    return shlex.split(args) if isinstance(args, str) else [a.decode() if isinstance(a, bytes) else str(a)
                                                            for a in args]


def _program(args) -> str:
    words = _words(args)
    return words[0].replace("\\", "/").rsplit("/", 1)[-1] if words else ""


def _smi_output(args, spec) -> str:
    """What `nvidia-smi` prints for the stand-in GPU: the queried fields (`--query-gpu=a,b`), else the
    one-line listing of `nvidia-smi -L`."""
    words = _words(args)
    major, minor = divmod(spec.arch, 10)
    query = next((w.split("=", 1)[1] for w in words if w.startswith("--query-gpu=")), None)
    if query is None:
        return f"GPU 0: {spec.name} (UUID: GPU-00000000-0000-0000-0000-000000000000)\n"
    known = {"name": spec.name, "gpu_name": spec.name, "compute_cap": f"{major}.{minor}", "count": "1",
             "index": "0", "driver_version": "[N/A]"}
    fields = [f.strip() for f in query.split(",") if f.strip()]
    row = ", ".join(known.get(f, "[N/A]") for f in fields)
    header = "" if any("noheader" in w for w in words) else ", ".join(fields) + "\n"
    return header + row + "\n"


@contextlib.contextmanager
def _gpu_tools(spec):
    import subprocess

    real = subprocess.run
    before = {t.ident for t in threading.enumerate()} - {threading.get_ident()}

    def run(args, *rest, **kwargs):
        if threading.get_ident() in before or _program(args) != "nvidia-smi":
            return real(args, *rest, **kwargs)
        out = _smi_output(args, spec)
        text = kwargs.get("text") or kwargs.get("universal_newlines") or kwargs.get("encoding")
        captured = kwargs.get("capture_output") or kwargs.get("stdout") == subprocess.PIPE
        stdout = (out if text else out.encode()) if captured else None
        return subprocess.CompletedProcess(args, 0, stdout, ("" if text else b"") if captured else None)

    subprocess.run = run
    try:
        yield
    finally:
        subprocess.run = real


@contextlib.contextmanager
def environment(gpu=None):
    """The stand-in driver, meta tensors for CUDA ones, and `torch.cuda` answers for `gpu`, for the
    duration of the block (one block at a time per process)."""
    spec = gpu_spec(gpu)
    with _LOCK, contextlib.ExitStack() as stack:
        from triton.runtime import driver

        saved = driver._active
        driver.set_active(StandInDriver(spec))
        stack.callback(setattr, driver, "_active", saved)
        stack.enter_context(_gpu_tools(spec))
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            for name, answer in _cuda_answers(spec).items():
                stack.callback(_restore, torch.cuda, name, torch.cuda.__dict__.get(name, _ABSENT))
                setattr(torch.cuda, name, answer)
            # torch's own "can this process run Triton" (cached, and false without a GPU), which libraries
            # guard their kernel definitions with (`if has_triton(): @triton.jit ...`): true, as on the GPU.
            with contextlib.suppress(ImportError):
                import torch.utils._triton as torch_triton

                if hasattr(torch_triton, "has_triton"):
                    stack.callback(setattr, torch_triton, "has_triton", torch_triton.has_triton)
                    torch_triton.has_triton = lambda: True
            # `wrap_triton(kernel)[grid](...)` on meta tensors goes to a traced higher-order op that launches
            # nothing; with it off, as torch turns it off for eager calls on real tensors (a `triton_op`'s own
            # function does so itself, which `_custom_ops_run_eagerly` calls), the launch reaches the capture.
            with contextlib.suppress(ImportError, AttributeError):
                from torch._library.triton import set_wrap_triton_enabled

                stack.enter_context(set_wrap_triton_enabled(False))
            stack.enter_context(_custom_ops_run_eagerly())
            stack.enter_context(_meta_mode())
        yield spec


_ABSENT = object()


@contextlib.contextmanager
def _custom_ops_run_eagerly():
    """Calls of a `torch.library.custom_op` (libraries register their kernel entry points as ops: axolotl's
    SwiGLU, torchao's triton_ops) run the op's Python function itself, as the op's CUDA kernel does on a GPU:
    on meta tensors the dispatcher would run its fake kernel, which allocates outputs and launches nothing."""
    try:
        from torch._library.custom_ops import CustomOpDef
    except ImportError:
        yield
        return
    original = CustomOpDef.__call__

    def call(self, *args, **kwargs):
        fn = getattr(self, "_init_fn", None)
        return fn(*args, **kwargs) if fn is not None else original(self, *args, **kwargs)

    CustomOpDef.__call__ = call
    try:
        yield
    finally:
        CustomOpDef.__call__ = original


def _restore(owner, name: str, value) -> None:
    if value is _ABSENT:
        delattr(owner, name)
    else:
        setattr(owner, name, value)


@contextlib.contextmanager
def launches_to(jit_run, autotune_run):
    """Route every `kernel[grid](...)` through `jit_run(jit_fn, args, kwargs, grid, warmup)` and every
    autotuned launch through `autotune_run(autotuner, args, kwargs)` for the duration of the block."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    def run(self, *args, grid, warmup, **kwargs):
        return jit_run(self, args, kwargs, grid, warmup)

    def tune(self, *args, **kwargs):
        return autotune_run(self, args, kwargs)

    # A library's autotuner subclass with a `run` of its own (FlagGems' LibTuner: its cache, policy and
    # benchmark) is routed too, or it would time configs on a GPU that is not there.
    tuners, seen = [Autotuner], []
    while tuners:
        cls = tuners.pop()
        seen.append(cls)
        tuners += [sub for sub in cls.__subclasses__() if sub not in seen]
    patched = [(JITFunction, JITFunction.__dict__["run"], run)]
    patched += [(cls, cls.__dict__["run"], tune) for cls in seen if "run" in cls.__dict__]
    with _LOCK:
        for cls, _, new in patched:
            cls.run = new
        try:
            yield
        finally:
            for cls, old, _ in patched:
                cls.run = old


def _refuse_launch(fn, args, kwargs, grid, warmup):
    name = getattr(getattr(fn, "fn", fn), "__name__", "a kernel")
    raise NotRunHere(f"{name} is not launched while the file is read without a GPU")


def _refuse_autotune(tuner, args, kwargs):
    raise NotRunHere(f"{getattr(tuner.base_fn, '__name__', 'a kernel')} is not autotuned while the file is read "
                     "without a GPU")


# ----------------------------------------------------------------------------------------------
# Executing a kernel file.
# ----------------------------------------------------------------------------------------------
_KERNEL_DECORATORS = {"jit", "autotune", "heuristics"}
# What a factory's body may run to define its kernels: imports, names its decorators and kernels read, defs.
_FACTORY_STATEMENTS = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.FunctionDef)


def _defines_kernel(node) -> bool:
    """A def decorated with something named jit, autotune or heuristics (`@triton.jit`, `@autotune(...)`)."""
    if not isinstance(node, ast.FunctionDef):
        return False
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in _KERNEL_DECORATORS:
            return True
    return False


FACTORY_KERNELS = "__advisor_factory_kernels__"  # the namespace's name for what `execute` found in factories


def execute(source: str, filename: str, namespace: dict, gpu=None) -> list[tuple[int, str]]:
    """Run a kernel file's top-level statements in `namespace` in the stand-in environment; return
    the (line, error) of each statement that failed and was skipped.

    Then the kernels a top-level function defines when called (a factory that imports Triton lazily and
    returns its kernels, as libraries do to import without Triton) go into namespace[FACTORY_KERNELS], by
    name. The factory is not called: its imports, assignments and defs run, each on its own, in a copy of
    the module's namespace (a statement that fails, such as one that reads the factory's arguments, is
    skipped, and not reported: the file's own statements ran), with the original line numbers, so a
    kernel's source and lines are the file's. Its free names become that namespace's globals, which is
    where Triton looks them up."""
    tree = pysource.parse(source, filename)
    flags = 0
    for node in tree.body:  # `from __future__` imports apply to every statement after them
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                feature = getattr(__import__("__future__"), alias.name, None)
                flags |= getattr(feature, "compiler_flag", 0)
    skipped: list[tuple[int, str]] = []

    def run(node) -> None:
        if isinstance(node, ast.If):  # `if has_triton():` around a library's kernels: its branch statement by statement
            test = compile(ast.Expression(node.test), filename, "eval", flags=flags, dont_inherit=True)
            try:
                branch = node.body if eval(test, namespace) else node.orelse
            except (Exception, SystemExit) as exc:
                return failed(node, exc)
            for inner in branch:
                run(inner)
            return
        code = compile(ast.Module([node], type_ignores=[]), filename, "exec", flags=flags, dont_inherit=True)
        try:
            exec(code, namespace)
        except (Exception, SystemExit) as exc:  # a self-check, a benchmark, an optional import: skip it, keep going
            failed(node, exc)

    def failed(node, exc) -> None:
        text = f"{type(exc).__name__}: {exc}".strip().splitlines()
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        skipped.append((start, text[0][:200] if text else type(exc).__name__))

    factory_kernels: dict[str, object] = {}
    with environment(gpu), launches_to(_refuse_launch, _refuse_autotune):
        for node in tree.body:
            run(node)
        for factory in tree.body:
            if not isinstance(factory, ast.FunctionDef) or not any(_defines_kernel(n) for n in factory.body):
                continue
            scope = dict(namespace)
            for node in factory.body:
                if not isinstance(node, _FACTORY_STATEMENTS):
                    continue
                code = compile(ast.Module([node], type_ignores=[]), filename, "exec", flags=flags, dont_inherit=True)
                try:
                    exec(code, scope)
                except (Exception, SystemExit):
                    continue
                if _defines_kernel(node) and node.name in scope:
                    factory_kernels.setdefault(node.name, scope[node.name])
    namespace[FACTORY_KERNELS] = factory_kernels
    return skipped
