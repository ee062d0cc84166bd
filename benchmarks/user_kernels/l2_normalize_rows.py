"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Row-wise L2 normalization, as F.normalize(x, p=2, dim=-1) for embedding / retrieval heads and cosine logits:
x (M, D) bf16/f16/f32 -> y (M, D) same dtype, y[m, :] = x[m, :] / max(||x[m, :]||_2, eps), eps = 1e-12,
sum of squares in fp32.
1-D grid of cdiv(M, BLOCK_M) programs, each normalizing a [BLOCK_M, BLOCK_D] tile of BLOCK_M whole rows
(BLOCK_D = next_power_of_2(D), masked columns load as 0). Host-chosen meta-parameters:
BLOCK_M = clamp(4096 // BLOCK_D, 1, 16), num_warps = 4 for BLOCK_D <= 2048 else 8.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def l2_normalize_rows_kernel(
    x_ptr, y_ptr,
    M, D,
    stride_xm, stride_xd,
    stride_ym, stride_yd,
    eps,
    BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr,
):
    pid = tl.program_id(0)
    offs_m = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_m[:, None] < M) & (offs_d[None, :] < D)
    rows = offs_m[:, None].to(tl.int64)

    x = tl.load(x_ptr + rows * stride_xm + offs_d[None, :] * stride_xd, mask=mask, other=0.0).to(tl.float32)
    sq = tl.sum(x * x, axis=1)
    inv = 1.0 / tl.maximum(tl.sqrt(sq), eps)
    y = x * inv[:, None]
    tl.store(y_ptr + rows * stride_ym + offs_d[None, :] * stride_yd, y.to(y_ptr.dtype.element_ty), mask=mask)


def l2_normalize_rows(x, eps=1e-12):
    """x (M, D) -> x / max(||x||_2, eps) row-wise, same dtype."""
    assert x.dim() == 2
    M, D = x.shape
    y = torch.empty((M, D), device=x.device, dtype=x.dtype)
    BLOCK_D = triton.next_power_of_2(D)
    BLOCK_M = max(1, min(16, 4096 // BLOCK_D))
    num_warps = 4 if BLOCK_D <= 2048 else 8
    grid = (triton.cdiv(M, BLOCK_M),)
    l2_normalize_rows_kernel[grid](
        x, y,
        M, D,
        x.stride(0), x.stride(1),
        y.stride(0), y.stride(1),
        eps,
        BLOCK_M=BLOCK_M, BLOCK_D=BLOCK_D,
        num_warps=num_warps,
    )
    return y
