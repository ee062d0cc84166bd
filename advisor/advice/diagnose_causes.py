"""Causes of `advisor diagnose` that need more of the launch's geometry than the ceiling's demand holds.

**Operand staging through shared memory (Hopper warpgroup MMAs).** A wgmma of shape m64nNk16 reads its
A slice (64 x 16) and its B slice (N x 16) from shared memory each time it issues (both operands in
shared memory, as Triton emits them for tiles it loads itself; PTX ISA, "Asynchronous Warpgroup Level
Matrix Multiply-Accumulate", operand descriptors). Triton spreads a CTA's warpgroups over M first (one
per 64 rows) and over N only when BLOCK_M runs out, so each instruction is N = BLOCK_N / (warpgroups
along N) wide, and every 64-row slice of the tile re-reads all of B. The tiles are also written once
into shared memory (cp.async or TMA) per K step. An SM's shared memory moves 128 B per clock against
the tensor pipe's 4096 dense 16-bit FLOP per clock (ANCHORS section 4; NVIDIA H100 whitepaper): 32 FLOP
per byte, a ratio that does not depend on the clock. A 128 x 256 tile on two warpgroups sits at exactly
32 FLOP per staged byte; a narrower instruction or a 64-row tile needs more bytes per FLOP, and the
loop then runs at shared memory's pace, not the tensor pipe's.

Warp-level MMAs (mma.sync m16n8k16, Triton's layout for tiles under 64 rows or warps not in fours)
read operands with ldmatrix: each warp its rows of A and its columns of B, so A is read once per warp
along N and B once per warp along M. They issue at `GPUSpec.mma_sync_fraction` of the warpgroup rate,
so shared memory feeds them that fraction of 32 FLOP per byte.

Shared memory runs on the SM clock, and under back-to-back tensor load that clock drops: the same
compute-bound fused-MoE launch took 1.37 ms alone and 1.67 ms back to back (ANCHORS section 6, an
H100; the H200 has the same GH100 SM and clocks, an assumption noted on its diagnoses). So shared
memory is taken at 128 B/clock x the boost clock x 1.37 / 1.67, against the tensor work at its
calibrated sustained rate. The cause is the busiest SM's staged bytes at that rate past the binding
work already counted (padding and the tail included); without BLOCK_M/N/K tiles it is not estimated.

**DRAM writes.** The ideal charges every compulsory DRAM byte at the read probe's rate; a stream that
writes as many bytes as it reads runs slower (the calibration's read/write probe), and the difference is
what a written byte costs beyond a read one (`dram_writes`). The output bytes are the real ones (tile
padding is masked out of the stores). torch's `copy_` is not the probe: it moved the same bytes 19% slower
than a plain load-and-store stream on the H100, and the read/write mixes of real kernels ran at 0.93-0.99 of
the read rate (benchmarks/RESULTS.md sections 63-64), so the copy is slow, not the writes. A calibration
without the read/write probe (an older `advisor calibrate` wrote it) borrows both rates from the shipped
calibration of the same GPU, with a note; without either the cause is not estimated.
"""

from __future__ import annotations

import functools
import math

WGMMA_M = 64        # rows of one wgmma instruction (PTX ISA: m64nNk16)
WGMMA_MAX_N = 256   # widest N of one wgmma instruction (PTX ISA)
WARPS_PER_WARPGROUP = 4
# The SM clock under sustained tensor load over the clock of a single launch: 1.37 ms single against
# 1.67 ms back to back for the same launch (ANCHORS section 6, H100, Nsight Compute 2025.3).
SUSTAINED_CLOCK_FRACTION = {90: 1.37 / 1.67}


