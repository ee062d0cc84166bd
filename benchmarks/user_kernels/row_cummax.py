"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
torch.cummax along the last dim of x (R, C) bf16 or float32: values (R, C) same dtype and indices (R, C) int64 of
the running max (latest index on ties). One program per row; a tl.associative_scan over (value, index) pairs with
a lexicographic-max combine handles a BLOCK_C chunk, and rows longer than BLOCK_C loop over chunks carrying the max.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _max_with_index(v1, i1, v2, i2):
    take2 = (v2 > v1) | ((v2 == v1) & (i2 > i1))
    return tl.where(take2, v2, v1), tl.where(take2, i2, i1)


@triton.jit
def row_cummax_kernel(
    x_ptr, vals_ptr, idx_ptr,
    C,
    stride_xr, stride_xc,
    stride_vr, stride_vc,
    stride_ir, stride_ic,
    BLOCK_C: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    run_v = float("-inf")
    run_i = -1
    for start in range(0, C, BLOCK_C):
        cols = start + tl.arange(0, BLOCK_C)
        mask = cols < C
        v = tl.load(x_ptr + row * stride_xr + cols * stride_xc, mask=mask, other=float("-inf")).to(tl.float32)
        i = tl.where(mask, cols, -1)
        sv, si = tl.associative_scan((v, i), axis=0, combine_fn=_max_with_index)
        # fold in the running max from previous chunks
        take_run = (run_v > sv) | ((run_v == sv) & (run_i > si))
        sv = tl.where(take_run, run_v, sv)
        si = tl.where(take_run, run_i, si)
        tl.store(vals_ptr + row * stride_vr + cols * stride_vc, sv.to(vals_ptr.dtype.element_ty), mask=mask)
        tl.store(idx_ptr + row * stride_ir + cols * stride_ic, si.to(tl.int64), mask=mask)
        run_v, run_i = tl.reduce((tl.where(mask, sv, float("-inf")), tl.where(mask, si, -1)),
                                 axis=0, combine_fn=_max_with_index)


def row_cummax(x, BLOCK_C=None):
    """x (R, C) bf16/float32 -> (values (R, C) x.dtype, indices (R, C) int64), like torch.cummax(x, dim=-1)."""
    R, C = x.shape
    vals = torch.empty((R, C), device=x.device, dtype=x.dtype)
    idx = torch.empty((R, C), device=x.device, dtype=torch.int64)
    if BLOCK_C is None:
        BLOCK_C = min(triton.next_power_of_2(C), 4096)
    num_warps = 8 if BLOCK_C >= 2048 else 4
    row_cummax_kernel[(R,)](
        x, vals, idx,
        C,
        x.stride(0), x.stride(1),
        vals.stride(0), vals.stride(1),
        idx.stride(0), idx.stride(1),
        BLOCK_C=BLOCK_C, num_warps=num_warps,
    )
    return vals, idx
