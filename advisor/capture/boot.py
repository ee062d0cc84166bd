"""The runner `advisor record` starts: install the launch capture, run the program, save its launches.

Started as `python advisor/capture/boot.py OUT.json (script PATH | module NAME | code TEXT) [ARGS...]`
by `advisor.capture.record`. It needs only the standard library and the Triton the program imports,
so it works wherever the program runs, and it drops its own folder from `sys.path` first so the
program sees the `sys.path` that `python prog.py` would give it. (`advisor record --no-gpu` is the
exception: it sets TRITON_ADVISOR_NO_GPU and puts the advisor on the child's path, and the capture
of `advisor.capture.nogpu`, which reuses `_Recorder`, replaces the two paths below.)

Two capture paths, each catching the launches the other cannot see:

* Compiled kernels (the GPU, TRITON_INTERPRET unset): Triton's own launch hooks. A
  `knobs.runtime.jit_cache_hook` (called before each kernel specialisation is compiled or loaded)
  attaches a `launch_metadata` callback to the kernel's `JITFunction` (the per-kernel hook
  `@triton.jit(launch_metadata=...)` that profilers use; a kernel's own callback is kept and
  chained). A `knobs.runtime.launch_enter_hook` then evaluates it at every launch: the callback
  receives the grid, the compiled kernel's metadata (num_warps, num_stages) and every bound argument,
  constexprs included.
* Interpreted kernels (TRITON_INTERPRET=1): the interpreter compiles nothing and calls no hook, so
  `triton.runtime.interpreter.InterpretedFunction.run` is wrapped in this process only; the launch's
  num_warps / num_stages are the ones it was given (an autotune config's, or a `num_warps=` keyword),
  else Triton's defaults 4 and 3.

`@triton.autotune`: `Autotuner.run` is wrapped to make the names its configs set count as tunable,
and `Autotuner._bench` to leave out its benchmark launches, so only the launch with the chosen
config is recorded. The first time a chosen launch is seen, the launch every other config of the
autotuner's (pruned) list would make is recorded beside it as an autotune group (docs/trace.md):
the kernel's `run` is called again per config with a probe on, which evaluates the grid function
and the heuristics and returns before anything is compiled or launched, so the advisor ranks each
config on the grid the host code gives it instead of one inferred. The launches, deduplicated with
a count, are written to OUT.json at exit.

On both paths an integer tensor argument of at most 1 MiB keeps its contents (`values`: routing
tables, offsets, counts), read as the launch starts, so the generic ceiling can evaluate control flow
that reads them (docs/trace.md). Tensors without data (the no-GPU capture's meta tensors) keep none.

One file of a little over 400 lines on purpose: it runs as a script before the user's program and may
import only the standard library, so it cannot lean on the advisor's own modules.
"""

from __future__ import annotations

import atexit
import contextlib
import inspect
import json
import os
import re
import sys
import threading

