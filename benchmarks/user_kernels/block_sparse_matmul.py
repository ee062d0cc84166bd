"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Block-sparse x dense matmul: C (M, N) bf16 = A (M, K) bf16 @ B (K, N) bf16 where only the 64 x 64 tiles of A listed
in a CSR over block rows (row_ptr (cdiv(M, 64) + 1,) int32, col_idx (nnz_blocks,) int32 block columns) are read
(duplicated entries are summed). Grid (block rows, cdiv(N, BLOCK_N)); each program loops over its block row's
nonzero blocks (bounds loaded from row_ptr) doing a 64 x 64 x BLOCK_N tl.dot into an fp32 accumulator.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def block_sparse_matmul_kernel(
    a_ptr, b_ptr, c_ptr, row_ptr_ptr, col_idx_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    BLOCK: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    brow = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = brow * BLOCK + tl.arange(0, BLOCK)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK)
    m_mask = offs_m < M
    n_mask = offs_n < N

    start = tl.load(row_ptr_ptr + brow)
    end = tl.load(row_ptr_ptr + brow + 1)
    acc = tl.zeros((BLOCK, BLOCK_N), dtype=tl.float32)
    for i in range(start, end):
        kb = tl.load(col_idx_ptr + i)
        ks = kb * BLOCK + offs_k
        k_mask = ks < K
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=k_mask[:, None] & n_mask[None, :], other=0.0)
        acc += tl.dot(a, b)

    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


def block_sparse_matmul(a, b, row_ptr, col_idx, BLOCK_N=None):
    """a (M, K) bf16 (only the CSR-listed 64x64 blocks are used), b (K, N) bf16,
    row_ptr (cdiv(M, 64) + 1,) int32, col_idx (nnz_blocks,) int32 -> C (M, N) bf16."""
    BLOCK = 64
    M, K = a.shape
    K2, N = b.shape
    assert K == K2
    row_ptr = row_ptr.to(device=a.device, dtype=torch.int32).contiguous()
    col_idx = col_idx.to(device=a.device, dtype=torch.int32).contiguous()
    nb_rows = triton.cdiv(M, BLOCK)
    assert row_ptr.numel() == nb_rows + 1
    if BLOCK_N is None:
        BLOCK_N = 128 if N >= 128 else 64
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (nb_rows, triton.cdiv(N, BLOCK_N))
    block_sparse_matmul_kernel[grid](
        a, b, c, row_ptr, col_idx,
        M, N, K,
        a.stride(0), a.stride(1),
        b.stride(0), b.stride(1),
        c.stride(0), c.stride(1),
        BLOCK=BLOCK, BLOCK_N=BLOCK_N,
        num_warps=4, num_stages=3,
    )
    return c
