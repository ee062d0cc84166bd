"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
First layer of a SwiGLU MLP in one kernel: out (M, N) bf16 = silu(x @ Wg) * (x @ Wu) with x (M, K) bf16 and
Wg, Wu (K, N) bf16, two fp32 accumulators fed by two tl.dot per K step. 1-D grid of cdiv(M, BLOCK_M) *
cdiv(N, BLOCK_N) programs, mapped to output tiles with a GROUP_SIZE_M swizzle; meta-parameters from a host heuristic.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def swiglu_dual_gemm_kernel(
    x_ptr, wg_ptr, wu_ptr, out_ptr,
    M, N, K,
    stride_xm, stride_xk,
    stride_gk, stride_gn,
    stride_uk, stride_un,
    stride_om, stride_on,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    tiles_per_group = GROUP_SIZE_M * num_pid_n
    group = pid // tiles_per_group
    first_m = group * GROUP_SIZE_M
    rows_in_group = tl.minimum(num_pid_m - first_m, GROUP_SIZE_M)
    local = pid % tiles_per_group
    pid_m = first_m + local % rows_in_group
    pid_n = local // rows_in_group

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_mask = offs_m < M
    n_mask = offs_n < N

    x_ptrs = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm + offs_k[None, :] * stride_xk
    g_ptrs = wg_ptr + offs_k[:, None].to(tl.int64) * stride_gk + offs_n[None, :] * stride_gn
    u_ptrs = wu_ptr + offs_k[:, None].to(tl.int64) * stride_uk + offs_n[None, :] * stride_un

    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_mask = (k0 + offs_k) < K
        xt = tl.load(x_ptrs, mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        gt = tl.load(g_ptrs, mask=k_mask[:, None] & n_mask[None, :], other=0.0)
        ut = tl.load(u_ptrs, mask=k_mask[:, None] & n_mask[None, :], other=0.0)
        acc_g = tl.dot(xt, gt, acc_g)
        acc_u = tl.dot(xt, ut, acc_u)
        x_ptrs += BLOCK_K * stride_xk
        g_ptrs += BLOCK_K * stride_gk
        u_ptrs += BLOCK_K * stride_uk

    act = acc_g * tl.sigmoid(acc_g) * acc_u
    o_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :] * stride_on
    tl.store(o_ptrs, act.to(out_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


def swiglu_dual_gemm(x, w_gate, w_up):
    """x (M, K) bf16, w_gate (K, N) bf16, w_up (K, N) bf16 -> silu(x @ w_gate) * (x @ w_up), (M, N) bf16."""
    M, K = x.shape
    K2, N = w_gate.shape
    assert K == K2 and w_up.shape == w_gate.shape
    out = torch.empty((M, N), device=x.device, dtype=x.dtype)
    if M >= 128 and N >= 128:
        BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages = 128, 128, 64, 8, 3
    elif M >= 64:
        BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages = 64, 64, 64, 4, 3
    else:
        BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages = 32, 64, 32, 4, 2
    GROUP_SIZE_M = 8
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    swiglu_dual_gemm_kernel[grid](
        x, w_gate, w_up, out,
        M, N, K,
        x.stride(0), x.stride(1),
        w_gate.stride(0), w_gate.stride(1),
        w_up.stride(0), w_up.stride(1),
        out.stride(0), out.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        GROUP_SIZE_M=GROUP_SIZE_M,
        num_warps=num_warps, num_stages=num_stages,
    )
    return out
