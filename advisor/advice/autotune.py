"""Let the predictor choose which configs `@triton.autotune` times.

    @triton.autotune(configs=CONFIGS, key=["M", "N", "K"], prune_configs_by=advisor.prune(top_k=4))
    @triton.jit
    def kernel(...): ...

On the first call for a key, Triton's autotuner hands every config and the call's arguments to
`early_config_prune`; `prune` builds the launch (tensor shapes, dtypes and strides, integer arguments,
constexprs), computes each config's ceiling from its compiled SASS for this GPU and predicts its time
with the latency model, and returns the `top_k` fastest predicted: only those are timed. The grid is
given with `grid=` (the same callable the kernel is launched with, taking the meta-parameters), or
inferred as the product of cdiv(X, BLOCK_X) over the tile parameters that match an integer argument X.
When anything goes wrong (an unknown GPU, a compile failure) the configs are returned unpruned with a
warning: pruning never makes a program fail. The times the autotuner then measures for the configs let
through are kept (at the next call) as the kernel's calibration on this GPU
(advisor.model.kernel_calibration), so later predictions for the kernel start from them.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable

from ceilings.hardware import GPU, resolve_gpu
from ceilings.launch import Config, Launch, TensorArg


def prune(top_k: int = 4, grid: Callable[[dict], tuple] | None = None, gpu: str | None = None) -> dict:
    """A `prune_configs_by` dict for @triton.autotune."""
    if top_k < 1:
        raise ValueError("top_k must be at least 1")
    return {"early_config_prune": Pruner(top_k, grid, gpu)}


class Pruner:
    def __init__(self, top_k: int, grid=None, gpu: str | None = None):
        self.top_k, self.grid, self.gpu = top_k, grid, gpu
        self.hardware: GPU | None = None  # `gpu` (or this machine's GPU) resolved on the first call
        self.last: dict | None = None  # what the last call decided (for reports and tests)

    def __call__(self, configs, named_args, **kwargs):
        configs = list(configs)
        self.record_timed()
        if len(configs) <= self.top_k:
            return configs
        try:
            fn = _autotuned_function()
            self.hardware = self.hardware or resolve_gpu(self.gpu or _gpu_name())
            ranked: dict = {}
            chosen = rank(fn, configs, named_args, kwargs, self.top_k, self.grid, self.hardware, ranked)
            self._pending = (_autotuner(), ranked)
        except Exception as exc:  # noqa: BLE001 - pruning must never break the program
            warnings.warn(f"advisor.prune: timing every config ({type(exc).__name__}: {exc})", stacklevel=2)
            self.last = {"error": str(exc)}
            return configs
        self.last = {"kept": [Config.from_triton(c).label() for c in chosen], "of": len(configs)}
        return chosen


    _pending: tuple | None = None  # (the autotuner, what `rank` predicted) until its timings are kept

    def record_timed(self) -> None:
        """Keep the times the autotuner measured for the configs we let through (the previous call's:
        it times them after we return) as this kernel's calibration (advisor.model.kernel_calibration)."""
        if self._pending is None:
            return
        tuner, ranked = self._pending
        timings = getattr(tuner, "configs_timings", None)
        if not isinstance(timings, dict) or not ranked.get("candidates"):
            return
        self._pending = None
        try:
            from advisor.advice.search import record_timings

            by_config = {c.config: c for c in ranked["candidates"]}
            timed = []
            for config, ms in timings.items():
                cand = by_config.get(Config.from_triton(config))
                first = ms[0] if isinstance(ms, list | tuple) else ms
                if cand is not None and isinstance(first, int | float) and math.isfinite(first):
                    timed.append((cand, 1000.0 * first))
            record_timings(ranked["subject"], timed)
        except Exception as exc:  # noqa: BLE001 - keeping timings must never break the program
            warnings.warn(f"advisor.prune: timings not kept ({type(exc).__name__}: {exc})", stacklevel=2)


def _autotuner():
    """The autotuner calling us (its prune_configs method is our caller's frame)."""
    frame = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if owner is not None and hasattr(owner, "configs") and hasattr(owner, "fn"):
            return owner
        frame = frame.f_back
    raise RuntimeError("not called from triton.autotune")


def _autotuned_function():
    """The JIT function of the autotuner calling us."""
    fn = _autotuner().fn
    while not hasattr(fn, "params"):  # unwrap nested autotuners / heuristics
        fn = fn.fn
    return fn


def build_launch(fn, named_args: dict, kwargs: dict, config: Config) -> Launch:
    import torch

    tensors, scalars, constexprs = [], {}, {}
    for param in fn.params:
        name = param.name
        if name in named_args:
            value = named_args[name]
        elif name in kwargs:
            value = kwargs[name]
        else:
            continue
        if param.is_constexpr:
            if name not in config.params:
                constexprs[name] = value
        elif isinstance(value, torch.Tensor):
            tensors.append(TensorArg(name, tuple(value.shape), str(value.dtype).removeprefix("torch."),
                                     tuple(value.stride())))
        elif isinstance(value, bool | int | float):
            scalars[name] = value
    source = fn.fn.__code__.co_filename
    return Launch(source, fn.__name__, (1,), tuple(tensors), scalars, constexprs, config)


def inferred_grid(launch: Launch) -> Callable[[Config], tuple[int, ...]]:
    """One axis: the product of cdiv(X, BLOCK_X) over tile parameters matched to integer arguments."""
    from advisor.advice.subjects import tile_dims

    tiles = tile_dims(launch, spellings=("{x}",))
    if not tiles:
        raise RuntimeError("cannot infer the grid; pass grid= to advisor.prune")
    return lambda config: (math.prod(-(-dim // config[name]) for name, dim in tiles),)


def rank(fn, configs, named_args: dict, kwargs: dict, top_k: int, grid=None, gpu: GPU | None = None,
         ranked: dict | None = None):
    """The `top_k` triton.Config objects of `configs` with the lowest predicted time on `gpu` (default: this
    machine's). `ranked`, when given, receives the subject and its ranked candidates (to keep the
    autotuner's timings of them)."""
    from advisor.advice.search import search
    from advisor.advice.subjects import LaunchSubject

    ours = [Config.from_triton(c) for c in configs]
    launch = build_launch(fn, named_args, kwargs, ours[0])
    if grid is not None:
        def grid_rule(config: Config):
            g = grid({**named_args, **kwargs, **config.params, "num_warps": config.num_warps,
                      "num_stages": config.num_stages})
            return tuple(int(x) for x in (g if isinstance(g, tuple | list) else (g,)))
    else:
        grid_rule = inferred_grid(launch)
    launch = Launch(launch.source, launch.kernel, grid_rule(ours[0]), launch.tensors, launch.scalars,
                    launch.constexprs, ours[0])
    subject = LaunchSubject(launch, gpu or resolve_gpu(_gpu_name()), space=ours, grid=grid_rule)
    advice = search(subject, top_k=top_k, confirm=True)
    if ranked is not None:
        ranked.update(subject=subject, candidates=[advice.current, *advice.ranked])
    keep = {c.config for c in advice.ranked[:top_k]}
    chosen = [c for c, o in zip(configs, ours, strict=True) if o in keep]
    return chosen or list(configs)


def _gpu_name() -> str:
    # imported when first needed: this module loads inside the user's program (the autotune hook)
    from advisor.advice.suggest import default_gpu_name

    return default_gpu_name()
