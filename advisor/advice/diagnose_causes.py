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

The shared-memory rate is taken at the clock the calibrated tensor rate implies (calibrated tensor
rate / 32 FLOP per byte): the calibration GEMM (torch.matmul 8192^3, RESULTS section 4) runs tiles at
or under that ratio, so this is the least shared-memory rate consistent with it. The cause is the
busiest SM's staged bytes at that rate past the binding work already counted; zero for warp-level MMAs
(mma.sync's ldmatrix reads depend on a warp layout not modelled here) and without BLOCK_M/N/K.
"""

from __future__ import annotations

import math

WGMMA_M = 64        # rows of one wgmma instruction (PTX ISA: m64nNk16)
WGMMA_MAX_N = 256   # widest N of one wgmma instruction (PTX ISA)
WARPS_PER_WARPGROUP = 4


def wgmma_layout(block_m: int, block_n: int, num_warps: int) -> tuple[int, int]:
    """(warpgroups along M, instruction N) as Triton places warpgroups: along M first, one per 64 rows."""
    block_m, block_n = int(block_m), int(block_n)
    groups = max(1, num_warps // WARPS_PER_WARPGROUP)
    along_m = max(1, min(groups, block_m // WGMMA_M))
    along_n = max(1, groups // along_m)
    return along_m, min(WGMMA_MAX_N, max(8, block_n // along_n))


def staged_bytes_per_k_step(block_m: int, block_n: int, block_k: int, num_warps: int, size: int) -> float:
    """Shared-memory bytes one K step of one CTA moves: the A and B tiles written once, then every
    wgmma's A and B slices read (64-row slices x instructions across N)."""
    _, inst_n = wgmma_layout(block_m, block_n, num_warps)
    slices = math.ceil(block_m / WGMMA_M)
    instructions_per_slice = math.ceil(block_n / inst_n)
    written = (block_m + block_n) * block_k * size
    read = slices * instructions_per_slice * (WGMMA_M + inst_n) * block_k * size
    return float(written + read)


def operand_staging(tiles: tuple[int, int, int], num_warps: int, size: int, trips: float, busiest_ctas: int,
                    tensor_rate_per_sm: float, flops_per_smem_byte: float, busiest_main_us: float):
    """(estimate in us, reason) of the busiest SM waiting on shared memory for wgmma operands."""
    bm, bn, bk = (int(t) for t in tiles)
    per_step = staged_bytes_per_k_step(bm, bn, bk, num_warps, size)
    smem_rate = tensor_rate_per_sm / flops_per_smem_byte  # bytes/s of one SM at the calibrated clock
    staged_us = busiest_ctas * trips * per_step / smem_rate * 1e6
    intensity = 2 * bm * bn * bk / per_step
    along_m, inst_n = wgmma_layout(bm, bn, num_warps)
    why = (f"{per_step / 1024:.0f} KB of shared memory per K step (tiles written, then {math.ceil(bm / WGMMA_M)} "
           f"row slice(s) x m64n{inst_n}k16 reads; {along_m} warpgroup(s) along M): {intensity:.1f} FLOP per byte "
           f"against the {flops_per_smem_byte:.0f} shared memory feeds the tensor pipe; busiest SM "
           f"{staged_us:.1f} us of staging against {busiest_main_us:.1f} us of work")
    return max(0.0, staged_us - busiest_main_us), why
