"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
One decode step of a linear-attention layer with a decaying recurrent state: S' = decay * S + k^T v, o = q S'.
q, k (B, H, d_k), v (B, H, d_v), state (B, H, d_k, d_v) fp32, decay (B, H) -> o (B, H, d_v), new state.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def linear_attn_decode_kernel(
    q_ptr, k_ptr, v_ptr, s_ptr, decay_ptr, o_ptr, s_out_ptr,
    n_heads, d_k, d_v, scale,
    stride_qb, stride_qh, stride_kb, stride_kh, stride_vb, stride_vh,
    stride_sb, stride_sh, stride_sk,
    stride_db, stride_dh,
    stride_ob, stride_oh,
    stride_nb, stride_nh, stride_nk,
    BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):
    bh = tl.program_id(0)
    pid_v = tl.program_id(1)
    b = bh // n_heads
    h = bh % n_heads
    b64 = b.to(tl.int64)

    cv = pid_v * BLOCK_V + tl.arange(0, BLOCK_V)
    v_ok = cv < d_v
    v = tl.load(v_ptr + b64 * stride_vb + h * stride_vh + cv, mask=v_ok, other=0.0).to(tl.float32)
    g = tl.load(decay_ptr + b64 * stride_db + h * stride_dh).to(tl.float32)

    s_base = s_ptr + b64 * stride_sb + h.to(tl.int64) * stride_sh
    n_base = s_out_ptr + b64 * stride_nb + h.to(tl.int64) * stride_nh
    q_base = q_ptr + b64 * stride_qb + h * stride_qh
    k_base = k_ptr + b64 * stride_kb + h * stride_kh

    o = tl.zeros([BLOCK_V], dtype=tl.float32)
    for k0 in range(0, d_k, BLOCK_K):
        ck = k0 + tl.arange(0, BLOCK_K)
        k_ok = ck < d_k
        mask = k_ok[:, None] & v_ok[None, :]
        q = tl.load(q_base + ck, mask=k_ok, other=0.0).to(tl.float32)
        k = tl.load(k_base + ck, mask=k_ok, other=0.0).to(tl.float32)
        s = tl.load(s_base + ck[:, None] * stride_sk + cv[None, :], mask=mask, other=0.0)
        s = g * s + k[:, None] * v[None, :]
        tl.store(n_base + ck[:, None] * stride_nk + cv[None, :], s, mask=mask)
        o += tl.sum(q[:, None] * s, axis=0)

    tl.store(o_ptr + b64 * stride_ob + h * stride_oh + cv, (o * scale).to(o_ptr.dtype.element_ty), mask=v_ok)


def linear_attn_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, state: torch.Tensor,
                       decay: torch.Tensor, scale: float = 1.0, inplace: bool = False):
    """Returns (o (B, H, d_v) in q's dtype, new state (B, H, d_k, d_v) fp32)."""
    B, H, d_k = q.shape
    d_v = v.shape[-1]
    assert k.shape == (B, H, d_k) and v.shape == (B, H, d_v) and state.shape == (B, H, d_k, d_v)
    assert state.dtype == torch.float32
    q = q if q.stride(-1) == 1 else q.contiguous()
    k = k if k.stride(-1) == 1 else k.contiguous()
    v = v if v.stride(-1) == 1 else v.contiguous()
    if state.stride(-1) != 1:
        assert not inplace
        state = state.contiguous()
    decay = decay.to(torch.float32).expand(B, H)
    new_state = state if inplace else torch.empty_like(state)
    o = torch.empty((B, H, d_v), dtype=q.dtype, device=q.device)

    BLOCK_K = 32
    BLOCK_V = 64
    grid = (B * H, triton.cdiv(d_v, BLOCK_V))
    linear_attn_decode_kernel[grid](
        q, k, v, state, decay, o, new_state,
        H, d_k, d_v, scale,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        state.stride(0), state.stride(1), state.stride(2),
        decay.stride(0), decay.stride(1),
        o.stride(0), o.stride(1),
        new_state.stride(0), new_state.stride(1), new_state.stride(2),
        BLOCK_K=BLOCK_K, BLOCK_V=BLOCK_V, num_warps=4,
    )
    return o, new_state
