"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Training-time fused bias + dropout + residual add: out = residual + dropout(x + bias, p) with a seeded Philox RNG
(tl.rand);
x, residual (tokens, hidden), bias (hidden,) -> out (tokens, hidden) in x.dtype. Kept values are scaled by 1/(1-p).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def bias_dropout_add_kernel(
    x_ptr, bias_ptr, res_ptr, out_ptr,
    hidden, p_drop, seed,
    stride_xr, stride_rr, stride_or,
    BLOCK_H: tl.constexpr,
):
    row = tl.program_id(0)
    pid_h = tl.program_id(1)
    cols = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    mask = cols < hidden

    x = tl.load(x_ptr + row.to(tl.int64) * stride_xr + cols, mask=mask, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    res = tl.load(res_ptr + row.to(tl.int64) * stride_rr + cols, mask=mask, other=0.0).to(tl.float32)

    rand_offs = row * hidden + cols
    r = tl.rand(seed, rand_offs)
    keep = r >= p_drop
    y = tl.where(keep, (x + bias) / (1.0 - p_drop), 0.0)
    out = res + y
    tl.store(out_ptr + row.to(tl.int64) * stride_or + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def bias_dropout_add(x, bias, residual, p=0.1, seed=1234):
    """x, residual (tokens, hidden); bias (hidden,) -> out (tokens, hidden)."""
    assert 0.0 <= p < 1.0
    hidden = x.shape[-1]
    x2 = x.reshape(-1, hidden)
    r2 = residual.reshape(-1, hidden)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    if r2.stride(-1) != 1:
        r2 = r2.contiguous()
    rows = x2.shape[0]
    out = torch.empty((rows, hidden), dtype=x.dtype, device=x.device)
    if rows == 0:
        return out.reshape(x.shape)
    BLOCK_H = 1024
    grid = (rows, triton.cdiv(hidden, BLOCK_H))
    bias_dropout_add_kernel[grid](
        x2, bias, r2, out,
        hidden, p, seed,
        x2.stride(0), r2.stride(0), out.stride(0),
        BLOCK_H=BLOCK_H,
        num_warps=4,
    )
    return out.reshape(x.shape)
