"""What `advisor record` does not keep, captured beside it while a corpus driver runs.

A driver calls `install()` after importing its library. When CORPUS_EXTRAS names a file, three
things are added to the program, for `measure.py` to read back, keyed like the trace's launches
(source, kernel, tensors, scalars: the same `_argument` the recorder uses, so the keys agree):

* the values of small integer and boolean tensors (<= 64 KiB: token ids, targets, offsets, routing
  tables), from the first launch with that key: replays then index the same rows, and a later
  generic ceiling can evaluate data-dependent bounds;
* for an autotuned launch, every config of its (pruned) list with the grid and constexprs that config
  would launch with (the grid lambdas live in the library's host code, so they are evaluated here,
  without compiling or launching anything);
* the module that defines each kernel, so a replay imports it the way the library does.

With CORPUS_FORCE_FIRST=1 the autotuner benchmarks only the first config of a list that compiles and
runs, and takes it: recording then compiles one config per kernel instead of every one; `measure.py`
compiles and times all of them afterwards, in parallel. The trace then holds that first config.
"""

from __future__ import annotations

import atexit
import importlib.util
import inspect
import json
import math
import os
import threading
from pathlib import Path

VALUE_BYTES = 64 << 10
_BOOT = Path(__file__).resolve().parents[2] / "advisor" / "capture" / "boot.py"
_state = threading.local()
_extras: dict[str, dict] = {}
_lock = threading.Lock()


def _boot():
    """The recorder's own argument reader, so that keys match the trace entries exactly."""
    spec = importlib.util.spec_from_file_location("_corpus_boot", _BOOT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_BOOT_MODULE = _boot()
_argument, _constexpr = _BOOT_MODULE._argument, _BOOT_MODULE._constexpr
_is_constexpr_annotation = _BOOT_MODULE._is_constexpr_annotation


def launch_key(source: str, kernel: str, tensors: list, scalars: dict, constexprs: dict) -> str:
    """A launch's identity without its launch options: what the trace's entry holds, num_warps and num_stages
    aside, with its `config` and `constexprs` merged (the recorder and this module split them differently)."""
    consts = {k: v for k, v in constexprs.items() if k not in ("num_warps", "num_stages")}
    return json.dumps([source, kernel, tensors, scalars, consts], sort_keys=True, default=str)


def trace_key(entry: dict) -> str:
    """`launch_key` of a launch object read from a trace file."""
    return launch_key(entry["source"], entry["kernel"], entry.get("tensors", []), entry.get("scalars", {}),
                      {**entry.get("constexprs", {}), **entry.get("config", {})})


def _stack(name: str) -> list:
    if not hasattr(_state, name):
        setattr(_state, name, [])
    return getattr(_state, name)


def _constexpr_names(jit_fn) -> set:
    params = getattr(jit_fn, "params", None)
    if params is not None:
        return {p.name for p in params if p.is_constexpr}
    # an InterpretedFunction (TRITON_INTERPRET=1, the dry runs): read the annotations as the recorder does
    return {p.name for p in inspect.signature(jit_fn.fn).parameters.values()
            if _is_constexpr_annotation(p.annotation)}


def _bind(jit_fn, args, kwargs) -> dict:
    signature = inspect.signature(jit_fn.fn)
    bound = signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in signature.parameters})
    bound.apply_defaults()
    return dict(bound.arguments)


def _describe(jit_fn, bound: dict) -> tuple[str, list, dict, dict]:
    source = os.path.abspath(inspect.getsourcefile(jit_fn.fn) or jit_fn.fn.__code__.co_filename)
    constexpr = _constexpr_names(jit_fn)
    tensors, scalars, consts = [], {}, {}
    for name, value in bound.items():
        if name in constexpr:
            consts[name] = _constexpr(value)
        else:
            _argument(name, value, tensors, scalars)
    return source, tensors, scalars, consts


def _grid(grid, bound: dict) -> list[int]:
    g = grid(bound) if callable(grid) else grid
    g = [int(x) for x in g]
    return g + [1] * (3 - len(g))


def _small_int_values(bound: dict) -> dict:
    out = {}
    for name, value in bound.items():
        dtype = getattr(value, "dtype", None)
        if dtype is None or not hasattr(value, "data_ptr") or getattr(dtype, "is_floating_point", True):
            continue
        if getattr(dtype, "is_complex", False) or value.numel() * value.element_size() > VALUE_BYTES:
            continue
        out[name] = value.tolist()
    return out


