"""A kernel's `@triton.heuristics` evaluated for configs other than the launched one.

A recorded launch carries the values its heuristics gave for its own config (`EVEN_K = K % BLOCK_K == 0`
filed with the constexprs). Another config of the search needs them evaluated again, as Triton does before
every launch: kept as recorded, a BLOCK_K that no longer divides K would be compiled, costed and timed as the
unmasked program, which reads past the tensor (a wrong result the advice would have proposed).

The value functions see what Triton hands them: every argument by name (tensors as meta tensors with the
launch's shape, strides and dtype: enough for `.dtype`, `.stride(i)`, `.numel()`, `.element_size()`), the
constexprs, the config's parameters, num_warps and num_stages, and the values of the decorators outside.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ceilings.launch import Config, Launch


def _meta_tensor(t):
    import torch

    dtype = getattr(torch, t.dtype, None)
    if not isinstance(dtype, torch.dtype):
        return None
    return torch.empty_strided(tuple(t.shape), tuple(t.stride), dtype=dtype, device="meta")


def heuristic_args(launch: Launch, config: Config) -> dict[str, Any]:
    """The dict a heuristic's function reads, for `launch` with `config`."""
    args: dict[str, Any] = {}
    for t in launch.tensors:
        args[t.name] = _meta_tensor(t)
    args.update(dict(launch.scalars))
    args.update(dict(launch.constexprs))
    args.update(config.params)
    args.update(num_warps=config.num_warps, num_stages=config.num_stages)
    return args


def heuristic_values(heuristics: Sequence[Mapping[str, Callable]], launch: Launch,
                     config: Config) -> dict[str, Any]:
    """name -> value of every heuristic for `config`, the outermost decorator's first. Raises what a
    value function raises (one that reads data, a name the launch lacks)."""
    args = heuristic_args(launch, config)
    out: dict[str, Any] = {}
    for values in heuristics:
        for name, rule in values.items():
            value = rule(args)
            if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:  # a numpy or torch scalar
                value = value.item()
            args[name] = out[name] = value
    return out


LAUNCH_OPTIONS = ("num_warps", "num_stages")  # a heuristic may set these too (FlagGems' softmax: num_warps)


def with_heuristics(launch: Launch, values: Mapping[str, Any]) -> Launch:
    """`launch` with the heuristics' values where it files them: its config's parameters, num_warps and
    num_stages, or its constexprs."""
    if not values:
        return launch
    params = {k: values.get(k, v) for k, v in launch.config.params.items()}
    constexprs = dict(launch.constexprs)
    for name, value in values.items():
        if name not in params and name not in LAUNCH_OPTIONS:
            constexprs[name] = value
    config = Config(params, int(values.get("num_warps", launch.config.num_warps)),
                    int(values.get("num_stages", launch.config.num_stages)))
    return dataclasses.replace(launch, constexprs=tuple(constexprs.items()), config=config)


def overridden_knobs(values: Mapping[str, Any], config: Config) -> set[str]:
    """The knobs of `config` the heuristics set to another value: Triton launches their value, not the
    config's, so `config` is not a config one can choose."""
    knobs = {**config.params, "num_warps": config.num_warps, "num_stages": config.num_stages}
    return {k for k, v in values.items() if k in knobs and knobs[k] != v}
