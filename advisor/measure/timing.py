"""Timing launches on a GPU: CUDA-graph replays (no L2 flush) or per-launch events after an L2 flush.

Both modes warm up first and report the median. The graph mode is what serving engines see for
back-to-back layers; the flush mode is what `triton.testing.do_bench` reports (ANCHORS section 5).
Every result says which mode produced it. A time is only accepted for an output that matched its
reference (`check_output`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass

from ceilings.errors import AdvisorError

GRAPH = "cuda-graph"
FLUSH = "events+l2-flush"


class MeasurementError(AdvisorError):
    """A launch could not be timed: wrong output, no GPU, or a failed launch."""


class WrongResult(MeasurementError):
    """The config ran and computed another result than the reference (the launch's own config)."""


class GPUFault(MeasurementError):
    """The config's launch made the GPU fault (an illegal address, a trap): the process's CUDA context is lost,
    so nothing more runs on the GPU in this process."""


def is_gpu_fault(exc: BaseException) -> bool:
    """Whether `exc` is the CUDA runtime reporting a fault of a kernel (torch raises it as AcceleratorError, or
    RuntimeError on older versions), not a Python error of ours."""
    text = str(exc)
    return type(exc).__name__ in ("AcceleratorError", "RuntimeError") and (
        "CUDA error" in text or "cudaError" in text)


@dataclass(frozen=True)
class Timing:
    us: float                 # median time per launch, microseconds
    mode: str                 # GRAPH or FLUSH
    replays: int              # timed samples behind the median
    launches_per_sample: int  # launches inside one sample (a graph of N launches, or 1)
    min_us: float
    max_us: float

    @property
    def flush_l2(self) -> bool:
        return self.mode == FLUSH

    def describe(self) -> str:
        how = (f"median of {self.replays} CUDA-graph replays x {self.launches_per_sample} launches, no L2 flush"
               if self.mode == GRAPH else f"median of {self.replays} launches, L2 flushed before each")
        return f"{self.us:.2f} us ({how})"

    def to_dict(self) -> dict:
        return asdict(self)


def _require_cuda():
    import torch

    if not torch.cuda.is_available():
        raise MeasurementError("measuring needs a CUDA GPU and torch sees none; run on a GPU machine or use "
                               "the ceiling and prediction commands instead")
    return torch


def relative_error(out, ref) -> float:
    """||out - ref|| / ||ref|| in float64; inf when out has a NaN or inf (e.g. an unwritten element)."""
    out64, ref64 = out.double(), ref.double()
    if not bool(out64.isfinite().all()):
        return float("inf")
    denom = float(ref64.norm())
    return float((out64 - ref64).norm()) / (denom if denom > 0 else 1.0)


def check_output(out, ref, tol: float, what: str = "output") -> float:
    err = relative_error(out, ref)
    if not err <= tol:
        raise WrongResult(f"{what} differs from the reference: relative error {err:.3g} > {tol:g}; "
                          "the config produces a wrong result and is not timed")
    return err


WARMUP_S = 0.05  # the GPU kept busy this long before a timing (do_bench warms for 25 ms)


def warm_until(fn: Callable[[], object], sync: Callable[[], object], clock: Callable[[], float],
               seconds: float) -> int:
    """Call `fn` until `seconds` of wall time have passed, in batches that double, synchronising after each
    (a batch of one slow launch, or thousands of microsecond ones, without syncing after each); the calls."""
    start, calls, batch = clock(), 0, 1
    while True:
        for _ in range(batch):
            fn()
        calls += batch
        sync()
        if clock() - start >= seconds:
            return calls
        batch *= 2


def time_launch(fn: Callable[[], object], *, mode: str = GRAPH, launches_per_graph: int = 10,
                replays: int = 20, warmup: int = 3, flush_bytes: int = 256 << 20,
                warmup_s: float = WARMUP_S) -> Timing:
    """Median time of one call of `fn`, a function that enqueues GPU work and returns without syncing.

    First `warmup` calls and then calls for `warmup_s` seconds: a GPU left idle (while the advisor compiles
    the next config) drops its clock, and three microsecond launches do not raise it again. The likely
    cause, not yet checked on a GPU, of `suggest --measure` timing a 1.4 us launch first at 16.3 us where
    the advice check, timing back to back, read 1.41 us (RESULTS 34c).
    GRAPH: capture `launches_per_graph` calls in one CUDA graph, replay it once to warm, then time
    `replays` replays with CUDA events; per-launch time = replay time / launches_per_graph.
    FLUSH: before each of `replays` calls, overwrite a buffer larger than L2, then time the call alone.
    """
    import time

    if replays < 20:
        raise AdvisorError(f"replays={replays}: at least 20 replays are needed for a stable median")
    torch = _require_cuda()
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    if warmup_s > 0:
        warm_until(fn, torch.cuda.synchronize, time.perf_counter, warmup_s)

    samples: list[float] = []
    if mode == GRAPH:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()  # allocations made on this side stream before capture
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(launches_per_graph):
                fn()
        graph.replay()
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(replays)]
        for start, end in events:
            start.record()
            graph.replay()
            end.record()
        torch.cuda.synchronize()
        samples = [s.elapsed_time(e) * 1e3 / launches_per_graph for s, e in events]
        per_sample = launches_per_graph
        del graph
    elif mode == FLUSH:
        scratch = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda")
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(replays)]
        for start, end in events:
            scratch.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        samples = [s.elapsed_time(e) * 1e3 for s, e in events]
        per_sample = 1
    else:
        raise AdvisorError(f"timing mode {mode!r} is not one of {GRAPH!r}, {FLUSH!r}")
    return Timing(us=statistics.median(samples), mode=mode, replays=replays, launches_per_sample=per_sample,
                  min_us=min(samples), max_us=max(samples))


def one_launch_us(fn: Callable[[], object], least_us: float) -> float:
    """One call of `fn` after one warm call, timed with CUDA events, in us and at least `least_us` (events
    resolve about half a microsecond): what sizes a graph of launches to fill a sample."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()  # warm
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    return max(start.elapsed_time(end) * 1e3, least_us)


def measure_checked(run: Callable[[], object], output, reference, *, tol: float, what: str = "output",
                    **timing) -> tuple[Timing, float]:
    """Poison `output` with NaN, run once, check against `reference`, then time `run`.

    `run` must write `output` in place. Returns the timing and the relative error.
    """
    torch = _require_cuda()
    output.fill_(float("nan"))
    run()
    torch.cuda.synchronize()
    err = check_output(output, reference, tol, what)
    return time_launch(run, **timing), err


def quick_checked(run: Callable[[], object], output, reference, *, tol: float,
                  what: str = "output") -> tuple[float, float]:
    """A screening time: poison, run once and check, then one warm launch timed with events.

    One launch is noisy; use it only to discard configs far slower than a fully timed one.
    """
    torch = _require_cuda()
    output.fill_(float("nan"))
    run()
    torch.cuda.synchronize()
    err = check_output(output, reference, tol, what)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3, err


def gpu_name() -> str:
    torch = _require_cuda()
    return torch.cuda.get_device_name()


def versions() -> dict[str, str]:
    import torch
    import triton

    return {"triton": triton.__version__, "torch": torch.__version__}
