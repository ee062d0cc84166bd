"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
W4A16 GEMM: y (M, N) bf16 = x (M, K) bf16 @ dequant(wq), wq (K // 2, N) uint8 holding two int4 codes per byte
(low nibble = even k, high nibble = odd k), scales (K // 128, N) bf16, dequant = (q - 8) * scale per group of 128 k.
One program per (BLOCK_M, BLOCK_N) tile of y, tiles swizzled in groups of GROUP_SIZE_M rows; the K loop unpacks a
(BLOCK_K // 2, BLOCK_N) byte tile to (BLOCK_K, BLOCK_N) bf16 and accumulates tl.dot in fp32.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def w4a16_group_gemm_kernel(
    x_ptr, wq_ptr, s_ptr, y_ptr,
    M, N, K,
    stride_xm, stride_xk,
    stride_wk, stride_wn,
    stride_sg, stride_sn,
    stride_ym, stride_yn,
    GROUP: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pids_per_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // pids_per_group
    first_m = group_id * GROUP_SIZE_M
    rows_in_group = min(num_pid_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (pid % pids_per_group) % rows_in_group
    pid_n = (pid % pids_per_group) // rows_in_group

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = offs_m < M
    n_mask = offs_n < N
    offs_k = tl.arange(0, BLOCK_K)
    offs_kp = tl.arange(0, BLOCK_K // 2)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + (k0 + offs_k)[None, :] * stride_xk,
                    mask=m_mask[:, None] & ((k0 + offs_k) < K)[None, :], other=0.0)
        kp = k0 // 2 + offs_kp
        packed = tl.load(wq_ptr + kp[:, None] * stride_wk + offs_n[None, :] * stride_wn,
                         mask=(kp < K // 2)[:, None] & n_mask[None, :], other=0x88)
        packed = packed.to(tl.int32)
        lo = packed & 0xF
        hi = (packed >> 4) & 0xF
        # interleave: row 2i <- lo[i], row 2i+1 <- hi[i]
        q = tl.reshape(tl.permute(tl.join(lo, hi), (0, 2, 1)), (BLOCK_K, BLOCK_N))
        g = k0 // GROUP
        s = tl.load(s_ptr + g * stride_sg + offs_n * stride_sn, mask=n_mask, other=0.0).to(tl.float32)
        w = ((q.to(tl.float32) - 8.0) * s[None, :]).to(tl.bfloat16)
        acc += tl.dot(x.to(tl.bfloat16), w)

    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


def w4a16_group_gemm(x, wq, scales, group_size=128):
    """x (M, K) bf16, wq (K // 2, N) uint8, scales (K // group_size, N) bf16 -> y (M, N) bf16.
    K must be a multiple of group_size."""
    M, K = x.shape
    Kp, N = wq.shape
    assert Kp * 2 == K and K % group_size == 0
    assert scales.shape[0] == K // group_size and scales.shape[1] == N
    y = torch.empty((M, N), device=x.device, dtype=torch.bfloat16)

    if M <= 16:
        BLOCK_M = 16
    elif M <= 32:
        BLOCK_M = 32
    elif M <= 64:
        BLOCK_M = 64
    else:
        BLOCK_M = 128
    BLOCK_N = 128 if N >= 128 else 64
    BLOCK_K = 64
    while group_size % BLOCK_K != 0:
        BLOCK_K //= 2
    assert BLOCK_K >= 16
    num_warps = 8 if BLOCK_M * BLOCK_N >= 128 * 128 else 4
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    w4a16_group_gemm_kernel[grid](
        x, wq, scales, y,
        M, N, K,
        x.stride(0), x.stride(1),
        wq.stride(0), wq.stride(1),
        scales.stride(0), scales.stride(1),
        y.stride(0), y.stride(1),
        GROUP=group_size, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_SIZE_M=8,
        num_warps=num_warps, num_stages=3,
    )
    return y
