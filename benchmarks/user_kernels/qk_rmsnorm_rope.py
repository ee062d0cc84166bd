"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Per-head RMSNorm of q (learned weight over head_dim) fused with NeoX-style rotary embedding, cos/sin looked up by
each token's position. q (T, H, D), weight (D,), cos / sin (max_pos, D/2), positions (T,) -> (T, H, D).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def qk_rmsnorm_rope_kernel(
    q_ptr, w_ptr, cos_ptr, sin_ptr, pos_ptr, out_ptr,
    n_heads, eps,
    stride_qt, stride_qh,
    stride_ot, stride_oh,
    stride_cos, stride_sin,
    HEAD_DIM: tl.constexpr, HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr,
):
    tok = tl.program_id(0)
    pid_h = tl.program_id(1)

    heads = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    i = tl.arange(0, BLOCK_HALF)
    h_ok = heads < n_heads
    i_ok = i < HALF
    mask = h_ok[:, None] & i_ok[None, :]

    q_row = q_ptr + tok.to(tl.int64) * stride_qt + heads[:, None] * stride_qh
    x1 = tl.load(q_row + i[None, :], mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(q_row + HALF + i[None, :], mask=mask, other=0.0).to(tl.float32)

    ms = (tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / HEAD_DIM
    rstd = 1.0 / tl.sqrt(ms + eps)
    w1 = tl.load(w_ptr + i, mask=i_ok, other=0.0).to(tl.float32)
    w2 = tl.load(w_ptr + HALF + i, mask=i_ok, other=0.0).to(tl.float32)
    # round back to the input dtype after the norm, as the unfused norm module would
    y1 = (x1 * rstd[:, None] * w1[None, :]).to(q_ptr.dtype.element_ty).to(tl.float32)
    y2 = (x2 * rstd[:, None] * w2[None, :]).to(q_ptr.dtype.element_ty).to(tl.float32)

    pos = tl.load(pos_ptr + tok).to(tl.int64)
    c = tl.load(cos_ptr + pos * stride_cos + i, mask=i_ok, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + pos * stride_sin + i, mask=i_ok, other=0.0).to(tl.float32)
    o1 = y1 * c[None, :] - y2 * s[None, :]
    o2 = y2 * c[None, :] + y1 * s[None, :]

    out_row = out_ptr + tok.to(tl.int64) * stride_ot + heads[:, None] * stride_oh
    tl.store(out_row + i[None, :], o1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_row + HALF + i[None, :], o2.to(out_ptr.dtype.element_ty), mask=mask)


def qk_rmsnorm_rope(q: torch.Tensor, weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                    positions: torch.Tensor, eps: float = 1e-6, inplace: bool = False):
    n_tokens, n_heads, head_dim = q.shape
    assert head_dim % 2 == 0 and weight.numel() == head_dim
    half = head_dim // 2
    assert cos.shape[-1] == half and sin.shape[-1] == half
    assert q.stride(-1) == 1 or not inplace
    if q.stride(-1) != 1:
        q = q.contiguous()
    weight = weight.contiguous()
    cos = cos.contiguous()
    sin = sin.contiguous()
    positions = positions.contiguous()
    out = q if inplace else torch.empty_like(q)
    if n_tokens == 0:
        return out

    BLOCK_H = min(8, triton.next_power_of_2(n_heads))
    BLOCK_HALF = triton.next_power_of_2(half)
    grid = (n_tokens, triton.cdiv(n_heads, BLOCK_H))
    qk_rmsnorm_rope_kernel[grid](
        q, weight, cos, sin, positions, out,
        n_heads, eps,
        q.stride(0), q.stride(1),
        out.stride(0), out.stride(1),
        cos.stride(0), sin.stride(0),
        HEAD_DIM=head_dim, HALF=half, BLOCK_H=BLOCK_H, BLOCK_HALF=BLOCK_HALF, num_warps=4,
    )
    return out
