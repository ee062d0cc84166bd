"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
torch.bucketize(values, boundaries, right=False): values (n,) float32, boundaries (m,) float32 sorted ascending,
out (n,) int32 = first i with boundaries[i] >= value (m if none). 1-D grid over values in BLOCK_SIZE chunks; each
lane runs a fixed ceil(log2(m + 1))-step binary search, gathering boundaries. Autotuned over BLOCK_SIZE / num_warps.
"""
import math

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 256}, num_warps=2),
        triton.Config({"BLOCK_SIZE": 512}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 2048}, num_warps=8),
    ],
    key=["n"],
)
@triton.jit
def bucketize_kernel(
    v_ptr, b_ptr, out_ptr,
    n, m,
    STEPS: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    v = tl.load(v_ptr + offs, mask=mask, other=0.0)
    lo = tl.zeros((BLOCK_SIZE,), dtype=tl.int32)
    hi = tl.zeros((BLOCK_SIZE,), dtype=tl.int32) + m
    for _ in range(STEPS):
        active = lo < hi
        mid = (lo + hi) // 2
        b = tl.load(b_ptr + mid, mask=active & mask, other=0.0)
        go_right = b < v
        lo = tl.where(active & go_right, mid + 1, lo)
        hi = tl.where(active & (~go_right), mid, hi)
    tl.store(out_ptr + offs, lo, mask=mask)


def bucketize(values, boundaries):
    """values (n,) float32, boundaries (m,) float32 sorted -> (n,) int32 bucket indices (right=False)."""
    values = values.contiguous()
    boundaries = boundaries.to(values.device).contiguous()
    n = values.numel()
    m = boundaries.numel()
    out = torch.empty((n,), device=values.device, dtype=torch.int32)
    steps = max(1, math.ceil(math.log2(m + 1)))
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    bucketize_kernel[grid](values, boundaries, out, n, m, STEPS=steps)
    return out
