"""Microbenchmark kernels that measure one pipeline each, for calibration (`advisor calibrate`).

Each does known work with as little else as possible: an FP32 FMA chain in registers, a chain of
exp2 on the special-function unit, and a streaming read of a buffer (DRAM when it is far larger
than L2, L2 when it fits). The host side lives in advisor.measure.calibrate.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def fma_chain_kernel(out_ptr, a, b, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    """ITERS dependent FMAs on 4 independent chains per element: 8 * ITERS FLOPs per element."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x0 = offs.to(tl.float32) * 1e-7
    x1 = x0 + 1.0
    x2 = x0 + 2.0
    x3 = x0 + 3.0
    for _ in tl.static_range(ITERS):
        x0 = x0 * a + b
        x1 = x1 * a + b
        x2 = x2 * a + b
        x3 = x3 * a + b
    tl.store(out_ptr + offs, x0 + x1 + x2 + x3)


@triton.jit
def exp2_chain_kernel(out_ptr, scale, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    """ITERS dependent exp2 on 4 independent chains per element (MUFU.EX2 after a multiply)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x0 = offs.to(tl.float32) * 1e-9
    x1 = x0 + 0.25
    x2 = x0 + 0.5
    x3 = x0 + 0.75
    for _ in tl.static_range(ITERS):
        x0 = tl.math.exp2(x0 * scale)
        x1 = tl.math.exp2(x1 * scale)
        x2 = tl.math.exp2(x2 * scale)
        x3 = tl.math.exp2(x3 * scale)
    tl.store(out_ptr + offs, x0 + x1 + x2 + x3)


@triton.jit
def read_kernel(in_ptr, out_ptr, mask_elements, PASSES: tl.constexpr, BLOCK: tl.constexpr):
    """Each program sums PASSES strided blocks of a power-of-two buffer (wrapping by `& mask`), four
    independent loads at a time so that many requests are in flight."""
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    base = pid * BLOCK + tl.arange(0, BLOCK)
    acc0 = tl.zeros((BLOCK,), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK,), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK,), dtype=tl.float32)
    acc3 = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(0, PASSES, 4):
        acc0 += tl.load(in_ptr + ((base + i * step) & mask_elements))
        acc1 += tl.load(in_ptr + ((base + (i + 1) * step) & mask_elements))
        acc2 += tl.load(in_ptr + ((base + (i + 2) * step) & mask_elements))
        acc3 += tl.load(in_ptr + ((base + (i + 3) * step) & mask_elements))
    tl.store(out_ptr + pid, tl.sum(acc0 + acc1 + acc2 + acc3, axis=0))


@triton.jit
def read_write_kernel(in_ptr, out_ptr, BLOCK: tl.constexpr):
    """Each program reads one contiguous block and writes it plus one to another buffer: as many bytes
    written as read, in the streams a GEMM's operand reads and output writes share on the DRAM bus."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(in_ptr + offs) + 1.0)


@triton.jit
def atomic_add_kernel(buf_ptr, value, mask_elements, PASSES: tl.constexpr, BLOCK: tl.constexpr):
    """Each program adds `value` into PASSES strided blocks of a power-of-two float32 buffer (wrapping by
    `& mask`) with relaxed float32 atomics whose result is unused: the reductions a fused-MoE GEMM2 sends
    to L2 to sum a token's top-k rows, in the same contiguous runs."""
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    ones = tl.full((BLOCK,), 1.0, dtype=tl.float32) * value
    for i in range(PASSES):
        # A block starts at a multiple of BLOCK (the buffer is a multiple of it), so the adds are contiguous
        # runs the compiler issues 4 at a time (REDG.E.ADD.F32x4), as it does for a GEMM's output tile.
        start = tl.multiple_of((pid * BLOCK + i * step) & mask_elements, BLOCK)
        tl.atomic_add(buf_ptr + start + tl.arange(0, BLOCK), ones, sem="relaxed")


@triton.jit
def empty_kernel(out_ptr, flag):
    """Does nothing when flag is 0 (the launch floor); the store keeps the kernel from being empty."""
    if flag != 0:
        tl.store(out_ptr, 1.0)


@triton.jit
def pointer_chase_kernel(ring_ptr, out_ptr, start, hops):
    """Follows `hops` links of a ring of int64 element indices (each node holds the index of the next), so every
    load's address waits on the previous load's value: time per hop is a load's latency from wherever the ring
    lies. `.cg` skips L1, so a ring that fits in L2 measures an L2 hit and one flushed from L2 a DRAM access."""
    node = start.to(tl.int64)
    for _ in range(hops):
        node = tl.load(ring_ptr + node, cache_modifier=".cg")
    tl.store(out_ptr, node)
