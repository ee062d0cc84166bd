"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
MoE grouped GEMM: rows of x sorted by expert (group sizes given per expert) are each multiplied by their expert's
weight w[e] of shape (K, N).
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}, num_warps=4, num_stages=4),
    ],
    key=["N", "K", "num_experts"],
)
@triton.jit
def grouped_gemm_kernel(
    x_ptr, w_ptr, out_ptr, group_sizes_ptr,
    N, K, num_experts,
    stride_xm, stride_xk,
    stride_we, stride_wk, stride_wn,
    stride_om, stride_on,
    E_POW2: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)

    # work out which expert / which tile of that expert this program owns
    e = tl.arange(0, E_POW2)
    sizes = tl.load(group_sizes_ptr + e, mask=e < num_experts, other=0).to(tl.int32)
    tiles = (sizes + BLOCK_M - 1) // BLOCK_M
    tiles_end = tl.cumsum(tiles, axis=0)
    rows_end = tl.cumsum(sizes, axis=0)
    total_tiles = tl.sum(tiles, axis=0)
    if pid_m >= total_tiles:
        return
    expert = tl.sum((tiles_end <= pid_m).to(tl.int32), axis=0)
    is_mine = e == expert
    tile_start = tl.sum(tl.where(is_mine, tiles_end - tiles, 0), axis=0)
    row_start = tl.sum(tl.where(is_mine, rows_end - sizes, 0), axis=0)
    group_rows = tl.sum(tl.where(is_mine, sizes, 0), axis=0)

    offs_m = (pid_m - tile_start) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_mask = offs_m < group_rows
    n_mask = offs_n < N
    rows = row_start + offs_m

    a_ptrs = x_ptr + rows[:, None] * stride_xm + offs_k[None, :] * stride_xk
    b_ptrs = w_ptr + expert.to(tl.int64) * stride_we + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=m_mask[:, None] & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & n_mask[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_xk
        b_ptrs += BLOCK_K * stride_wk

    c_ptrs = out_ptr + rows[:, None] * stride_om + offs_n[None, :] * stride_on
    tl.store(c_ptrs, acc.to(out_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


def grouped_gemm(x: torch.Tensor, w: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
    """x: (M, K) rows grouped by expert, w: (E, K, N), group_sizes: (E,) ints with sum <= M.

    Rows past sum(group_sizes) (padding) come back as zeros.
    """
    M, K = x.shape
    E, K2, N = w.shape
    assert K == K2 and group_sizes.shape[0] == E
    out = torch.zeros((M, N), device=x.device, dtype=x.dtype)

    def grid(meta):
        # sum_e cdiv(size_e, BM) <= cdiv(M, BM) + E
        return (triton.cdiv(M, meta["BLOCK_M"]) + E, triton.cdiv(N, meta["BLOCK_N"]))

    grouped_gemm_kernel[grid](
        x, w, out, group_sizes,
        N, K, E,
        x.stride(0), x.stride(1),
        w.stride(0), w.stride(1), w.stride(2),
        out.stride(0), out.stride(1),
        E_POW2=triton.next_power_of_2(E),
    )
    return out
