"""Capture launches without a GPU: run host code on tensors without data and record each launch at
the point the JIT would compile it, compiling and running nothing.

The host code runs in the stand-in environment of `ceilings.standin` (a CUDA driver that answers
for the chosen GPU, torch `meta` tensors in place of CUDA ones). Launches are taken over there:

* `kernel[grid](...)`: the arguments are bound to the kernel's parameters as Triton's binder binds
  them (positional, keyword, defaults), the grid function is called with them, and the launch is
  recorded with the num_warps / num_stages it was given (Triton's defaults 4 and 3 otherwise).
* `kernel.warmup(...)` (host code that sizes a grid from the compiled kernel's registers and shared
  memory): the kernel is compiled ahead of time for the chosen GPU (`ceilings.compile`) and a
  stand-in of Triton's compiled kernel is returned, with `n_regs`, `n_spills` and
  `metadata.shared`; launching it (`compiled[grid](...)`) is recorded like any other launch.
* launches on data: a launch whose tensors all hold data (CPU tensors, such as routing ids a call built
  with `torch.randint`, or what an earlier launch run here computed) and are small (RUN_ON_DATA_BYTES)
  is also run, in Triton's interpreter, so what it computes (an align's expert offsets and padded
  count) is there for the launches after it, whose small integer tensors carry their contents into the
  trace (`TensorArg.values`) for the generic ceiling. A launch that is not run leaves the data tensors
  it stores into unknown (as the caller's `written` reads them from the kernel's source,
  `advisor.advice.stores.stored_outputs`; all of them without it or where the source cannot be read):
  later launches carry no contents for them, which would be what was there before the kernel would have
  written, not what it wrote.
* `@triton.autotune`: there is nothing to time, so the kernel is launched once with each config
  the autotuner would benchmark (its `prune_configs_by` applied), in the list's order. The launches
  of one autotuned call form an autotune group (the trace's `autotune_groups`): alternatives of one
  launch, the first standing for the launch (the autotuner picks by timing on a GPU). A config's
  `pre_hook` runs before its launch, as on a GPU (on tensors without data); the autotuner's own
  reset/restore hooks for benchmarking do not. `@triton.heuristics` run as usual, per config.

Used in-process for `--call` (`advisor.capture.call`) and in the child of `advisor record --no-gpu`
(`advisor/capture/boot.py` calls `start_program`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
from types import SimpleNamespace

from advisor.capture import boot
from ceilings import standin

_DEFAULT_WARPS, _DEFAULT_STAGES = 4, 3
# The most tensor bytes a launch may have to be run in the interpreter (module docstring): an align over
# 32,768 (token, expert) pairs took 2.8 s here; larger data-holding launches are recorded, not run.
RUN_ON_DATA_BYTES = 16 << 20
_LAUNCH_OPTIONS = ("num_warps", "num_stages")


class KernelArgumentError(TypeError):
    """A launch whose arguments do not bind to the kernel's parameters."""


class NoGPURecorder(boot._Recorder):  # the same records and dedupe as a GPU recording, plus autotune groups
    def __init__(self, out: str, gpu: str):
        super().__init__(out)
        self.gpu = gpu
        self._open: list[str] | None = None    # record keys of the autotuned call being captured

    def add(self, record: dict) -> str:
        key = super().add(record)
        if self._open is not None:
            self._open.append(key)
        return key

    @contextlib.contextmanager
    def autotune_group(self):
        outer, self._open = self._open, []
        try:
            yield
        finally:
            group, self._open = self._open, outer
            if group:
                self.groups.append(list(dict.fromkeys(group)))

    def data(self) -> dict:
        """The capture as `boot` writes it, with `gpu` the GPU answered for and `autotune_groups` as
        lists of indices into `launches`."""
        with self.lock:
            keys = list(self.entries)
            launches = [dict(record, count=count) for record, count in self.entries.values()]
        return {"gpu": self.gpu, "launches": launches, "capture_errors": self.errors,
                "first_capture_error": self.first_error, "capture_paths": ["no-gpu"],
                "autotune_groups": self.indexed_groups(keys)}


def bind(jit_fn, args: tuple, kwargs: dict) -> dict:
    """The kernel's parameters bound to a launch's arguments, in parameter order, defaults applied."""
    name = jit_fn.fn.__name__
    params = jit_fn.params
    if len(args) > len(params):
        raise KernelArgumentError(f"{name} takes {len(params)} arguments but the launch gives {len(args)}")
    bound = {p.name: a for p, a in zip(params, args, strict=False)}
    for key, value in kwargs.items():
        if key in bound:
            raise KernelArgumentError(f"{name} got two values for argument {key!r}")
        bound[key] = value
    for p in params:
        if p.name not in bound:
            if not p.has_default:
                raise KernelArgumentError(f"the launch of {name} gives no value for argument {p.name!r}")
            bound[p.name] = p.default
    return {p.name: bound[p.name] for p in params}


