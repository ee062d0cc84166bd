"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Batched small matmul C[b] = A[b] @ B[b] with A (batch, 16, 32) f16, B (batch, 32, 16) f16 -> C (batch, 16, 16)
f16, accumulating in fp32. Grid (cdiv(batch, BATCH_PER_PROG),); each program loops over its BATCH_PER_PROG
matrices, loading whole A and B tiles and doing one tl.dot per matrix.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def batched_tiny_matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    BATCH, M, N, K,
    stride_ab, stride_am, stride_ak,
    stride_bb, stride_bk, stride_bn,
    stride_cb, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BATCH_PER_PROG: tl.constexpr,
):
    pid = tl.program_id(0)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_off = offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_off = offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    c_off = offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    a_mask = (offs_m < M)[:, None] & (offs_k < K)[None, :]
    b_mask = (offs_k < K)[:, None] & (offs_n < N)[None, :]
    c_mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]

    first = pid.to(tl.int64) * BATCH_PER_PROG
    for i in range(BATCH_PER_PROG):
        bidx = first + i
        if bidx < BATCH:
            a = tl.load(a_ptr + bidx * stride_ab + a_off, mask=a_mask, other=0.0)
            b = tl.load(b_ptr + bidx * stride_bb + b_off, mask=b_mask, other=0.0)
            acc = tl.dot(a, b, out_dtype=tl.float32)
            tl.store(c_ptr + bidx * stride_cb + c_off, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


def batched_tiny_matmul(a, b, BATCH_PER_PROG=8):
    """a (batch, M, K) f16, b (batch, K, N) f16 (typically M=16, K=32, N=16) -> c (batch, M, N) f16."""
    batch, M, K = a.shape
    batch2, K2, N = b.shape
    assert batch == batch2 and K == K2
    c = torch.empty((batch, M, N), device=a.device, dtype=a.dtype)
    BLOCK_M = max(16, triton.next_power_of_2(M))
    BLOCK_N = max(16, triton.next_power_of_2(N))
    BLOCK_K = max(16, triton.next_power_of_2(K))
    grid = (triton.cdiv(batch, BATCH_PER_PROG),)
    batched_tiny_matmul_kernel[grid](
        a, b, c,
        batch, M, N, K,
        a.stride(0), a.stride(1), a.stride(2),
        b.stride(0), b.stride(1), b.stride(2),
        c.stride(0), c.stride(1), c.stride(2),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        BATCH_PER_PROG=BATCH_PER_PROG,
        num_warps=1,
    )
    return c
