"""Run and time any kernel from its Launch on a GPU: random inputs, every config checked against another.

The launch gives shapes, dtypes and strides, not data: floating tensors get random normal values, small
integer tensors the contents the trace recorded for them (`TensorArg.values`: indices, offsets, routing
tables), larger ones values drawn from the sample of their contents the trace kept (`TensorArg.sample`), other
integer and boolean tensors zeros (a random integer could index out of bounds; zeros where the trace has
contents made a gather kernel read one row, 14x faster than with its real indices, RESULTS 34c). Which tensors a kernel
writes is not known, so after one run from the same inputs every tensor must match the run of the
reference config (the launch's own); a config that changes any of them beyond `tol` is wrong and not
timed. The reference config runs twice first: a tensor its own two runs leave different (atomic adds in
another order, values that overflow where random inputs push them) is checked only as far as the kernel
repeats itself (`run_noise`), so a kernel that is not bit-stable is not called wrong against itself.
Timing is the sweeps' standard (advisor.measure.sweep.STANDARD_TIMING), with more launches per CUDA graph
for a launch of microseconds (`timing_for`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection

from advisor.measure import timing as measure
from ceilings.compile import launch_arguments
from ceilings.errors import AdvisorError
from ceilings.launch import Config, Launch

_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
           "int8": "int8", "uint8": "uint8", "int16": "int16", "int32": "int32", "int64": "int64", "bool": "bool",
           "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}


def elements_spanned(t) -> int:
    """How many elements a tensor's shape and strides reach from its data pointer (its storage at least)."""
    return 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride, strict=True) if s > 0)


def with_config(launch: Launch, made: Launch) -> Launch:
    """The recorded launch (its tensors and scalars) run as `made`, a config's launch: its constexprs (values
    heuristics set from the config), config and grid."""
    return dataclasses.replace(launch, constexprs=made.constexprs, config=made.config, grid=made.grid)