class _WarmedKernel:
    """What `kernel.warmup(...)` returns here: Triton's compiled kernel as far as host code reads it."""

    def __init__(self, capture: NoGPUCapture, jit_fn, bound: dict, options: dict, compiled):
        self._capture, self._jit_fn, self._bound, self._options = capture, jit_fn, bound, options
        self.n_regs = compiled.registers or 0
        self.n_spills = (compiled.local_bytes or 0) // 4
        self.n_max_threads = 1024
        self.metadata = SimpleNamespace(shared=compiled.shared_bytes, num_warps=compiled.num_warps,
                                        num_stages=compiled.num_stages, name=jit_fn.fn.__name__)

    def _init_handles(self) -> None:
        return None

    def __getitem__(self, grid):
        def runner(*args, stream=None):
            params = self._jit_fn.params
            # Triton's compiled kernel takes every argument; accept the runtime ones alone too.
            names = [p.name for p in params] if len(args) == len(params) else \
                [p.name for p in params if not p.is_constexpr]
            bound = {**self._bound, **dict(zip(names, args, strict=False))}
            self._capture.record(self._jit_fn, grid, bound, self._options)
        return runner


def interpret(jit_fn, grid: tuple, bound: dict) -> None:
    """One launch in Triton's interpreter on CPU tensors, from a process where kernels are compiled: the
    JIT functions it calls (its helpers, triton.language's own) are interpreted for the time of the run.
    The interpreter swaps triton.language's functions for its own and, for a JIT function called from a
    kernel, leaves them swapped (it expects the whole process to interpret): every compile after it failed
    ("'block_argument' object has no attribute 'dtype'"), so what it changes is put back afterwards."""
    import triton.language as tl
    from triton.runtime import jit as triton_jit
    from triton.runtime.interpreter import InterpretedFunction

    from advisor.capture import interpreter_fixes
    from ceilings.compile import interpret_as_imported

    interpreter_fixes.install()  # bf16 dots and casts as the GPU computes them, block indices on any NumPy
    interpreted: dict = {}
    libdevice = interpreter_fixes.LibdeviceCalls()  # libdevice's math on NumPy, put back after the run

    def of(fn):
        if fn not in interpreted:
            libdevice.cover(fn)
        return interpreted.setdefault(fn, InterpretedFunction(fn))

    patched = [tl, tl.core, tl.math, tl.core.tensor, getattr(tl.core, "tensor_descriptor_base", tl.core.tensor)]
    saved = [(obj, dict(vars(obj))) for obj in dict.fromkeys(patched)]
    original = triton_jit.JITFunction.__call__
    triton_jit.JITFunction.__call__ = lambda self, *args, **kwargs: of(self.fn)(*args, **kwargs)
    try:
        with interpret_as_imported():
            of(jit_fn.fn).run(grid=grid, warmup=False, **bound)
    finally:
        triton_jit.JITFunction.__call__ = original
        libdevice.restore()
        for obj, before in saved:
            for name in set(vars(obj)) - set(before):
                delattr(obj, name)
            for name, value in before.items():
                if vars(obj).get(name, _MISSING) is not value:
                    setattr(obj, name, value)


_MISSING = object()


