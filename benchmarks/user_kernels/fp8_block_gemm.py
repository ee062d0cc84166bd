"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Block-scaled FP8 GEMM, C = (A * a_scale) @ (B * b_scale)^T in bf16.
A (M, K) float8_e4m3fn with one float32 scale per row and 128-wide K block: a_scale (M, K/128).
B (N, K) float8_e4m3fn (weight layout) with one float32 scale per 128x128 block: b_scale (N/128, K/128).
"""
import torch
import triton
import triton.language as tl

SCALE_BLOCK = 128


@triton.jit
def fp8_block_gemm_kernel(
    a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
    stride_asm, stride_ask, stride_bsn, stride_bsk,
    SCALE_N: tl.constexpr, SCALE_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # grouped program order so that consecutive programs share B tiles in L2
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pids_per_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // pids_per_group
    first_m = group_id * GROUP_SIZE_M
    group_rows = min(num_pid_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (pid % pids_per_group) % group_rows
    pid_n = (pid % pids_per_group) // group_rows

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < N
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_n[None, :].to(tl.int64) * stride_bn + offs_k[:, None] * stride_bk
    as_ptrs = as_ptr + offs_m * stride_asm
    bs_ptrs = bs_ptr + (offs_n // SCALE_N) * stride_bsn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - kt * BLOCK_K
        a = tl.load(a_ptrs, mask=m_ok[:, None] & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=n_ok[None, :] & (offs_k[:, None] < k_left), other=0.0)
        # one scale per K tile (BLOCK_K divides the 128-wide scale block)
        ks = (kt * BLOCK_K) // SCALE_K
        a_s = tl.load(as_ptrs + ks * stride_ask, mask=m_ok, other=0.0)
        b_s = tl.load(bs_ptrs + ks * stride_bsk, mask=n_ok, other=0.0)
        acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=m_ok[:, None] & n_ok[None, :])


def fp8_block_gemm(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor):
    M, K = a.shape
    N = b.shape[0]
    assert b.shape[1] == K, "A and B disagree on K"
    assert a_scale.shape == (M, triton.cdiv(K, SCALE_BLOCK))
    assert b_scale.shape == (triton.cdiv(N, SCALE_BLOCK), triton.cdiv(K, SCALE_BLOCK))
    c = torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    BLOCK_M = 64
    BLOCK_N = 128
    BLOCK_K = 128
    GROUP_SIZE_M = 8
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    fp8_block_gemm_kernel[grid](
        a, b, c, a_scale, b_scale,
        M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        a_scale.stride(0), a_scale.stride(1), b_scale.stride(0), b_scale.stride(1),
        SCALE_N=SCALE_BLOCK, SCALE_K=SCALE_BLOCK,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_SIZE_M=GROUP_SIZE_M,
        num_warps=4, num_stages=4,
    )
    return c
