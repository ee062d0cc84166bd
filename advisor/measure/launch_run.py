"""Run and time any kernel from its Launch on a GPU: random inputs, every config checked against another.

The launch gives shapes, dtypes and strides, not data: floating tensors get random normal values,
integer and boolean tensors zeros (a random integer could index out of bounds). Which tensors a kernel
writes is not known, so after one run from the same inputs every tensor must match the run of the
reference config (the launch's own); a config that changes any of them beyond `tol` is wrong and not
timed. Timing is the sweeps' standard (advisor.measure.sweep.STANDARD_TIMING).
"""

from __future__ import annotations

from collections.abc import Callable

from advisor.measure import timing as measure
from ceilings.compile import launch_arguments
from ceilings.errors import AdvisorError
from ceilings.launch import Config, Launch

_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
           "int8": "int8", "uint8": "uint8", "int16": "int16", "int32": "int32", "int64": "int64", "bool": "bool",
           "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}


def make_tensors(launch: Launch, seed: int = 0) -> dict:
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed)
    out = {}
    for t in launch.tensors:
        if t.block_shape is not None:
            raise AdvisorError(f"{launch.kernel}: measuring launches with tensor descriptors ({t.name}) from a "
                               "trace is not supported; measure through the kernel's own benchmark")
        if t.dtype not in _DTYPES:
            raise AdvisorError(f"{launch.kernel}: tensor {t.name} has dtype {t.dtype!r}, which cannot be made here")
        dtype = getattr(torch, _DTYPES[t.dtype])
        span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride, strict=True) if s > 0)
        if dtype.is_floating_point:
            flat = torch.randn(span, device="cuda", generator=gen).to(dtype)
        else:
            flat = torch.zeros(span, device="cuda", dtype=dtype)
        out[t.name] = torch.as_strided(flat, t.shape, t.stride)
    return out


def launch_measurer(fn, launch: Launch, grid: Callable[[Config], tuple[int, ...]], label: str,
                    tol: float = 1e-2) -> Callable[[Config], float]:
    """config -> median us; the first call's config (or the launch's) is the reference."""
    import torch

    pristine = make_tensors(launch)
    # The same seed again: equal values in the launch's own strides (a clone of a strided view with gaps
    # would come back contiguous, and the kernel indexes by the traced strides).
    work = make_tensors(launch)
    reference: dict = {}

    def run_once(config: Config):
        args, kwargs = launch_arguments(fn, launch.with_config(config), work)
        kwargs.update(num_warps=config.num_warps, num_stages=config.num_stages)
        g = grid(config)
        return lambda: fn[g](*args, **kwargs)

    def restore():
        for name, t in pristine.items():
            work[name].copy_(t)

    def run(config: Config) -> float:
        restore()
        go = run_once(config)
        go()
        torch.cuda.synchronize()
        if not reference:
            reference.update({name: t.clone() for name, t in work.items()})
        else:
            for name, t in work.items():
                if t.dtype.is_floating_point:
                    measure.check_output(t, reference[name], tol, f"{label} {config.label()}: {name}")
                elif not torch.equal(t, reference[name]):
                    raise measure.MeasurementError(f"{label} {config.label()}: {name} differs from the "
                                                   "reference config's result; not timed")
        from advisor.measure.sweep import STANDARD_TIMING

        return measure.time_launch(go, **STANDARD_TIMING).us

    reference_config = launch.config
    run(reference_config)  # the launch's own config sets the reference outputs
    return run