class NoGPUCapture:
    """Takes over kernel launches and autotuning for a `NoGPURecorder` (see the module docstring)."""

    def __init__(self, recorder: NoGPURecorder, spec, override: tuple[str, dict] | None = None, written=None,
                 integer_data: bool = False):
        """`override`: (kernel name, {meta-parameter or num_warps/num_stages: value}) set on that kernel's
        launches in place of what the host code gives, so a call re-run per config launches each config
        as the host code would (its grid function and heuristics see the config). `written`: JIT function ->
        the names of the arguments it may store into, or None where that is not known (module docstring).
        `integer_data`: integer tensors the host asks for on the GPU are made with data
        (advisor.capture.integer_data)."""
        self.rec, self.spec, self.override, self.written = recorder, spec, override, written
        self.integer_data = integer_data
        self._unknown: set[int] = set()  # data pointers of CPU tensors a launch that was not run may have written

    def record(self, jit_fn, grid, bound: dict, options: dict) -> None:
        if callable(grid):
            grid = grid(dict(bound))
        grid = tuple(grid) if isinstance(grid, tuple | list) else (grid,)
        known = {name: self._as_recorded(value) for name, value in bound.items()}
        self.rec.launch(jit_fn.fn, lambda: [p.name for p in jit_fn.params if p.is_constexpr], grid, known,
                        options.get("num_warps") or _DEFAULT_WARPS,
                        options.get("num_stages") if options.get("num_stages") is not None else _DEFAULT_STAGES)
        if not self.rec.probing():
            self._run_on_data(jit_fn, grid, bound)

    def _as_recorded(self, value):
        """A CPU tensor whose contents are unknown, as a tensor without data (its contents are not recorded)."""
        import torch

        if isinstance(value, torch.Tensor) and not value.is_meta and value.data_ptr() in self._unknown:
            return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
        if isinstance(value, tuple | list):
            return type(value)(self._as_recorded(v) for v in value)
        return value

    def _run_on_data(self, jit_fn, grid: tuple, bound: dict) -> None:
        """Run the launch in the interpreter if its tensors all hold data, else forget the contents of the data
        tensors it may write (module docstring)."""
        import torch

        items = [(name, item) for name, value in bound.items()
                 for item in (value if isinstance(value, tuple | list) else (value,))]
        tensors = [t for _, t in items if isinstance(t, torch.Tensor)]
        # a descriptor or a foreign array: not run
        other = any(hasattr(x, "data_ptr") or hasattr(x, "base") for _, x in items if not isinstance(x, torch.Tensor))
        held = [t for t in tensors if not t.is_meta and t.device.type == "cpu"]
        if not held:
            return
        size = sum(t.untyped_storage().nbytes() for t in held)
        runnable = not other and len(held) == len(tensors) and size <= RUN_ON_DATA_BYTES
        if runnable:
            try:
                interpret(jit_fn, grid, bound)
                self._unknown -= {t.data_ptr() for t in held}
                return
            except Exception:  # noqa: S110 - what it would have written stays unknown, as for a launch not run
                pass
        written = self.written(jit_fn) if self.written is not None else None
        self._unknown |= {t.data_ptr() for name, t in items if isinstance(t, torch.Tensor) and not t.is_meta
                          and (written is None or name in written)}

    def jit_run(self, jit_fn, args, kwargs, grid, warmup):
        names = {p.name for p in jit_fn.params}
        # Triton reads its launch options from the same keywords, also where a parameter has their name.
        options = {k: v for k, v in kwargs.items() if k not in names or k in _LAUNCH_OPTIONS}
        bound = bind(jit_fn, args, {k: v for k, v in kwargs.items() if k in names})
        if self.override is not None and jit_fn.fn.__name__ == self.override[0]:
            values = self.override[1]
            bound.update((k, v) for k, v in values.items() if k in bound)
            options = {**options, **{k: v for k, v in values.items() if k in _LAUNCH_OPTIONS}}
        if warmup:
            return self._warmup(jit_fn, bound, options, grid)
        self.record(jit_fn, grid, bound, options)
        return None

    def _warmup(self, jit_fn, bound: dict, options: dict, grid):
        from ceilings.compile import compile_launch
        from ceilings.launch import Launch

        if callable(grid):
            grid = grid(dict(bound))
        record = self.rec.record_of(jit_fn.fn, lambda: [p.name for p in jit_fn.params if p.is_constexpr],
                                    tuple(grid), bound, options.get("num_warps") or _DEFAULT_WARPS,
                                    options.get("num_stages") if options.get("num_stages") is not None
                                    else _DEFAULT_STAGES)
        compiled = compile_launch(Launch.from_dict(record, f"warmup of {record['kernel']}"), self.spec.arch,
                                  fn=jit_fn)
        return _WarmedKernel(self, jit_fn, bound, options, compiled)

    def autotune_run(self, tuner, args, kwargs):
        tuner.nargs = dict(zip(tuner.arg_names, args, strict=False))
        try:
            configs = tuner.prune_configs(kwargs)
        except Exception:  # a pruning rule that needs real data or a GPU: the whole list
            configs = list(tuner.configs)
        names = set()
        for config in tuner.configs:
            names |= set(config.kwargs)
        stack = self.rec.local.__dict__.setdefault("tunable", [])
        stack.append(names)
        try:
            with self.rec.autotune_group():
                for config in configs:
                    if config.pre_hook is not None:  # e.g. sets tensor descriptors' block shapes per config
                        config.pre_hook({**tuner.nargs, **kwargs, **config.all_kwargs()})
                    tuner.fn.run(*args, **kwargs, **config.all_kwargs())
            if configs:
                # The config a capture records the launch with (the list's first): a library's wrapper reads the
                # autotuner's pick after the run to cache it (FlagGems' LibEntry: `fn.best_config`).
                tuner.best_config = configs[0]
        finally:
            stack.pop()
            tuner.nargs = None

    @contextlib.contextmanager
    def active(self):
        with contextlib.ExitStack() as stack:
            stack.enter_context(standin.environment(self.spec))
            stack.enter_context(standin.launches_to(self.jit_run, self.autotune_run))
            if self.integer_data:
                from advisor.capture.integer_data import integer_factories_mode

                stack.enter_context(integer_factories_mode())
            yield self


def start_program(out: str, gpu: str) -> NoGPURecorder:
    """For the child of `advisor record --no-gpu`: the capture stays on for the whole program and the
    launches are written to `out` at exit."""
    os.environ["TRITON_INTERPRET"] = "0"  # launches reach the JIT; nothing is interpreted or run
    spec = standin.gpu_spec(gpu)
    rec = NoGPURecorder(out, spec.name)
    rec.stack = contextlib.ExitStack()  # kept on the recorder: collecting it would end the capture
    rec.stack.enter_context(NoGPUCapture(rec, spec).active())
    atexit.register(rec.flush)
    return rec

