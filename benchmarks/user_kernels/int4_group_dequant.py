"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Dequantize a packed int4 weight (two values per byte) with per-group scales to bf16, as a weight-only-quant
loader does before a dense GEMM: packed (N, K // 2) uint8, byte j of a row holds column 2j in its low nibble
and column 2j + 1 in its high nibble, each nibble q is a signed value q - 8; scales (N, K // GROUP) f16/bf16/f32:
w[n, k] = (q[n, k] - 8) * scales[n, k // GROUP] -> w (N, K) bf16. K must be even and a multiple of GROUP.
2-D grid (cdiv(N, BLOCK_N), cdiv(K, BLOCK_K)): each program loads a [BLOCK_N, BLOCK_K // 2] byte tile, splits
the nibbles, interleaves them back into a [BLOCK_N, BLOCK_K] tile with tl.join + reshape, gathers the matching
group scale per element and stores bf16. @triton.autotune over six configs of BLOCK_N / BLOCK_K / num_warps
keyed on N, K and GROUP.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_N": 32, "BLOCK_K": 256}, num_warps=4),
        triton.Config({"BLOCK_N": 64, "BLOCK_K": 256}, num_warps=4),
        triton.Config({"BLOCK_N": 64, "BLOCK_K": 256}, num_warps=8),
        triton.Config({"BLOCK_N": 16, "BLOCK_K": 512}, num_warps=4),
        triton.Config({"BLOCK_N": 32, "BLOCK_K": 512}, num_warps=8),
        triton.Config({"BLOCK_N": 128, "BLOCK_K": 128}, num_warps=8),
    ],
    key=["N", "K", "GROUP"],
)
@triton.jit
def int4_group_dequant_kernel(
    q_ptr, s_ptr, w_ptr,
    N, K,
    stride_qn, stride_qk,
    stride_sn, stride_sg,
    stride_wn, stride_wk,
    GROUP: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    HALF_K: tl.constexpr = BLOCK_K // 2

    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_b = pid_k * HALF_K + tl.arange(0, HALF_K)
    n_mask = offs_n < N
    rows = offs_n[:, None].to(tl.int64)

    packed = tl.load(q_ptr + rows * stride_qn + offs_b[None, :] * stride_qk,
                     mask=n_mask[:, None] & (offs_b[None, :] < K // 2), other=0)
    packed = packed.to(tl.int32)
    lo = (packed & 0xF) - 8
    hi = ((packed >> 4) & 0xF) - 8
    q = tl.reshape(tl.join(lo, hi), (BLOCK_N, BLOCK_K))

    offs_k = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    k_mask = offs_k < K
    mask = n_mask[:, None] & k_mask[None, :]
    grp = offs_k // GROUP
    sc = tl.load(s_ptr + rows * stride_sn + grp[None, :] * stride_sg, mask=mask, other=0.0).to(tl.float32)

    w = q.to(tl.float32) * sc
    tl.store(w_ptr + rows * stride_wn + offs_k[None, :] * stride_wk, w.to(w_ptr.dtype.element_ty), mask=mask)


def int4_group_dequant(packed, scales, group_size=128):
    """packed (N, K // 2) uint8, scales (N, K // group_size) -> w (N, K) bf16."""
    assert packed.dim() == 2 and scales.dim() == 2
    assert packed.dtype == torch.uint8
    N, half_k = packed.shape
    K = half_k * 2
    assert K % group_size == 0
    assert scales.shape == (N, K // group_size)
    w = torch.empty((N, K), device=packed.device, dtype=torch.bfloat16)
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_N"]), triton.cdiv(K, meta["BLOCK_K"]))
    int4_group_dequant_kernel[grid](
        packed, scales, w,
        N, K,
        packed.stride(0), packed.stride(1),
        scales.stride(0), scales.stride(1),
        w.stride(0), w.stride(1),
        GROUP=group_size,
    )
    return w
