"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Single-query decode attention over a contiguous KV cache, one program per (batch, head) with an online softmax.
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def decode_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq_len, sm_scale,
                            stride_qb, stride_qh, stride_kb, stride_kh, stride_ks,
                            stride_vb, stride_vh, stride_vs, stride_ob, stride_oh,
                            BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + b * stride_qb + h * stride_qh + d).to(tl.float32)
    k_base = k_ptr + b.to(tl.int64) * stride_kb + h.to(tl.int64) * stride_kh
    v_base = v_ptr + b.to(tl.int64) * stride_vb + h.to(tl.int64) * stride_vh
    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros((HEAD_DIM,), dtype=tl.float32)
    for start in range(0, seq_len, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        nmask = n < seq_len
        k = tl.load(k_base + n[:, None] * stride_ks + d[None, :], mask=nmask[:, None], other=0.0).to(tl.float32)
        s = tl.sum(k * q[None, :], axis=1) * sm_scale
        s = tl.where(nmask, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new)
        v = tl.load(v_base + n[:, None] * stride_vs + d[None, :], mask=nmask[:, None], other=0.0).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        m_i = m_new
    out = acc / l_i
    tl.store(o_ptr + b * stride_ob + h * stride_oh + d, out.to(o_ptr.dtype.element_ty))


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    batch, heads, head_dim = q.shape
    seq_len = k.shape[2]
    o = torch.empty_like(q)
    sm_scale = 1.0 / math.sqrt(head_dim)
    decode_attention_kernel[(batch, heads)](q, k, v, o, seq_len, sm_scale,
                                            q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2),
                                            v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1),
                                            BLOCK_N=64, HEAD_DIM=head_dim, num_warps=4)
    return o
