"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Scaled, causally masked softmax over materialized attention scores (the unfused "eager attention" path):
scores (B, H, Sq, Sk) f16/bf16 with Sk >= Sq, query row i sitting at absolute position i + (Sk - Sq)
(bottom-right aligned causal mask, as in prefill after a cached prefix), float scale ->
probs (B, H, Sq, Sk) same dtype, probs[..., i, j] = softmax_j(scale * scores[..., i, j]) over j <= i + Sk - Sq,
and exactly 0 for the masked j > i + Sk - Sq.
1-D grid of B * H * Sq programs, one query row each: the whole row is loaded at once in a BLOCK_K =
next_power_of_2(Sk) vector (masked loads skip the future keys), max / exp / sum in fp32, then one store of the
full row including the zeros. Host-chosen meta-parameters: BLOCK_K as above, num_warps = 4 up to 2048 keys,
8 above that.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def causal_scaled_softmax_kernel(
    s_ptr, p_ptr,
    H, Sq, Sk,
    stride_sb, stride_sh, stride_sq, stride_sk,
    stride_pb, stride_ph, stride_pq, stride_pk,
    scale,
    BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0)
    i = pid % Sq
    bh = pid // Sq
    h = bh % H
    b = bh // H

    s_row = s_ptr + b.to(tl.int64) * stride_sb + h.to(tl.int64) * stride_sh + i.to(tl.int64) * stride_sq
    p_row = p_ptr + b.to(tl.int64) * stride_pb + h.to(tl.int64) * stride_ph + i.to(tl.int64) * stride_pq

    offs = tl.arange(0, BLOCK_K)
    last = i + (Sk - Sq)
    visible = offs <= last
    x = tl.load(s_row + offs * stride_sk, mask=visible, other=0.0).to(tl.float32)
    x = tl.where(visible, x * scale, -float("inf"))
    x_max = tl.max(x, axis=0)
    e = tl.exp(x - x_max)
    e = tl.where(visible, e, 0.0)
    denom = tl.sum(e, axis=0)
    probs = e / denom
    tl.store(p_row + offs * stride_pk, probs.to(p_ptr.dtype.element_ty), mask=offs < Sk)


def causal_scaled_softmax(scores, scale):
    """scores (B, H, Sq, Sk) with Sk >= Sq, float scale -> causal softmax probs, same shape and dtype."""
    assert scores.dim() == 4
    B, H, Sq, Sk = scores.shape
    assert Sk >= Sq
    probs = torch.empty((B, H, Sq, Sk), device=scores.device, dtype=scores.dtype)
    BLOCK_K = triton.next_power_of_2(Sk)
    num_warps = 4 if BLOCK_K <= 2048 else 8
    grid = (B * H * Sq,)
    causal_scaled_softmax_kernel[grid](
        scores, probs,
        H, Sq, Sk,
        scores.stride(0), scores.stride(1), scores.stride(2), scores.stride(3),
        probs.stride(0), probs.stride(1), probs.stride(2), probs.stride(3),
        float(scale),
        BLOCK_K=BLOCK_K,
        num_warps=num_warps,
    )
    return probs
