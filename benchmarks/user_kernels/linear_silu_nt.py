"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
A linear layer without bias followed by SiLU, with the weight kept in nn.Linear (out, in) layout, so the GEMM
is A @ B^T: x (M, K) bf16/f16, weight (N, K) same dtype -> y (M, N) same dtype = silu(x @ weight^T),
silu(z) = z * sigmoid(z) computed on the fp32 accumulator.
2-D grid (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)), one output tile per program: the K loop loads an x tile
[BLOCK_M, BLOCK_K] and a weight tile [BLOCK_N, BLOCK_K] with masks, transposes the weight tile with tl.trans
and accumulates tl.dot in fp32; the epilogue applies SiLU and stores. @triton.autotune over six configs of
BLOCK_M / BLOCK_N / BLOCK_K / num_warps / num_stages keyed on M, N, K.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}, num_warps=4, num_stages=5),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def linear_silu_nt_kernel(
    x_ptr, w_ptr, y_ptr,
    M, N, K,
    stride_xm, stride_xk,
    stride_wn, stride_wk,
    stride_ym, stride_yn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_mask = offs_m < M
    n_mask = offs_n < N

    x_ptrs = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + offs_k[None, :] * stride_wk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + offs_k) < K
        a = tl.load(x_ptrs, mask=m_mask[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(w_ptrs, mask=n_mask[:, None] & k_ok[None, :], other=0.0)
        acc += tl.dot(a, tl.trans(b))
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    out = acc * tl.sigmoid(acc)
    y_ptrs = y_ptr + offs_m[:, None].to(tl.int64) * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, out.to(y_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


def linear_silu_nt(x, weight):
    """x (M, K), weight (N, K) (nn.Linear layout) -> silu(x @ weight.T) (M, N) in x's dtype."""
    assert x.dim() == 2 and weight.dim() == 2 and x.shape[1] == weight.shape[1]
    assert x.dtype == weight.dtype
    M, K = x.shape
    N = weight.shape[0]
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))
    linear_silu_nt_kernel[grid](
        x, weight, y,
        M, N, K,
        x.stride(0), x.stride(1),
        weight.stride(0), weight.stride(1),
        y.stride(0), y.stride(1),
    )
    return y