def make_tensors(launch: Launch, seed: int = 0, device: str = "cuda", storage: dict | None = None,
                 zeroed: Collection[str] = ()) -> dict:
    """name -> a tensor in the launch's shape and strides; `storage`, if given, gets each one's flat buffer
    (a view with stride 0, a broadcast bias, cannot be written through: restore copies the buffer).
    Floating tensors named in `zeroed` are zeros (outputs a kernel adds into with atomics, which its host
    zeroes: from random contents a right split-K config reads as wrong); the others keep their values."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    out = {}
    for t in launch.tensors:
        if t.block_shape is not None:
            raise AdvisorError(f"{launch.kernel}: measuring launches with tensor descriptors ({t.name}) from a "
                               "trace is not supported; measure through the kernel's own benchmark")
        if t.dtype not in _DTYPES:
            raise AdvisorError(f"{launch.kernel}: tensor {t.name} has dtype {t.dtype!r}, which cannot be made here")
        dtype = getattr(torch, _DTYPES[t.dtype])
        span = elements_spanned(t)
        if dtype.is_floating_point:
            flat = torch.randn(span, device=device, generator=gen).to(dtype)
            if t.name in zeroed:
                flat.zero_()
        elif t.values is None and t.sample is not None:
            flat = drawn_from_sample(t, span, dtype, gen, device)
        else:
            flat = torch.zeros(span, device=device, dtype=dtype)
            if t.values is not None:  # element i at the data pointer + i (TensorArg.values)
                kept = min(span, len(t.values))
                flat[:kept] = torch.tensor(t.values[:kept], dtype=dtype)
        out[t.name] = torch.as_strided(flat, t.shape, t.stride)
        if storage is not None:
            storage[t.name] = flat
    return out


_DRAW_CHUNK = 1 << 26  # elements drawn at a time: the draw's int64 positions stay at 512 MB


def drawn_from_sample(t, span: int, dtype, gen, device: str):
    """`span` elements like the program's from the tensor's ValueSample (ceilings.launch): drawn with replacement
    from its sampled values, sorted when the program's were; rows that repeat no value when the program's rows
    did not (each row then a random choice of distinct values in the program's range, so a scatter through a
    sort's indices writes each element once). Drawn indices stay inside the program's range."""
    import torch

    sample = t.sample
    flat = torch.empty(span, dtype=dtype, device=device)
    length, count = sample.distinct_rows, sample.high - sample.low + 1
    rows_packed = len(t.shape) >= 2 and t.stride[-1] == 1 and t.stride[-2] == length or len(t.shape) == 1
    if length and rows_packed and span % length == 0 and count <= max(4 * length, 1 << 20):
        per_chunk = max(1, _DRAW_CHUNK // count)
        rows = flat.view(-1, length)
        for start in range(0, rows.shape[0], per_chunk):
            n = min(per_chunk, rows.shape[0] - start)
            keys = torch.rand((n, count), device=device, generator=gen)
            rows[start:start + n] = (keys.argsort(dim=-1)[:, :length] + sample.low).to(dtype)
        return flat
    pool = torch.tensor(sample.values, dtype=dtype, device=device)
    for start in range(0, span, _DRAW_CHUNK):
        n = min(_DRAW_CHUNK, span - start)
        flat[start:start + n] = pool[torch.randint(len(pool), (n,), device=device, generator=gen)]
    if sample.sorted:
        flat = torch.sort(flat.to(torch.uint8)).values.to(dtype) if dtype == torch.bool else torch.sort(flat).values
    return flat


# The share of a tensor's elements that may be finite in one result and not in the other (or nan vs inf) without
# the config being wrong: an output masked by a threshold on a float sum (a top-p nucleus, a min-p floor, a
# top-k cut) flips an element where the sum lands within rounding of the threshold, and another tile or warp
# count sums in another order. Set 8's top-p mask: every config but the launch's own was called wrong on its
# real indices (RESULTS 56); the interpreter flips 1 of 4.9 million elements between BLOCK_V 2048 and 4096. A
# config that computes a part of the output wrongly changes far more than this share.
FLIP_SHARE = 1e-5


def _finite_error(out, ref) -> float:
    """Relative error over the elements finite in both; inf where more than FLIP_SHARE of the elements differ
    in being finite, nan, +inf or -inf (a tensor of fewer than 1 / FLIP_SHARE elements: any one)."""
    out64, ref64 = out.double(), ref.double()
    flips = ((out64.isnan() != ref64.isnan()) | (out64.isposinf() != ref64.isposinf())
             | (out64.isneginf() != ref64.isneginf()))
    if int(flips.sum()) > int(FLIP_SHARE * out64.numel()):
        return float("inf")
    finite = out64.isfinite() & ref64.isfinite()
    return measure.relative_error(out64[finite], ref64[finite])


def run_noise(first: dict, second: dict) -> dict[str, float]:
    """name -> how far two runs of one config differ: 0 bit-identical, else the relative error between
    them (inf: not comparable at all, e.g. different elements overflow)."""
    import torch

    noise = {}
    for name, a in first.items():
        b = second[name]
        if a.dtype.is_floating_point and a.element_size() == 1:  # float8: torch has no nan_to_num (nor isnan) for it
            a, b = a.float(), b.float()
        if torch.equal(a, b) or (a.dtype.is_floating_point and torch.equal(a.isnan(), b.isnan())
                                 and torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))):
            noise[name] = 0.0
        else:
            noise[name] = _finite_error(a, b) if a.dtype.is_floating_point else float("inf")
    return noise


def check_outputs(work: dict, reference: dict, noise: dict, tol: float, what: str) -> None:
    """Raise MeasurementError where `work` differs from the reference run by more than the kernel's own
    run-to-run difference allows; tensors the reference config does not repeat are not checked."""
    import torch

    for name, t in work.items():
        own = noise.get(name, 0.0)
        if own == float("inf"):
            continue  # the launch's own config gives another result each run: nothing to hold a config to
        if not t.dtype.is_floating_point:
            if own == 0.0 and not torch.equal(t, reference[name].to(t.device)):
                raise measure.WrongResult(f"{what}: {name} differs from the reference config's result; "
                                          "not timed")
            continue
        limit = max(tol, 4 * own)  # a kernel that is not bit-stable gets its own spread, with margin
        err = _finite_error(t, reference[name].to(t.device))
        if not err <= limit:
            raise measure.WrongResult(f"{what}: {name} differs from the reference: relative error "
                                      f"{err:.3g} > {limit:g}; the config produces a wrong result and is "
                                      "not timed")


SAMPLE_US = 1000.0        # the least GPU time one timed sample (a graph replay) should hold
MAX_LAUNCHES_PER_GRAPH = 200


def timing_for(go) -> dict:
    """The sweeps' standard timing (advisor.measure.sweep.STANDARD_TIMING) with as many launches per graph
    as fill SAMPLE_US: a launch of a few microseconds timed 10 to a graph carries the graph's own start-up
    in its time and differs by several percent from one timing to the next (RESULTS 21: p90 11% on such
    launches), too much to tell configs 2% apart."""
    from advisor.measure.sweep import STANDARD_TIMING
    from advisor.measure.timing import one_launch_us

    single = one_launch_us(go, least_us=0.5)
    per_graph = int(min(MAX_LAUNCHES_PER_GRAPH, max(STANDARD_TIMING["launches_per_graph"], SAMPLE_US / single)))
    return {**STANDARD_TIMING, "launches_per_graph": per_graph}


def launch_measurer(fn, launch: Launch, launch_of: Callable[[Config], Launch], label: str,
                    tol: float = 1e-2, zeroed: Collection[str] = ()) -> Callable[[Config], float]:
    """config -> median us; the first call's config (or the launch's) is the reference. `launch_of`: the
    launch a config makes, for its grid and its constexprs (values the kernel's heuristics set from the
    config); the tensors and scalars stay the recorded launch's. Tensors named in `zeroed` start every run
    at zero (make_tensors)."""
    import torch

    # What every run starts from and what every config is held to live in host memory: a config that writes past
    # its tensors (a grid too large, a tile past an unmasked edge) can overwrite any GPU allocation beside them,
    # and a reference or starting point so overwritten failed every config timed after it (RESULTS 61: a decode
    # step's in-place state, every config after one bad grid "wrong" by a relative error of 1).
    pristine: dict = {}
    make_tensors(launch, storage=pristine, zeroed=zeroed)
    pristine = {name: flat.cpu() for name, flat in pristine.items()}
    # The same seed again: equal values in the launch's own strides (a clone of a strided view with gaps
    # would come back contiguous, and the kernel indexes by the traced strides).
    buffers: dict = {}
    work = make_tensors(launch, storage=buffers)
    reference: dict = {}
    noise: dict = {}

    def run_once(config: Config):
        made = launch_of(config)
        args, kwargs = launch_arguments(fn, with_config(launch, made), work)
        kwargs.update(num_warps=config.num_warps, num_stages=config.num_stages)
        g = made.grid
        return lambda: fn[g](*args, **kwargs)

    def restore():
        for name, flat in pristine.items():
            buffers[name].copy_(flat)

    def outputs_of(go) -> dict:
        restore()
        go()
        torch.cuda.synchronize()
        return {name: t.clone() for name, t in work.items()}

    def run(config: Config) -> float:
        go = run_once(config)
        try:
            if not reference:
                first = outputs_of(go)
                noise.update(run_noise(first, outputs_of(go)))
                reference.update({name: t.cpu() for name, t in first.items()})
                del first
            else:
                check_outputs(outputs_of(go), reference, noise, tol, f"{label} {config.label()}")
            return measure.time_launch(go, **timing_for(go)).us
        except Exception as exc:
            if measure.is_gpu_fault(exc):  # a grid or config that reads past a tensor: said, never a traceback
                raise measure.GPUFault(f"{label} {config.label()}: the launch made the GPU fault "
                                       f"({str(exc).splitlines()[0]}); the process's CUDA context is lost, so "
                                       "no further config can run on the GPU in it") from None
            raise

    reference_config = launch.config
    run(reference_config)  # the launch's own config sets the reference outputs
    return run