_TUNABLE = re.compile(r"^(BLOCK|GROUP|TILE|SPLIT)(_|$)|^[XYZR]0?_?BLOCK$|^B[MNKD]$|^NUM_(WARPS|STAGES|SPLITS?)$")
_DEFAULT_WARPS, _DEFAULT_STAGES = 4, 3
_KEY = "triton_advisor_launch"
# Integer tensors up to this size keep their contents in the trace (ceilings.launch.MAX_VALUES_BYTES;
# this runner imports nothing of the advisor, so the numbers are repeated here).
MAX_VALUES_BYTES = 1024 * 1024
_INTEGER_BYTES = {"int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8, "bool": 1}
# A larger integer tensor keeps a sample of its contents instead (ceilings.launch.SAMPLE_SIZE, TensorArg.sample).
SAMPLE_SIZE = 4096
_SORTED_CHUNK = 1 << 24  # elements compared at a time when checking that a large tensor is sorted
# Triton's names for float8 element types, as torch names them.
_TL_TO_TORCH = {"float8e4nv": "float8_e4m3fn", "float8e5": "float8_e5m2", "float8e4b8": "float8_e4m3fnuz",
                "float8e5b16": "float8_e5m2fnuz", "int1": "bool"}


class _Recorder:
    def __init__(self, out: str):
        self.out = out
        self.lock = threading.Lock()
        self.entries: dict[str, list] = {}   # dedupe key -> [record, count], in first-seen order
        self.errors = 0
        self.first_error: str | None = None
        self.local = threading.local()       # .bench (autotuner benchmarking depth), .tunable (list of sets)
        self.paths: list[str] = []
        self._kernel_info: dict = {}
        self.groups: list[list[str]] = []      # record keys of each autotuned launch and its alternatives
        self.grouped: set[str] = set()         # launch forms whose alternatives were probed (`_form`)

    def probing(self) -> bool:
        return getattr(self.local, "probes", None) is not None

    # --- state kept per thread -------------------------------------------------------------
    def benchmarking(self) -> bool:
        return getattr(self.local, "bench", 0) > 0

    def tunable_names(self) -> set:
        names: set = set()
        for entry in getattr(self.local, "tunable", ()):
            names |= entry
        return names

    # --- one launch --------------------------------------------------------------------------
    def add(self, record: dict) -> str:
        key = json.dumps(record, sort_keys=True, default=str)
        with self.lock:
            entry = self.entries.get(key)
            if entry is None:
                self.entries[key] = [record, 1]
            else:
                entry[1] += 1
        self.local.last_key = key
        return key

    def indexed_groups(self, keys: list[str]) -> list[list[int]]:
        """The autotune groups as indices into the launches (in `keys` order), groups of one left out."""
        index = {key: i for i, key in enumerate(keys)}
        groups = [[index[k] for k in dict.fromkeys(group) if k in index] for group in self.groups]
        return [g for g in groups if len(g) > 1]

    def failed(self, exc: BaseException) -> None:
        with self.lock:
            self.errors += 1
            if self.first_error is None:
                self.first_error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]

    def kernel_info(self, py_fn, constexpr_names) -> tuple[str, str, int | None, frozenset]:
        """(name, absolute source file, line of its `def`, constexpr parameter names), cached."""
        info = self._kernel_info.get(py_fn)
        if info is None:
            source = inspect.getsourcefile(py_fn) or py_fn.__code__.co_filename
            info = (py_fn.__name__, os.path.abspath(source), _def_line(py_fn), frozenset(constexpr_names()))
            self._kernel_info[py_fn] = info
        return info

    def launch(self, py_fn, constexpr_names, grid, arguments: dict, num_warps, num_stages) -> None:
        record = self.record_of(py_fn, constexpr_names, grid, arguments, num_warps, num_stages)
        if self.probing():  # a config's launch for its autotune group: kept aside, nothing runs
            self.local.probes.append(record)
        else:
            self.add(record)

    def record_of(self, py_fn, constexpr_names, grid, arguments: dict, num_warps, num_stages) -> dict:
        """One launch as a trace entry (docs/trace.md)."""
        name, source, line, constexprs = self.kernel_info(py_fn, constexpr_names)
        tunable = self.tunable_names()
        tensors, scalars, consts, config = [], {}, {}, {}
        for arg, value in arguments.items():
            if arg in constexprs:
                value = _constexpr(value)
                if (arg in tunable or _TUNABLE.match(arg)) and isinstance(value, int | float | bool | str):
                    config[arg] = value
                else:
                    consts[arg] = value
            else:
                _argument(arg, value, tensors, scalars, keep_values=not self.probing())
        config["num_warps"] = int(num_warps) if num_warps else _DEFAULT_WARPS
        config["num_stages"] = int(num_stages) if num_stages is not None else _DEFAULT_STAGES
        grid = [int(g) for g in grid]
        return {"source": source, "kernel": name, "line": line, "grid": grid, "tensors": tensors,
                "scalars": scalars, "constexprs": consts, "config": config}

    # --- the capture file --------------------------------------------------------------------
    def data(self) -> dict:
        """The capture file's contents (docs/trace.md)."""
        with self.lock:
            keys = list(self.entries)
            launches = [dict(record, count=count) for record, count in self.entries.values()]
            errors, first = self.errors, self.first_error
        data = {"gpu": _gpu_name(), "launches": launches, "capture_errors": errors, "first_capture_error": first,
                "capture_paths": self.paths}
        groups = self.indexed_groups(keys)
        if groups:
            data["autotune_groups"] = groups
        return data

    def flush(self) -> None:
        tmp = f"{self.out}.{os.getpid()}.tmp"
        with open(tmp, "w") as fh:
            json.dump(self.data(), fh, default=str)
        os.replace(tmp, self.out)


