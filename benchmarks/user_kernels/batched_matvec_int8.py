"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Batched int8-weight matrix-vector product, e.g. one decode token per expert in a weight-only-quantized MoE:
w_q (E, N, K) int8 with per-output-channel scales (E, N) f32, x (E, K) bf16 -> y (E, N) f32,
y[e, n] = scales[e, n] * sum_k w_q[e, n, k] * x[e, k].
Grid (E, cdiv(N, BLOCK_N)): each program keeps a [BLOCK_N, BLOCK_K] fp32 partial-product tile, loops over K
in BLOCK_K chunks (int8 weight tile and bf16 x chunk converted to fp32, masked tails), reduces over K with
tl.sum once at the end and applies the row scale. @triton.autotune over BLOCK_N / BLOCK_K / num_warps
keyed on N, K.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_N": 16, "BLOCK_K": 256}, num_warps=4),
        triton.Config({"BLOCK_N": 32, "BLOCK_K": 128}, num_warps=4),
        triton.Config({"BLOCK_N": 32, "BLOCK_K": 256}, num_warps=8),
        triton.Config({"BLOCK_N": 64, "BLOCK_K": 128}, num_warps=8),
        triton.Config({"BLOCK_N": 64, "BLOCK_K": 64}, num_warps=4),
        triton.Config({"BLOCK_N": 8, "BLOCK_K": 512}, num_warps=4),
    ],
    key=["N", "K"],
)
@triton.jit
def batched_matvec_int8_kernel(
    w_ptr, s_ptr, x_ptr, y_ptr,
    N, K,
    stride_we, stride_wn, stride_wk,
    stride_se, stride_sn,
    stride_xe, stride_xk,
    stride_ye, stride_yn,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    e = tl.program_id(0)
    pid_n = tl.program_id(1)
    e64 = e.to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N

    w_base = w_ptr + e64 * stride_we + offs_n[:, None].to(tl.int64) * stride_wn
    x_base = x_ptr + e64 * stride_xe
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_mask = offs_k < K
        w = tl.load(w_base + offs_k[None, :] * stride_wk,
                    mask=n_mask[:, None] & k_mask[None, :], other=0)
        xv = tl.load(x_base + offs_k * stride_xk, mask=k_mask, other=0.0)
        acc += w.to(tl.float32) * xv.to(tl.float32)[None, :]

    y = tl.sum(acc, axis=1)
    sc = tl.load(s_ptr + e64 * stride_se + offs_n * stride_sn, mask=n_mask, other=0.0)
    y = y * sc
    tl.store(y_ptr + e64 * stride_ye + offs_n * stride_yn, y, mask=n_mask)


def batched_matvec_int8(w_q, scales, x):
    """w_q (E, N, K) int8, scales (E, N) f32, x (E, K) bf16 -> y (E, N) f32."""
    assert w_q.dim() == 3 and scales.dim() == 2 and x.dim() == 2
    E, N, K = w_q.shape
    assert scales.shape == (E, N) and x.shape == (E, K)
    if w_q.dtype != torch.int8:
        w_q = w_q.to(torch.int8)
    y = torch.empty((E, N), device=x.device, dtype=torch.float32)
    grid = lambda meta: (E, triton.cdiv(N, meta["BLOCK_N"]))
    batched_matvec_int8_kernel[grid](
        w_q, scales, x, y,
        N, K,
        w_q.stride(0), w_q.stride(1), w_q.stride(2),
        scales.stride(0), scales.stride(1),
        x.stride(0), x.stride(1),
        y.stride(0), y.stride(1),
    )
    return y
