"""`advisor calibrate`: measure a GPU's sustained rates and write its calibration file.

Each rate probe runs back to back in a CUDA graph (advisor.measure.timing, median of 20 replays, no L2 flush)
on random data, after a warm-up; the load-latency probe times single chases with CUDA events, the L2 flushed before
each DRAM one. Results go to $TRITON_ADVISOR_HOME/calibration (default
~/.cache/triton-advisor/calibration) or --out, as `ceilings.hardware.Calibration` JSON.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from advisor.measure import timing as measure
from ceilings.errors import AdvisorError
from ceilings.hardware import CALIBRATION_KEYS, Calibration, calibration_file_name, calibration_home, get_spec


def _graph_us(fn, launches: int = 10) -> float:
    return measure.time_launch(fn, launches_per_graph=launches, replays=20).us


def probe_dram(torch) -> dict:
    src = torch.randn(1 << 29, device="cuda")  # 2 GiB of fp32, 40x an H100's L2
    dst = torch.empty_like(src)
    out = torch.empty(1, device="cuda")
    read_us = _graph_us(lambda: torch.sum(src, dim=0, keepdim=True, out=out), 5)
    copy_us = _graph_us(lambda: dst.copy_(src), 5)
    return {"dram_read_tbs": src.numel() * 4 / read_us / 1e6, "dram_copy_tbs": 2 * src.numel() * 4 / copy_us / 1e6,
            "dram_rw_tbs": probe_dram_read_write(torch, src, dst)}


def probe_dram_read_write(torch, src, dst) -> float:
    """Bytes read + written per second by a stream that writes as many bytes as it reads (`src` and `dst` far
    larger than L2), the fastest of a few shapes. torch's `copy_` moved the same bytes 19% slower than such a
    stream on the H100 (benchmarks/RESULTS.md section 64), so it does not price a written byte."""
    from kernels.probes import read_write_kernel

    n = src.numel()
    if n % 4096:  # the kernel has no mask: every shape's blocks must tile the buffer
        raise AdvisorError(f"the DRAM read/write probe needs a multiple of 4096 elements, not {n}")
    best = 0.0
    for block, warps in ((1024, 4), (2048, 8), (4096, 8)):
        dst.fill_(float("nan"))
        read_write_kernel[(n // block,)](src, dst, BLOCK=block, num_warps=warps)
        if not bool(torch.equal(dst, src + 1.0)):
            raise AdvisorError("the DRAM read/write probe stored wrong values; the GPU or Triton is misbehaving")
        us = _graph_us(lambda b=block, w=warps: read_write_kernel[(n // b,)](src, dst, BLOCK=b, num_warps=w), 5)
        best = max(best, 2 * n * 4 / us / 1e6)
    return best


def probe_l2(torch, l2_bytes: int) -> dict:
    from kernels.probes import read_kernel

    n = 1 << ((l2_bytes // 16).bit_length() - 1)  # fp32 elements in at most a quarter of L2, a power of 2
    buf = torch.randn(n, device="cuda")
    best = 0.0
    programs, passes = 132 * 8, 64
    for block, warps in ((2048, 8), (4096, 8), (1024, 4)):  # the fastest of a few shapes
        out = torch.empty(programs, device="cuda")
        us = _graph_us(lambda b=block, w=warps, o=out: read_kernel[(programs,)](
            buf, o, n - 1, PASSES=passes, BLOCK=b, num_warps=w))
        best = max(best, programs * passes * block * 4 / us / 1e6)
    return {"l2_read_tbs": best}


def probe_atomics(torch, l2_bytes: int) -> dict:
    """float32 atomic adds (relaxed, result unused) into a buffer of a quarter of L2 and into one of 1 GiB:
    bytes added per second, the best of a few program shapes."""
    from kernels.probes import atomic_add_kernel

    programs, passes = 132 * 8, 16
    out = {}
    for key, elements in (("atomic_add_l2_tbs", 1 << ((l2_bytes // 16).bit_length() - 1)),
                          ("atomic_add_dram_tbs", 1 << 28)):
        buf = torch.zeros(elements, device="cuda")
        rates = []
        for block, warps in ((1024, 4), (2048, 8), (512, 4)):
            us = _graph_us(lambda b=block, w=warps, buf=buf, n=elements: atomic_add_kernel[(programs,)](
                buf, 1.0, n - 1, PASSES=passes, BLOCK=b, num_warps=w), 5)
            rates.append(programs * passes * block * 4 / us / 1e6)
        out[key] = max(rates)
        del buf
    return out


def probe_load_latency(torch, l2_bytes: int, hops: int = 4096, runs: int = 7) -> dict:
    """Load-to-use latency of one load at a time, ns: a single thread chasing a ring of `hops` nodes over 16 MiB,
    one node per 4 KiB (no two share a line; the ring's few large pages stay in the TLB), after a warm chase
    (L2 hits) and after a write of 4x the L2 that flushes it (DRAM accesses). Median of `runs` chases timed with
    CUDA events; a chase of ~1 ms makes the launch (a few us) negligible. `advisor diagnose` prices the latency
    of the K loop's fill and of too few bytes in flight with it (benchmarks/RESULTS.md section 65)."""
    from kernels.probes import pointer_chase_kernel

    ring, order = chase_ring(torch, 16 << 20)
    ring = ring.to("cuda")
    out = torch.empty(1, dtype=torch.int64, device="cuda")
    flush = torch.empty(l2_bytes, dtype=torch.float32, device="cuda")  # 4 bytes each: 4x the L2
    start = int(order[0])
    pointer_chase_kernel[(1,)](ring, out, start, hops - 1, num_warps=1)
    if int(out.item()) != int(order[(hops - 1) % order.numel()]):
        raise AdvisorError("the load-latency probe ended on the wrong node; the GPU or Triton is misbehaving")
    result = {}
    for key, flushed in (("l2_latency_ns", False), ("dram_latency_ns", True)):
        per_hop = []
        for run in range(runs):
            if flushed:
                flush.fill_(float(run))
            else:
                pointer_chase_kernel[(1,)](ring, out, start, hops, num_warps=1)  # the chase's nodes into L2
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            pointer_chase_kernel[(1,)](ring, out, start, hops, num_warps=1)
            end.record()
            end.synchronize()
            per_hop.append(begin.elapsed_time(end) * 1e6 / hops)
        result[key] = sorted(per_hop)[len(per_hop) // 2]
    return result


def chase_ring(torch, ring_bytes: int, node_bytes: int = 4096, seed: int = 11):
    """A ring of int64 element indices over `ring_bytes`, one node per `node_bytes` in a random order: (the ring,
    its nodes' indices in the order a chase visits them)."""
    span, stride = ring_bytes // 8, node_bytes // 8
    order = torch.randperm(span // stride, generator=torch.Generator().manual_seed(seed)) * stride
    ring = torch.zeros(span, dtype=torch.int64)
    ring[order] = torch.roll(order, -1)
    return ring, order


def probe_tensor(torch) -> dict:
    n = 8192
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    us = _graph_us(lambda: torch.matmul(a, b, out=c), 10)
    result = {"tensor_bf16_tflops": 2 * n**3 / us / 1e6}
    if hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm"):
        try:
            a8 = a.to(torch.float8_e4m3fn)
            b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()
            one = torch.ones((), device="cuda")
            us8 = _graph_us(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), 10)
            result["tensor_fp8_tflops"] = 2 * n**3 / us8 / 1e6
        except (RuntimeError, TypeError):
            pass  # no fp8 GEMM on this GPU or torch
    return result


def probe_fma_xu(torch) -> dict:
    from kernels.probes import exp2_chain_kernel, fma_chain_kernel

    block, programs, iters = 1024, 132 * 64, 256
    out = torch.empty(programs * block, device="cuda")
    fma_us = _graph_us(lambda: fma_chain_kernel[(programs,)](out, 0.999, 0.001, ITERS=iters, BLOCK=block,
                                                              num_warps=8))
    xu_us = _graph_us(lambda: exp2_chain_kernel[(programs,)](out, 0.5, ITERS=iters, BLOCK=block, num_warps=8))
    elements = programs * block
    return {"fma_fp32_tflops": elements * iters * 4 * 2 / fma_us / 1e6, "xu_gops": elements * iters * 4 / xu_us / 1e3}


def probe_launch(torch) -> dict:
    from kernels.probes import empty_kernel

    out = torch.empty(1, device="cuda")
    return {"launch_us": _graph_us(lambda: empty_kernel[(1,)](out, 0), 20)}


def calibrate(out_dir: str | Path | None = None) -> tuple[Calibration, Path]:
    import torch
    import triton

    if not torch.cuda.is_available():
        raise AdvisorError("`advisor calibrate` measures a GPU and torch sees none; run it on the GPU to calibrate")
    name = torch.cuda.get_device_name()
    spec = get_spec(name)
    values: dict[str, float] = {}
    l2_bytes = spec.l2_bytes or 50 << 20
    for probe in (probe_launch, probe_dram, lambda t: probe_l2(t, l2_bytes), probe_tensor, probe_fma_xu,
                  lambda t: probe_atomics(t, l2_bytes), lambda t: probe_load_latency(t, l2_bytes)):
        values.update(probe(torch))
        torch.cuda.empty_cache()
    values = {k: round(v, 4) for k, v in values.items() if k in CALIBRATION_KEYS}
    measured = {"date": dt.date.today().isoformat(), "gpu": name, "torch": torch.__version__,
                "triton": triton.__version__, "timing": "CUDA graph, median of 20 replays, no L2 flush",
                "probes": {k: CALIBRATION_KEYS[k] for k in values}}
    cal = Calibration(gpu=spec.name, values=values, measured=measured)
    folder = Path(out_dir) if out_dir else calibration_home()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / calibration_file_name(spec.name)
    path.write_text(cal.to_json())
    return cal, path


# The short sweep behind `advisor calibrate --tune`: a few minutes of the two main families.
TUNE_SWEEP = (("moe", {"shapes": "mixtral-8x7b:2,qwen3-30b-a3b:4", "ms": "1,64,1024", "gemms": "1,2", "sample": 24}),
              ("gemm", {"shapes": "4096:4096,14336:4096", "ms": "64,1024,8192", "sample": 16}))


def short_sweep(out_dir: str | Path, deadline_s: float = 240.0) -> list[Path]:
    """Measure the tuning sweep on this GPU (resumable CSVs in out_dir); returns the CSV paths."""
    from advisor.measure.collect import collect

    paths = []
    for family, options in TUNE_SWEEP:
        summary = collect(family, out_dir, deadline_s=deadline_s / len(TUNE_SWEEP), **options)
        paths.append(Path(summary["csv"]))
    return paths


def tune_model(sweeps: list[str | Path], gpu: str | None = None, out_dir: str | Path | None = None) -> Path:
    """Fine-tune the shipped latency model on one GPU's sweep CSVs; write it where `model_for` finds it."""
    from advisor.model.dataset import load_sweeps
    from advisor.model.predict import LatencyModel, fine_tune, tuned_model_dir

    missing = [str(p) for p in sweeps if not Path(p).exists()]
    if missing:
        raise AdvisorError(f"sweep file {missing[0]} does not exist; give CSVs from `advisor collect`")
    data = load_sweeps(sweeps)
    gpus = sorted(set(data.gpu))
    if gpu:
        name = get_spec(gpu).name
        keep = [g == name for g in data.gpu]
        import numpy as np

        data = data.subset(np.array(keep))
    elif len(gpus) != 1:
        raise AdvisorError(f"the sweeps hold points of {', '.join(gpus) or 'no GPU'}; choose one with --gpu")
    else:
        name = gpus[0]
    model = fine_tune(LatencyModel.load(boosters=True), data)
    folder = Path(out_dir) if out_dir else tuned_model_dir(name)
    return model.save(folder)


if __name__ == "__main__":
    import sys

    calibration, written = calibrate(sys.argv[1] if len(sys.argv) > 1 else None)
    print(json.dumps(calibration.values, indent=2), "->", written)
