"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Decode attention with a sliding window. One query token per sequence attends to the last `window`
positions of its KV cache (grouped-query heads). One program per (sequence, query head);
online softmax over BLOCK_N-key blocks.
q (B, Hq, D), k_cache / v_cache (B, S_max, Hkv, D), seq_lens (B,) int32 -> out (B, Hq, D).
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def swa_decode_kernel(
    q_ptr, k_ptr, v_ptr, lens_ptr, o_ptr,
    sm_scale, window,
    stride_qb, stride_qh,
    stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh,
    stride_ob, stride_oh,
    HEAD_DIM: tl.constexpr, GQA: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    kv_h = h // GQA
    seq_len = tl.load(lens_ptr + b)
    start = tl.maximum(seq_len - window, 0)

    d = tl.arange(0, BLOCK_D)
    d_ok = d < HEAD_DIM
    q = tl.load(q_ptr + b * stride_qb + h * stride_qh + d, mask=d_ok, other=0.0).to(tl.float32)
    # fold the softmax scale and log2(e) into q so the loop can use exp2
    q = q * (sm_scale * 1.4426950408889634)

    k_base = k_ptr + b.to(tl.int64) * stride_kb + kv_h * stride_kh
    v_base = v_ptr + b.to(tl.int64) * stride_vb + kv_h * stride_vh
    n_off = tl.arange(0, BLOCK_N)

    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for s0 in range(start, seq_len, BLOCK_N):
        pos = s0 + n_off
        p_ok = pos < seq_len
        kv_mask = p_ok[:, None] & d_ok[None, :]
        k = tl.load(k_base + pos[:, None] * stride_ks + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        s = tl.sum(k * q[None, :], axis=1)
        s = tl.where(p_ok, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new)
        v = tl.load(v_base + pos[:, None] * stride_vs + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        m_i = m_new

    out = acc / tl.maximum(l_i, 1e-20)
    tl.store(o_ptr + b * stride_ob + h * stride_oh + d, out.to(o_ptr.dtype.element_ty), mask=d_ok)


def sliding_window_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                          seq_lens: torch.Tensor, window: int = 4096):
    B, Hq, D = q.shape
    _, _, Hkv, Dk = k_cache.shape
    assert Dk == D and Hq % Hkv == 0
    assert k_cache.stride(-1) == 1 and v_cache.stride(-1) == 1
    if q.stride(-1) != 1:
        q = q.contiguous()
    out = torch.empty((B, Hq, D), dtype=q.dtype, device=q.device)
    sm_scale = 1.0 / math.sqrt(D)
    BLOCK_N = 64
    BLOCK_D = triton.next_power_of_2(D)
    grid = (B, Hq)
    swa_decode_kernel[grid](
        q, k_cache, v_cache, seq_lens, out,
        sm_scale, window,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        out.stride(0), out.stride(1),
        HEAD_DIM=D, GQA=Hq // Hkv,
        BLOCK_N=BLOCK_N, BLOCK_D=BLOCK_D, num_warps=4, num_stages=2,
    )
    return out