def wgmma_layout(block_m: int, block_n: int, num_warps: int) -> tuple[int, int]:
    """(warpgroups along M, instruction N) as Triton places warpgroups: along M first, one per 64 rows."""
    block_m, block_n = int(block_m), int(block_n)
    groups = max(1, num_warps // WARPS_PER_WARPGROUP)
    along_m = max(1, min(groups, block_m // WGMMA_M))
    along_n = max(1, groups // along_m)
    return along_m, min(WGMMA_MAX_N, max(8, block_n // along_n))


def mma_sync_layout(block_m: int, block_n: int, num_warps: int) -> tuple[int, int]:
    """(warps along M, warps along N) of warp-level MMAs (m16n8k16) as Triton places them
    (warpsPerTileV2 of lib/Dialect/TritonGPU/Transforms/AccelerateMatmul.cpp; the TTGIR's
    `nvidia_mma<{versionMajor = 2, warpsPerCTA = ...}>` agrees, tests/test_diagnose_causes.py)."""
    along_m, along_n = 1, 1
    while along_m * along_n < num_warps:
        if block_m // 16 // along_m >= block_n // 16 // along_n and along_m < block_m // 16:
            along_m *= 2
        else:
            along_n *= 2
    return along_m, along_n


def staged_bytes_per_k_step(block_m: int, block_n: int, block_k: int, num_warps: int, size: int,
                            kind: str = "wgmma", dots: int = 1) -> float:
    """Shared-memory bytes one K step of one CTA moves: the A and B tiles written once, then read by
    the MMAs: every wgmma's A and B slices (64-row slices x instructions across N), or every warp's
    rows of A and columns of B (ldmatrix) for warp-level MMAs. `dots`: the tile's N split over that
    many dots of one A tile (each reads A again)."""
    block_m, block_n, block_k = int(block_m), int(block_n), int(block_k)
    written = (block_m + block_n) * block_k * size
    if dots > 1:
        one = staged_bytes_per_k_step(block_m, block_n // dots, block_k, num_warps, size, kind)
        return float(written + dots * (one - (block_m + block_n // dots) * block_k * size))
    if kind == "wgmma":
        _, inst_n = wgmma_layout(block_m, block_n, num_warps)
        slices = math.ceil(block_m / WGMMA_M)
        read = slices * math.ceil(block_n / inst_n) * (WGMMA_M + inst_n) * block_k * size
    else:
        along_m, along_n = mma_sync_layout(block_m, block_n, num_warps)
        read = (block_m * along_n + block_n * along_m) * block_k * size
    return float(written + read)


def operand_staging(tiles: tuple[int, int, int], num_warps: int, kind: str, size: int, trips: float,
                    busiest_ctas: int, smem_rate_per_sm: float, tensor_rate_per_sm: float, busiest_main_us: float,
                    dots: int = 1):
    """(estimate in us, reason) of the busiest SM waiting on shared memory for MMA operands: its staged
    bytes at `smem_rate_per_sm` (bytes/s) past its binding work; `tensor_rate_per_sm` (FLOP/s of this
    MMA kind) only sets the FLOP per byte the text compares against."""
    bm, bn, bk = (int(t) for t in tiles)
    per_step = staged_bytes_per_k_step(bm, bn, bk, num_warps, size, kind, dots)
    staged_us = busiest_ctas * trips * per_step / smem_rate_per_sm * 1e6
    intensity = 2 * bm * bn * bk / per_step
    if kind == "wgmma":
        along_m, inst_n = wgmma_layout(bm, bn // dots, num_warps)
        how = (f"{math.ceil(bm / WGMMA_M)} row slice(s) x m64n{inst_n}k16 reads; {along_m} warpgroup(s) "
               "along M" + (f"; {dots} dots over one A tile" if dots > 1 else ""))
    else:
        along_m, along_n = mma_sync_layout(bm, bn, num_warps)
        how = f"warp-level MMAs on {along_m} x {along_n} warps, each reading its rows and columns"
    why = (f"{per_step / 1024:.0f} KB of shared memory per K step (tiles written, then {how}): "
           f"{intensity:.1f} FLOP per byte against the {tensor_rate_per_sm / smem_rate_per_sm:.1f} shared memory "
           f"feeds the tensor pipe at the sustained clock; busiest SM {staged_us:.1f} us of staging against "
           f"{busiest_main_us:.1f} us of work")
    return max(0.0, staged_us - busiest_main_us), why


# ---------------------------------------------------------------------------------------- DRAM writes

@functools.lru_cache(maxsize=32)
def calibrated_values(calibration_path: str | None, keys: tuple[str, ...]) -> tuple[float, ...] | None:
    """The calibration file's values under `keys`, as stored; None without the file or any of them."""
    from pathlib import Path

    from ceilings.hardware import Calibration

    if not calibration_path:
        return None
    values = Calibration.from_json(Path(calibration_path).read_text(), calibration_path).values
    if any(k not in values for k in keys):
        return None
    return tuple(values[k] for k in keys)


def calibrated_rates(calibration_path: str | None, keys: tuple[str, ...]) -> tuple[float, ...] | None:
    """The calibration file's rates under `keys` (TB/s) in bytes/s, None without the file or any of them."""
    values = calibrated_values(calibration_path, keys)
    return None if values is None else tuple(v * 1e12 for v in values)


def values_here_or_shipped(calibration_path: str | None, keys: tuple[str, ...]) -> tuple[tuple[float, ...], str] | None:
    """The values under `keys` (as stored) from the calibration in use, or, where it lacks any of them (one an older
    `advisor calibrate` wrote), from the shipped calibration of the same GPU (the file of the same name), with the
    path of the file they came from; None where neither has them all. The values of one file were measured
    together, so they are never mixed across files."""
    from pathlib import Path

    from ceilings.hardware import SHIPPED_CALIBRATIONS

    if not calibration_path:
        return None
    values = calibrated_values(calibration_path, keys) if Path(calibration_path).exists() else None
    if values is not None:
        return values, calibration_path
    shipped = SHIPPED_CALIBRATIONS / Path(calibration_path).name
    if not shipped.exists() or shipped.resolve() == Path(calibration_path).resolve():
        return None
    values = calibrated_values(str(shipped), keys)
    return None if values is None else (values, str(shipped))


def load_latency_cycles(calibration_path: str | None, documented: dict[str, float] | None,
                        clock_hz: float) -> tuple[dict[str, float] | None, str | None]:
    """Load-to-use latency of an L2 hit and of a DRAM access, in cycles at `clock_hz`: measured on this GPU
    (`advisor calibrate`'s pointer chase, ns) where the calibration in use, or else the shipped one of the same GPU,
    has both, with that file's path; otherwise the documented figures of the GPU's architecture and None."""
    found = values_here_or_shipped(calibration_path, ("l2_latency_ns", "dram_latency_ns"))
    if found is None:
        return documented, None
    (l2_ns, dram_ns), source = found
    return {"l2": l2_ns * 1e-9 * clock_hz, "dram": dram_ns * 1e-9 * clock_hz}, source


def read_write_rates(calibration_path: str | None) -> tuple[float, float, str | None] | None:
    """(read/write stream, read) DRAM rates in bytes/s from a calibration file (`advisor calibrate`'s
    read/write and read probes) and None, or, where that file has no read/write probe (one an older
    `advisor calibrate` wrote), both rates from the shipped calibration of the same GPU and its path: a
    written byte's cost over a read one is the GPU's, and the two rates of one file were measured together.
    None where neither has both probes."""
    found = values_here_or_shipped(calibration_path, ("dram_rw_tbs", "dram_read_tbs"))
    if found is None:
        return None
    (rw_tbs, read_tbs), source = found
    return rw_tbs * 1e12, read_tbs * 1e12, (None if source == calibration_path else source)


def dram_writes(written_bytes: float, rw_rate: float, read_rate: float, dram_us: float,
                busiest_main_us: float) -> tuple[float, str]:
    """(estimate in us, reason) of output bytes costing more on the DRAM bus than the read rate the ideal
    charges them at. The read/write probe moves S bytes read and S written in 2S / rw; with the reads at
    the read probe's rate, a written byte costs 2 / rw - 1 / read (a linear cost per byte on one bus whose
    turnarounds between reads and writes cost time). The extra over 1 / read counts past the busiest SM's
    binding work (it shows only where DRAM, so lengthened, binds)."""
    per_byte = max(0.0, 2.0 / rw_rate - 2.0 / read_rate)
    extra_us = written_bytes * per_byte * 1e6
    # A stream at the read rate or faster leaves a written byte no dearer than a read (and 2 / rw - 1 / read
    # would not be a rate past twice the read rate).
    price = f"{1.0 / (2.0 / rw_rate - 1.0 / read_rate) / 1e12:.2f} TB/s" if per_byte > 0 else "the read rate"
    why = (f"{written_bytes / 1e6:.1f} MB of output written at {price} (the calibration's read/write probe "
           f"{rw_rate / 1e12:.2f} TB/s over reads at {read_rate / 1e12:.2f}): {extra_us:.1f} us more than at the "
           f"read rate; DRAM {dram_us + extra_us:.1f} us against {busiest_main_us:.1f} us of binding work")
    return max(0.0, min(extra_us, dram_us + extra_us - busiest_main_us)), why


def atomic_rates(calibration_path: str | None) -> tuple[float, float] | None:
    """(into a buffer that fits in L2, into one far larger) float32 atomic-add rates in bytes/s from a
    calibration file (`advisor calibrate`'s atomics probe), None without them."""
    return calibrated_rates(calibration_path, ("atomic_add_l2_tbs", "atomic_add_dram_tbs"))


def atomics(added_bytes: float, footprint_bytes: float, l2_bytes: int, rates: tuple[float, float]
            ) -> tuple[float, str]:
    """(estimate in us, reason) of a launch's atomic adds (a fused-MoE GEMM2 summing a token's top-k rows):
    the bytes its reduction instructions add, at the rate the calibration's probe added bytes into a buffer
    of the same side of the L2 (the probe: relaxed float32 adds in contiguous runs, as a GEMM's output
    tile, 3.2 TB/s into L2 on the H100 against 2.8 past it; benchmarks/atomic_probe.py). Counted in full,
    an upper bound where the SMs work on under it: over the same fp8 GEMM2 storing its rows instead, the
    adds cost 0.2-2.5 of this estimate, a median of about 0.6 (RESULTS 43)."""
    in_l2 = footprint_bytes <= l2_bytes
    rate = rates[0] if in_l2 else rates[1]
    us = added_bytes / rate * 1e6
    side = "within" if in_l2 else "past"
    why = (f"{added_bytes / 1e6:.0f} MB added by atomics into {footprint_bytes / 1e6:.1f} MB ({side} the "
           f"{l2_bytes / 1e6:.0f} MB L2) at the atomic-add probe's {rate / 1e12:.2f} TB/s: {us:.1f} us (every lane "
           "the instructions cover, masked rows too)")
    return us, why


def atomic_bytes(opcode: str, mods: str) -> int:
    """Bytes one warp adds with a global reduction or atomic (RED, REDG, ATOM, ATOMG; not shared ATOMS): 32
    lanes x the operand's width, a vector form counted whole (REDG.E.ADD.F32x4: 16 bytes a lane)."""
    from ceilings.sass_map import lane_bytes

    return 32 * lane_bytes(mods) if opcode in ("RED", "REDG", "ATOM", "ATOMG") else 0