def _def_line(py_fn) -> int | None:
    try:
        lines, start = inspect.getsourcelines(py_fn)
    except (OSError, TypeError):
        return None
    for offset, text in enumerate(lines):
        if re.match(r"\s*(async\s+)?def\s", text):
            return start + offset
    return start


def _gpu_name() -> str | None:
    torch = sys.modules.get("torch")  # a program that never imported torch launched on no torch device
    try:
        if torch is not None and torch.cuda.is_available():
            return str(torch.cuda.get_device_name(torch.cuda.current_device()))
    except Exception:
        return None
    return None


def _dtype_name(dtype) -> str:
    text = str(dtype)
    if text.startswith("torch."):
        return text[len("torch."):]
    name = _tl_dtype_name(dtype)
    return _TL_TO_TORCH.get(name, name) if name else text


def _tl_dtype_name(value) -> str | None:
    """The `triton.language` attribute name of a Triton dtype (`bfloat16`, not its short `bf16`)."""
    tl = sys.modules.get("triton.language")
    if tl is None or not isinstance(value, tl.dtype):
        return None
    if not _TL_NAMES:
        for name in sorted(dir(tl), key=len):  # the longest alias last, so it wins
            dtype = getattr(tl, name, None)
            if not name.startswith("_") and isinstance(dtype, tl.dtype):
                with contextlib.suppress(TypeError):  # pointer types are not hashable
                    _TL_NAMES[dtype] = name
    try:
        return _TL_NAMES.get(value, str(value))
    except TypeError:
        return str(value)


_TL_NAMES: dict = {}


def _constexpr(value):
    """A constexpr as a JSON value: numbers, bools, strings and None as they are, dtypes by name."""
    value = getattr(value, "value", value) if type(value).__name__ == "constexpr" else value
    if value is None or isinstance(value, bool | int | float | str):
        return value
    name = _tl_dtype_name(value)
    if name is not None:
        return name
    if isinstance(value, tuple | list):
        return [_constexpr(v) for v in value]
    inner = getattr(value, "fn", value)  # a JIT function passed as a constexpr: its name
    return getattr(inner, "__name__", None) or repr(value)


def _argument(name: str, value, tensors: list, scalars: dict, keep_values: bool = True) -> None:
    """Sort one runtime argument into the tensors or the scalars; other objects are left out.
    `keep_values`: read a small integer tensor's contents (not for a probe: it takes the launch's)."""
    if all(hasattr(value, a) for a in ("base", "shape", "strides", "block_shape")):  # a TMA tensor descriptor
        tensors.append({"name": name, "shape": [int(s) for s in value.shape],
                        "dtype": _dtype_name(value.base.dtype), "stride": [int(s) for s in value.strides],
                        "block_shape": [int(s) for s in value.block_shape]})
    elif hasattr(value, "data_ptr") and hasattr(value, "shape") and hasattr(value, "stride"):
        tensor = {"name": name, "shape": [int(s) for s in value.shape], "dtype": _dtype_name(value.dtype),
                  "stride": [int(s) for s in value.stride()]}
        contents = _small_integer_values(value, tensor["dtype"]) if keep_values else None
        if contents is not None:
            tensor["values"] = contents
        elif keep_values:
            sample = _integer_sample(value, tensor["dtype"])
            if sample is not None:
                tensor["sample"] = sample
        tensors.append(tensor)
    elif value is None or isinstance(value, bool | int | float | str):
        scalars[name] = value
    elif isinstance(value, tuple | list):
        for i, item in enumerate(value):
            _argument(f"{name}[{i}]", item, tensors, scalars, keep_values)
    elif getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # a numpy scalar
        scalars[name] = value.item()
    elif type(value).__name__ == "constexpr":
        scalars[name] = _constexpr(value)


