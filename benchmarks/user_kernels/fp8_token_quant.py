"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Dynamic per-token FP8 (e4m3) quantisation of activations, returning the fp8 tensor and one float32 scale per token.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def per_token_fp8_quant_kernel(
    x_ptr, q_ptr, scale_ptr,
    n_tokens, hidden,
    stride_xm, stride_qm,
    FP8_MAX: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * BM + tl.arange(0, BM)
    row_mask = rows < n_tokens
    cols0 = tl.arange(0, BN)
    x_rows = x_ptr + rows[:, None].to(tl.int64) * stride_xm
    q_rows = q_ptr + rows[:, None].to(tl.int64) * stride_qm

    # pass 1: absmax per token
    amax = tl.zeros([BM], dtype=tl.float32)
    for off in range(0, hidden, BN):
        cols = off + cols0
        m = row_mask[:, None] & (cols[None, :] < hidden)
        x = tl.load(x_rows + cols[None, :], mask=m, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.max(tl.abs(x), axis=1))
    amax = tl.maximum(amax, 1e-10)
    scale = amax / FP8_MAX
    inv_scale = FP8_MAX / amax
    tl.store(scale_ptr + rows, scale, mask=row_mask)

    # pass 2: scale, clamp, cast
    for off in range(0, hidden, BN):
        cols = off + cols0
        m = row_mask[:, None] & (cols[None, :] < hidden)
        x = tl.load(x_rows + cols[None, :], mask=m, other=0.0).to(tl.float32)
        y = x * inv_scale[:, None]
        y = tl.minimum(tl.maximum(y, -FP8_MAX), FP8_MAX)
        tl.store(q_rows + cols[None, :], y.to(q_ptr.dtype.element_ty), mask=m)


def per_token_quant_fp8(x: torch.Tensor):
    """x: (..., hidden) -> (q float8_e4m3fn of the same shape, scales float32 of shape (..., 1)); x ~= q * scales."""
    hidden = x.shape[-1]
    x2 = x.reshape(-1, hidden)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    n_tokens = x2.shape[0]
    q = torch.empty((n_tokens, hidden), device=x.device, dtype=torch.float8_e4m3fn)
    scales = torch.empty((n_tokens, 1), device=x.device, dtype=torch.float32)

    BM = 4
    BN = 1024
    grid = (triton.cdiv(n_tokens, BM),)
    per_token_fp8_quant_kernel[grid](
        x2, q, scales,
        n_tokens, hidden,
        x2.stride(0), q.stride(0),
        FP8_MAX=448.0,
        BM=BM, BN=BN,
        num_warps=4,
    )
    return q.view(x.shape), scales.view(*x.shape[:-1], 1)