def _install_jit(cls) -> None:
    original = cls.run

    def run(self, *args, grid, warmup, **kwargs):
        probes = _stack("probe")
        if probes and probes[-1] is None:  # evaluating one config's grid for the autotuner wrapper below
            bound = _bind(self, args, kwargs)
            probes[-1] = {"grid": _grid(grid, bound), "bound": bound, "jit": self}
            return None
        if not warmup and not getattr(_state, "bench", 0):
            try:
                _note_launch(self, args, kwargs)
            except Exception as exc:  # never break the program for the record
                _extras.setdefault("_errors", {}).setdefault(type(exc).__name__, str(exc)[:200])
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    run.__wrapped__ = original
    cls.run = run


def _note_launch(jit_fn, args, kwargs) -> None:
    bound = _bind(jit_fn, args, kwargs)
    source, tensors, scalars, consts = _describe(jit_fn, bound)
    key = launch_key(source, jit_fn.fn.__name__, tensors, scalars, consts)
    pending = _stack("pending")
    variants = pending[-1] if pending else None
    if pending:
        pending[-1] = None  # the autotuner's final launch consumed them
    with _lock:
        entry = _extras.get(key)
        if entry is None:
            entry = _extras[key] = {"kernel": jit_fn.fn.__name__, "module": jit_fn.fn.__module__,
                                    "values": _small_int_values(bound)}
        if variants and "variants" not in entry:
            entry["variants"] = variants


def _probe(tuner, config, args, kwargs) -> dict | None:
    """The grid and constexprs `config` would launch with: the autotuner's call chain runs down to the
    JIT function, which answers without compiling."""
    probes = _stack("probe")
    probes.append(None)
    try:
        current = dict(kwargs, **config.all_kwargs())
        tuner.fn.run(*args, **current)
        found = probes[-1]
    except Exception:
        found = None
    finally:
        probes.pop()
    if not found:
        return None
    constexpr = _constexpr_names(found["jit"])
    tuned = set(config.kwargs)
    return {"config": {**{k: _constexpr(v) for k, v in config.kwargs.items()},
                       "num_warps": int(config.num_warps), "num_stages": int(config.num_stages)},
            "grid": found["grid"],
            "constexprs": {k: _constexpr(v) for k, v in found["bound"].items() if k in constexpr and k not in tuned},
            **({"num_ctas": config.num_ctas} if getattr(config, "num_ctas", 1) not in (1, None) else {}),
            **({"maxnreg": config.maxnreg} if getattr(config, "maxnreg", None) else {})}


def _install_autotune(force_first: bool) -> None:
    from triton.runtime.autotuner import Autotuner

    def wrap_run(cls) -> None:
        original = cls.__dict__["run"]
        if getattr(original, "_corpus", False):
            return

        def run(self, *args, **kwargs):
            runs = _stack("runs")
            if runs:  # a subclass's run calling Autotuner.run: the outer call did the work
                return original(self, *args, **kwargs)
            self.nargs = dict(zip(self.arg_names, args))
            try:
                configs = self.prune_configs(kwargs) if len(self.configs) > 1 else list(self.configs)
            except Exception:
                configs = list(self.configs)
            variants = [v for v in (_probe(self, c, args, kwargs) for c in configs) if v]
            self.nargs = dict(zip(self.arg_names, args))
            pending = _stack("pending")
            pending.append(variants)
            runs.append({"found": False})
            try:
                return original(self, *args, **kwargs)
            finally:
                runs.pop()
                pending.pop()

        run._corpus = True
        cls.run = run

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    wrap_run(Autotuner)
    for sub in subclasses(Autotuner):
        if "run" in sub.__dict__:
            wrap_run(sub)

    original_bench = Autotuner._bench
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"

    def _bench(self, *args, config, **meta):
        runs = _stack("runs")
        if force_first and runs and runs[-1]["found"]:
            return [math.inf, math.inf, math.inf]
        if force_first and interpreted:  # a dry run: the interpreter has no benchmarker; take the first config
            result = [0.0, 0.0, 0.0]
        else:
            _state.bench = getattr(_state, "bench", 0) + 1
            try:
                result = original_bench(self, *args, config=config, **meta)
            finally:
                _state.bench -= 1
        if force_first and runs and math.isfinite(result[0]):
            runs[-1]["found"] = True
        return result

    _bench.__wrapped__ = original_bench
    Autotuner._bench = _bench


def _save(path: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        json.dump(_extras, fh, default=str)
    os.replace(tmp, path)


def install() -> bool:
    """Install the extra capture when CORPUS_EXTRAS names an output file; call after importing the library."""
    path = os.environ.get("CORPUS_EXTRAS")
    if not path:
        return False
    from triton.runtime.jit import JITFunction

    _install_jit(JITFunction)
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        pass
    else:
        _install_jit(InterpretedFunction)
    _install_autotune(os.environ.get("CORPUS_FORCE_FIRST") == "1")
    atexit.register(_save, path)
    return True
