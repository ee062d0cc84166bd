"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Decode attention over a paged KV cache (one query token per sequence, grouped-query heads). One program per
(sequence, query head) walks the sequence's pages through the block table in tiles of BLOCK_N tokens with an
online softmax.
q (S, Hq, D), k_cache / v_cache (num_blocks, page_size, Hkv, D), block_table (S, max_blocks) int32,
seq_lens (S,) int32 -> out (S, Hq, D).
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def paged_decode_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, block_table_ptr, seq_lens_ptr, o_ptr,
    sm_scale,
    stride_qs, stride_qh,
    stride_kb, stride_kp, stride_kh,
    stride_vb, stride_vp, stride_vh,
    stride_bt,
    stride_os, stride_oh,
    HEAD_DIM: tl.constexpr, QUERIES_PER_KV: tl.constexpr, PAGE_SIZE: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    seq = tl.program_id(0)
    h = tl.program_id(1)
    kv_h = h // QUERIES_PER_KV
    seq_len = tl.load(seq_lens_ptr + seq)

    d = tl.arange(0, BLOCK_D)
    d_ok = d < HEAD_DIM
    q = tl.load(q_ptr + seq.to(tl.int64) * stride_qs + h * stride_qh + d, mask=d_ok, other=0.0).to(tl.float32)
    # fold the softmax scale and log2(e) into q so the loop can use exp2
    q = q * (sm_scale * 1.4426950408889634)

    table_row = block_table_ptr + seq.to(tl.int64) * stride_bt
    k_head = k_cache_ptr + kv_h * stride_kh
    v_head = v_cache_ptr + kv_h * stride_vh

    m_i = -float("inf")
    l_i = 0.0
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for start in range(0, seq_len, BLOCK_N):
        pos = start + tl.arange(0, BLOCK_N)
        pos_ok = pos < seq_len
        page = tl.load(table_row + pos // PAGE_SIZE, mask=pos_ok, other=0).to(tl.int64)
        slot = pos % PAGE_SIZE
        kv_mask = pos_ok[:, None] & d_ok[None, :]

        k = tl.load(k_head + page[:, None] * stride_kb + slot[:, None] * stride_kp + d[None, :],
                    mask=kv_mask, other=0.0).to(tl.float32)
        s = tl.sum(k * q[None, :], axis=1)
        s = tl.where(pos_ok, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new)

        v = tl.load(v_head + page[:, None] * stride_vb + slot[:, None] * stride_vp + d[None, :],
                    mask=kv_mask, other=0.0).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        m_i = m_new

    out = acc / tl.maximum(l_i, 1e-20)
    tl.store(o_ptr + seq.to(tl.int64) * stride_os + h * stride_oh + d, out.to(o_ptr.dtype.element_ty), mask=d_ok)


def paged_decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_table: torch.Tensor, seq_lens: torch.Tensor, sm_scale: float | None = None):
    num_seqs, num_q_heads, head_dim = q.shape
    _, page_size, num_kv_heads, d_k = k_cache.shape
    assert d_k == head_dim and v_cache.shape == k_cache.shape
    assert num_q_heads % num_kv_heads == 0
    assert k_cache.stride(-1) == 1 and v_cache.stride(-1) == 1
    if q.stride(-1) != 1:
        q = q.contiguous()
    block_table = block_table.to(torch.int32)
    seq_lens = seq_lens.to(torch.int32)
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim)
    out = torch.empty((num_seqs, num_q_heads, head_dim), dtype=q.dtype, device=q.device)

    BLOCK_N = 64
    BLOCK_D = triton.next_power_of_2(head_dim)
    grid = (num_seqs, num_q_heads)
    paged_decode_kernel[grid](
        q, k_cache, v_cache, block_table, seq_lens, out,
        sm_scale,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        block_table.stride(0),
        out.stride(0), out.stride(1),
        HEAD_DIM=head_dim, QUERIES_PER_KV=num_q_heads // num_kv_heads, PAGE_SIZE=page_size,
        BLOCK_N=BLOCK_N, BLOCK_D=BLOCK_D, num_warps=4, num_stages=2,
    )
    return out