def _small_integer_values(tensor, dtype: str) -> list[int] | None:
    """The contents of a small integer tensor (routing tables, offsets, counts), so the generic ceiling
    can evaluate control flow that reads them (TensorArg.values): element i is the one at the data
    pointer + i elements, over the span the strides reach. None for other tensors, tensors without
    data (meta) and tensors a CUDA graph is being captured on, whose read would break the capture.
    The read happens as the launch starts, so it sees what the kernel will read, not what it writes."""
    size = _INTEGER_BYTES.get(dtype)
    if size is None or getattr(tensor, "is_meta", False) or tensor.numel() == 0:
        return None
    span = 1 + sum((int(n) - 1) * int(s) for n, s in zip(tensor.shape, tensor.stride(), strict=True))
    if span * size > MAX_VALUES_BYTES or any(int(s) < 0 for s in tensor.stride()):
        return None
    torch = sys.modules.get("torch")
    if tensor.is_cuda and torch is not None and torch.cuda.is_current_stream_capturing():
        return None
    flat = tensor.as_strided((span,), (1,))
    return [int(v) for v in flat.tolist()]


def _integer_sample(tensor, dtype: str) -> dict | None:
    """For an integer tensor too large to keep whole, what a timing needs to fill it with values like the
    program's (ceilings.launch.ValueSample): SAMPLE_SIZE elements at evenly spaced positions of the span its
    strides reach, its smallest and largest element, whether the span is non-decreasing (offsets, sorted ids),
    and its row length if no row of it (the last, unit-stride dimension) repeats a value (a sort's indices).
    Zeros in their place turn a gather into reads of one row and atomics into one contended address (RESULTS 55)."""
    if _INTEGER_BYTES.get(dtype) is None or getattr(tensor, "is_meta", False) or tensor.numel() == 0:
        return None
    if any(int(s) < 0 for s in tensor.stride()):
        return None
    torch = sys.modules.get("torch")
    if torch is None or (tensor.is_cuda and torch.cuda.is_current_stream_capturing()):
        return None
    span = 1 + sum((int(n) - 1) * int(s) for n, s in zip(tensor.shape, tensor.stride(), strict=True))
    flat = tensor.as_strided((span,), (1,))
    step = max(1, span // SAMPLE_SIZE)
    ordered = True
    for start in range(0, span - 1, _SORTED_CHUNK):  # chunks overlap by one element, so no pair is skipped
        part = flat[start:start + _SORTED_CHUNK + 1]
        if not bool((part[1:] >= part[:-1]).all()):
            ordered = False
            break
    return {"values": [int(v) for v in flat[::step][:SAMPLE_SIZE].tolist()], "low": int(flat.min()),
            "high": int(flat.max()), "sorted": ordered, "distinct_rows": _distinct_rows(tensor, dtype)}


def _distinct_rows(tensor, dtype: str) -> int:
    """The row length of a tensor none of whose rows (its last dimension, unit stride) repeats a value, else 0."""
    if dtype == "bool" or tensor.dim() == 0 or int(tensor.stride(-1)) != 1 or tensor.shape[-1] < 2:
        return 0
    length = int(tensor.shape[-1])
    rows = tensor.reshape(-1, length)
    per_chunk = max(1, _SORTED_CHUNK // length)
    for start in range(0, rows.shape[0], per_chunk):
        ordered = rows[start:start + per_chunk].sort(dim=-1).values
        if bool((ordered[:, 1:] == ordered[:, :-1]).any()):
            return 0
    return length


# ----------------------------------------------------------------------------------------------
# The capture paths.
# ----------------------------------------------------------------------------------------------
def _is_constexpr_annotation(annotation) -> bool:
    if isinstance(annotation, str):
        return annotation.replace(" ", "").split(".")[-1] == "constexpr"
    return getattr(annotation, "__name__", None) == "constexpr"


def _install_interpreter(rec: _Recorder) -> bool:
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except Exception:
        return False
    original = InterpretedFunction.run

    def run(self, *args, grid, warmup, **kwargs):
        if rec.probing() and not warmup:  # an autotune config's launch: recorded aside, nothing run
            _capture_interpreted(rec, self, args, kwargs, grid)
            return None
        if not warmup and not rec.benchmarking():
            try:
                _capture_interpreted(rec, self, args, kwargs, grid)
            except Exception as exc:  # never break the program for the record
                rec.failed(exc)
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    run.__wrapped__ = original
    InterpretedFunction.run = run
    return True


def _capture_interpreted(rec: _Recorder, interpreted, args, kwargs, grid) -> None:
    signature = inspect.signature(interpreted.fn)
    _capture_bound(rec, interpreted.fn, lambda: [p.name for p in signature.parameters.values()
                                                 if _is_constexpr_annotation(p.annotation)], args, kwargs, grid)


def _capture_bound(rec: _Recorder, py_fn, constexpr_names, args, kwargs, grid) -> None:
    """Record a launch from the kernel's `run` arguments: bound to its parameters, the grid function
    evaluated on them, num_warps / num_stages as given."""
    signature = inspect.signature(py_fn)
    bound = signature.bind(*args, **{k: v for k, v in kwargs.items() if k in signature.parameters})
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    if callable(grid):
        grid = grid(dict(arguments))
    rec.launch(py_fn, constexpr_names, tuple(grid), arguments, kwargs.get("num_warps"), kwargs.get("num_stages"))


def _install_hooks(rec: _Recorder) -> bool:
    try:
        from triton import knobs
    except Exception:
        return False
    runtime = knobs.runtime

    def attach(jit_fn) -> None:
        current = getattr(jit_fn, "launch_metadata", None)
        if getattr(current, "_triton_advisor", False):
            return

        def launch_metadata(grid, metadata, args):
            extra = current(grid, metadata, args) if current is not None else {}
            if rec.benchmarking():
                return extra or {}
            try:
                params = getattr(jit_fn, "params", None)
                rec.launch(jit_fn.fn, lambda: [p.name for p in params if p.is_constexpr], tuple(grid), dict(args),
                           _meta(metadata, "num_warps"), _meta(metadata, "num_stages"))
            except Exception as exc:
                rec.failed(exc)
            return {**(extra or {}), _KEY: True}

        launch_metadata._triton_advisor = True
        jit_fn.launch_metadata = launch_metadata

    previous_cache_hook = runtime.jit_cache_hook

    def jit_cache_hook(*args, **kwargs):
        try:
            info = kwargs.get("fn")
            jit_fn = getattr(info, "jit_function", None)
            if jit_fn is not None:
                attach(jit_fn)
        except Exception as exc:
            rec.failed(exc)
        return previous_cache_hook(*args, **kwargs) if previous_cache_hook is not None else None

    def launch_enter_hook(metadata) -> None:
        # The callback above records the launch when the lazy metadata is evaluated: evaluate it.
        if metadata is not None and hasattr(metadata, "get"):
            metadata.get()

    runtime.jit_cache_hook = jit_cache_hook
    chain = runtime.launch_enter_hook
    if hasattr(chain, "add"):  # Triton 3.5 and later: a chain of hooks
        chain.add(launch_enter_hook)
    else:  # earlier: one optional hook; chain ours after the one set
        previous_enter = chain

        def launch_enter_hooks(metadata) -> None:
            if previous_enter is not None:
                previous_enter(metadata)
            launch_enter_hook(metadata)

        runtime.launch_enter_hook = launch_enter_hooks
    return True


def _meta(metadata, name):
    value = getattr(metadata, name, None)
    if value is None and isinstance(metadata, dict):
        value = metadata.get(name)
    return value


def _install_autotune(rec: _Recorder) -> bool:
    try:
        from triton.runtime.autotuner import Autotuner
    except Exception:
        return False
    original_run, original_bench = Autotuner.run, Autotuner._bench
    _install_probe(rec)

    def run(self, *args, **kwargs):
        if rec.probing():
            return original_run(self, *args, **kwargs)
        names = set()
        for config in getattr(self, "configs", None) or ():
            names |= set(getattr(config, "kwargs", {}) or {})
        stack = rec.local.__dict__.setdefault("tunable", [])
        stack.append(names)
        rec.local.last_key = None
        try:
            result = original_run(self, *args, **kwargs)
            chosen = rec.local.last_key  # the launch the autotuner made with the config it chose
            form = _form(rec, chosen) if chosen is not None else None
            if form is not None and form not in rec.grouped and not rec.benchmarking():
                rec.grouped.add(form)
                with contextlib.suppress(Exception):  # no group: the advisor infers the other grids instead
                    _record_alternatives(rec, self, args, kwargs, chosen)
            return result
        finally:
            stack.pop()

    def _bench(self, *args, **kwargs):
        rec.local.bench = getattr(rec.local, "bench", 0) + 1
        try:
            return original_bench(self, *args, **kwargs)
        finally:
            rec.local.bench -= 1

    run.__wrapped__, _bench.__wrapped__ = original_run, original_bench
    Autotuner.run, Autotuner._bench = run, _bench
    return True


def _form(rec: _Recorder, key: str) -> str:
    """A recorded launch without its integer contents: a loop whose routing differs at every call (one
    entry per call) gets its configs probed once, not once per call."""
    with rec.lock:
        record = rec.entries[key][0]
    tensors = [{k: v for k, v in t.items() if k != "values"} for t in record["tensors"]]
    return json.dumps({**record, "tensors": tensors}, sort_keys=True, default=str)


def _install_probe(rec: _Recorder) -> bool:
    """The compiled path's `JITFunction.run` answers a probe (`_record_alternatives`) with the launch it
    would make, before it compiles or launches anything."""
    try:
        from triton.runtime.jit import JITFunction
    except Exception:
        return False
    original = JITFunction.run

    def run(self, *args, grid, warmup, **kwargs):
        if rec.probing() and not warmup:
            params = self.params
            _capture_bound(rec, self.fn, lambda: [p.name for p in params if p.is_constexpr], args, kwargs, grid)
            return None
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    run.__wrapped__ = original
    JITFunction.run = run
    return True


def _record_alternatives(rec: _Recorder, tuner, args, kwargs, chosen: str) -> None:
    """Record, as the chosen launch's autotune group, the launch each other config of the tuner's list
    (pruned as the tuner prunes it) would make: the tuner's `fn.run` per config with the probe on, so
    heuristics and the grid function see the config. A config's `pre_hook` does not run (on real data
    it may zero an output). Integer contents are the chosen launch's, read as it started."""
    configs = list(getattr(tuner, "configs", None) or ())
    with rec.lock:
        first = rec.entries[chosen][0]
    base = getattr(getattr(tuner, "base_fn", None), "__name__", first["kernel"])
    if len(configs) < 2 or first["kernel"] != base:  # the last launch may be another kernel's (a pre_hook's)
        return
    rec.local.probes = []
    try:
        tuner.nargs = dict(zip(tuner.arg_names, args, strict=False))
        with contextlib.suppress(Exception):  # a pruning rule that needs more than a probe gives: the list
            configs = list(tuner.prune_configs(kwargs))
        for config in configs:
            with contextlib.suppress(Exception):  # a config whose launch cannot be probed stays out of the group
                tuner.fn.run(*args, **{**kwargs, **config.all_kwargs()})
        probes = rec.local.probes
    finally:
        rec.local.probes = None
        tuner.nargs = None
    values = {t["name"]: t["values"] for t in first["tensors"] if "values" in t}
    keys = [chosen]
    for record in probes:
        if record["config"] == first["config"]:
            continue
        for tensor in record["tensors"]:
            if tensor["name"] in values:
                tensor["values"] = values[tensor["name"]]
        keys.append(rec.add(record))
    if len(keys) > 1:
        with rec.lock:
            rec.groups.append(keys)


def install(out: str) -> _Recorder:
    rec = _Recorder(out)
    if _install_hooks(rec):
        rec.paths.append("launch_enter_hook")
    if _install_interpreter(rec):
        rec.paths.append("interpreter")
    if _install_autotune(rec):
        rec.paths.append("autotune")
    atexit.register(rec.flush)
    return rec


def main(argv: list[str]) -> None:
    out, mode, target, *args = argv
    # Running this file put its folder first on sys.path; the program must not see the advisor's modules.
    if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]
    import runpy

    no_gpu = os.environ.pop("TRITON_ADVISOR_NO_GPU", None)
    if no_gpu:  # `advisor record --no-gpu`: the advisor's capture on tensors without data (advisor/capture/nogpu.py)
        from advisor.capture.nogpu import start_program

        start_program(out, no_gpu)
    else:
        try:
            install(out)
        except Exception as exc:  # no Triton: run the program anyway, recording nothing
            print(f"advisor record: cannot install the launch capture ({type(exc).__name__}: {exc})",
                  file=sys.stderr)
    if mode == "script":
        path = os.path.abspath(target)
        sys.argv = [path, *args]
        sys.path.insert(0, os.path.dirname(path))
        runpy.run_path(path, run_name="__main__")
    elif mode == "module":
        sys.argv = [target, *args]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.argv = ["-c", *args]
        sys.path.insert(0, "")
        exec(compile(target, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})


if __name__ == "__main__":
    main(sys.argv[1:])
