"""The one check every config passes before a model sees it: can Triton build and launch it on this GPU?

Every config that enters `advisor suggest`, `apply`, `ceiling` or `predict` (the current config of a
launch, each config of a searched space, a `--config`) goes through `config_problem` first, so a
config that cannot run never reaches the demand models, the roofline or the latency model, which
would give it a finite (and wrong) time. Two kinds of limit:

- Triton's own rules, true of any kernel: block sizes are powers of two (`tl.arange` and the layouts
  need them) of at most TRITON_MAX_TENSOR_NUMEL elements per block; num_warps a power of two within
  the 1024 threads of a block; num_stages at least 1.
- The kernel's resources on this GPU: the family's precheck (shared memory of its pipeline buffers,
  registers of its accumulator), passed in by the caller, which knows the kernel.

After the roofline, `launch_problem` catches what only occupancy shows: a CTA that needs more shared
memory or registers than one SM has, so no CTA can launch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from ceilings.errors import AdvisorError
from ceilings.hardware import GPUSpec
from ceilings.launch import Config
from ceilings.roofline import PIPELINES, Ceiling

# triton.language.core.TRITON_MAX_TENSOR_NUMEL (Triton 3.x): the most elements one block may hold.
TRITON_MAX_TENSOR_NUMEL = 1 << 20
# CUDA C++ Programming Guide, "Technical Specifications per Compute Capability": 1024 threads per block
# on every architecture the advisor models (sm_80 .. sm_100).
MAX_THREADS_PER_BLOCK = 1024

# Block-size meta-parameters: BLOCK, BLOCK_M, BLOCK_SIZE_M, TILE_N, BLOCK_SIZE (any case).
_TILE = re.compile(r"^(BLOCK|TILE)(_SIZE)?(_[A-Z0-9]+)?$", re.I)
_GROUP = re.compile(r"^GROUP(_SIZE)?(_[A-Z0-9]+)?$", re.I)

Precheck = Callable[[Config], "str | None"]


def is_tile_param(name: str) -> bool:
    return bool(_TILE.match(name))


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def structural_problem(config: Config) -> str | None:
    """Why Triton cannot build `config` for any kernel and GPU (block sizes, warps), or None."""
    threads = config.num_warps * 32
    if threads > MAX_THREADS_PER_BLOCK:
        return (f"num_warps={config.num_warps} is {threads} threads, over the {MAX_THREADS_PER_BLOCK} a block may "
                "have; use num_warps of at most 32")
    if config.num_stages < 1:
        return f"num_stages={config.num_stages} must be at least 1"
    tiles: dict[str, int] = {}
    for name, value in config.params.items():
        # A bool under a block-like name (BLOCK_SCALED, TILE_EVEN) is a flag, not a size.
        if is_tile_param(name) and not isinstance(value, bool):
            if not _is_int(value) or value < 1:
                return f"{name}={value!r} must be a positive integer (a block size)"
            if value & (value - 1):
                return f"{name}={value} is not a power of two, which Triton needs for a block size"
            if value > TRITON_MAX_TENSOR_NUMEL:
                return (f"{name}={value} is over Triton's {TRITON_MAX_TENSOR_NUMEL} elements per block; "
                        "use a smaller block")
            tiles[name] = value
        elif _GROUP.match(name) and (not _is_int(value) or value < 1):
            return f"{name}={value!r} must be a positive integer (blocks per group)"
    # The tiles of one tl.dot (its operands M x K, K x N and its accumulator M x N) are single blocks.
    by_axis = {n.rsplit("_", 1)[-1].upper(): v for n, v in tiles.items() if "_" in n}
    for a, b in (("M", "N"), ("M", "K"), ("K", "N")):
        if a in by_axis and b in by_axis and by_axis[a] * by_axis[b] > TRITON_MAX_TENSOR_NUMEL:
            return (f"a {by_axis[a]} x {by_axis[b]} ({a} x {b}) tile is over Triton's {TRITON_MAX_TENSOR_NUMEL} "
                    "elements per block; use smaller blocks")
    return None


def config_problem(config: Config, spec: GPUSpec, precheck: Precheck | None = None) -> str | None:
    """Why `config` cannot run on `spec` (Triton's rules, then the kernel's resource precheck), or None."""
    why = structural_problem(config)
    if why or precheck is None:
        return why
    try:
        return precheck(config)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        # A precheck reads the kernel's own parameters; a config without them (or with a non-number)
        # is not one of this kernel's configs.
        missing = f"does not set {exc.args[0]}" if isinstance(exc, KeyError) else f"has a bad value ({exc})"
        return f"the config {missing}, which the kernel needs"


def launch_problem(ceiling: Ceiling, spec: GPUSpec) -> str | None:
    """Why a launch whose ceiling was computed cannot start: no CTA fits on an SM (occupancy 0)."""
    if ceiling.ctas_per_sm > 0 or not ceiling.active_ctas:
        return None
    demand = ceiling.demand
    if demand is not None and demand.shared_bytes is not None and demand.shared_bytes + 1024 > spec.smem_per_sm:
        return (f"a CTA needs {demand.shared_bytes} B of shared memory, over the {spec.smem_per_sm} B an SM of "
                f"{spec.name} has")
    if demand is not None and demand.registers:
        return (f"a CTA of {demand.warps_per_cta} warps at {demand.registers} registers per thread does not fit "
                f"the {spec.registers_per_sm} registers of an SM of {spec.name}")
    return f"a CTA does not fit on an SM of {spec.name} (registers or shared memory)"


def unrunnable_ceiling(spec: GPUSpec, kernel: str, config: Config, reason: str) -> Ceiling:
    """The stand-in ceiling of a config that cannot run: no time (infinite), no binding pipeline, the
    reason as its note. Nothing computes a time from it; it lets a report show the config beside the
    configs that can run."""
    return Ceiling(gpu=spec.name, kernel=kernel, config=config.to_dict(), ceiling_us=math.inf, binding="cannot run",
                   pipelines={p: None for p in PIPELINES}, ctas=0, active_ctas=0, waves=math.inf, ctas_per_sm=0,
                   rates_source={}, demand_source="none: the config cannot run", notes=[reason])


def require_runnable(config: Config, spec: GPUSpec, precheck: Precheck | None = None, what: str = "the config",
                     ceiling: Ceiling | None = None) -> None:
    """Raise an AdvisorError (exit 2) when `config` cannot run on `spec`: a ceiling or a prediction of
    it would be a time for a launch that never happens. With `ceiling`, also its occupancy."""
    why = config_problem(config, spec, precheck) or (launch_problem(ceiling, spec) if ceiling else None)
    if why:
        raise AdvisorError(f"{what}: {config.label()} cannot run on {spec.name} ({why}), so it has no ceiling; "
                           "give a config that fits (`advisor suggest` ranks those that do)")
