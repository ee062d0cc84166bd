"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
LayerNorm backward, input gradient only (the dgamma/dbeta reduction is a separate kernel):
dy, x (M, N) bf16, weight (N,) bf16, mean / rstd (M,) f32 saved by the forward -> dx (M, N) bf16 with
xhat = (x - mean) * rstd, g = dy * weight, dx = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)) (fp32 math).
Grid (M,): one program per row holds the whole row in registers (BLOCK_N = next_power_of_2(N), masked),
does the two row reductions with tl.sum and writes dx. Fixed meta-parameters from the host:
num_warps = 4 up to BLOCK_N 2048, 8 up to 8192, 16 beyond.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def layernorm_bwd_dx_kernel(
    dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr,
    N,
    stride_dym, stride_xm, stride_dxm,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0)
    row64 = row.to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N

    dy = tl.load(dy_ptr + row64 * stride_dym + offs, mask=mask, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + row64 * stride_xm + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    mu = tl.load(mean_ptr + row)
    rs = tl.load(rstd_ptr + row)

    xhat = tl.where(mask, (x - mu) * rs, 0.0)
    g = dy * w
    c1 = tl.sum(g * xhat, axis=0) / N
    c2 = tl.sum(g, axis=0) / N
    dx = rs * (g - c2 - xhat * c1)
    tl.store(dx_ptr + row64 * stride_dxm + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)


def layernorm_backward_dx(dy, x, weight, mean, rstd):
    """dy, x (M, N) bf16, weight (N,) bf16, mean/rstd (M,) f32 -> dx (M, N) bf16."""
    assert dy.shape == x.shape and x.dim() == 2
    M, N = x.shape
    dy = dy if dy.stride(1) == 1 else dy.contiguous()
    x = x if x.stride(1) == 1 else x.contiguous()
    weight = weight.contiguous()
    mean = mean.contiguous()
    rstd = rstd.contiguous()
    dx = torch.empty((M, N), device=x.device, dtype=x.dtype)
    BLOCK_N = triton.next_power_of_2(N)
    if BLOCK_N <= 2048:
        num_warps = 4
    elif BLOCK_N <= 8192:
        num_warps = 8
    else:
        num_warps = 16
    layernorm_bwd_dx_kernel[(M,)](
        dy, x, weight, mean, rstd, dx,
        N,
        dy.stride(0), x.stride(0), dx.stride(0),
        BLOCK_N=BLOCK_N,
        num_warps=num_warps,
    )
    return dx
