"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Gaussian (RBF) kernel matrix between two point sets, as in kernel ridge regression / Gaussian
processes / MMD: X (M, D), Y (N, D) f16, gamma float -> K (M, N) f32 with
K[i, j] = exp(-gamma * max(||x_i||^2 + ||y_j||^2 - 2 x_i . y_j, 0)). Grid (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N));
each program loops over D in BLOCK_K steps, accumulating the X @ Y^T tile with tl.dot (fp32 acc) and,
from the same loaded tiles, the row squared norms of its X and Y rows (reductions), then applies the
exp epilogue. @triton.autotune over BLOCK_M / BLOCK_N / BLOCK_K / num_warps / num_stages keyed on M, N, D.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}, num_warps=4, num_stages=2),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 32}, num_warps=8, num_stages=3),
    ],
    key=["M", "N", "D"],
)
@triton.jit
def rbf_kernel_matrix_kernel(
    x_ptr, y_ptr, k_ptr,
    M, N, D,
    gamma,
    stride_xm, stride_xd,
    stride_yn, stride_yd,
    stride_km, stride_kn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = offs_m < M
    n_mask = offs_n < N

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    xx = tl.zeros((BLOCK_M,), dtype=tl.float32)
    yy = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, D, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_mask = offs_k < D
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xd,
                    mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        y = tl.load(y_ptr + offs_n[None, :] * stride_yn + offs_k[:, None] * stride_yd,
                    mask=n_mask[None, :] & k_mask[:, None], other=0.0)  # [BLOCK_K, BLOCK_N]
        acc = tl.dot(x, y, acc)
        xf = x.to(tl.float32)
        yf = y.to(tl.float32)
        xx += tl.sum(xf * xf, axis=1)
        yy += tl.sum(yf * yf, axis=0)

    d2 = xx[:, None] + yy[None, :] - 2.0 * acc
    d2 = tl.maximum(d2, 0.0)
    kval = tl.exp(-gamma * d2)

    k_ptrs = k_ptr + offs_m[:, None].to(tl.int64) * stride_km + offs_n[None, :] * stride_kn
    tl.store(k_ptrs, kval, mask=m_mask[:, None] & n_mask[None, :])


def rbf_kernel_matrix(x, y, gamma):
    """x (M, D), y (N, D) f16, gamma float -> K (M, N) f32."""
    assert x.dim() == 2 and y.dim() == 2 and x.shape[1] == y.shape[1]
    M, D = x.shape
    N = y.shape[0]
    k = torch.empty((M, N), device=x.device, dtype=torch.float32)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))
    rbf_kernel_matrix_kernel[grid](
        x, y, k,
        M, N, D,
        float(gamma),
        x.stride(0), x.stride(1),
        y.stride(0), y.stride(1),
        k.stride(0), k.stride(1),
    )
    return k
