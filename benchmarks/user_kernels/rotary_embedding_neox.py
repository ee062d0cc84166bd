"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
NeoX-style rotary position embedding (rotate-halves, as in GPT-NeoX / Llama HF layout), out-of-place:
q (T, H, D) bf16, cos / sin (T, D // 2) f32 -> out (T, H, D) bf16 with, for i < D/2,
out[..., i] = q[..., i] * cos[t, i] - q[..., i + D/2] * sin[t, i] and
out[..., i + D/2] = q[..., i + D/2] * cos[t, i] + q[..., i] * sin[t, i] (math in fp32).
Grid (T, cdiv(H, BLOCK_H)): each program takes one token and BLOCK_H heads, loads the token's cos/sin
row once (BLOCK_HALF = next_power_of_2(D // 2), masked) and rotates a [BLOCK_H, BLOCK_HALF] tile of
each half. Fixed meta-parameters chosen by the host: BLOCK_H = 8 (4 when D > 128), num_warps = 4.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def rotary_neox_kernel(
    q_ptr, cos_ptr, sin_ptr, out_ptr,
    H, HALF,
    stride_qt, stride_qh, stride_qd,
    stride_ct, stride_st,
    stride_ot, stride_oh, stride_od,
    BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr,
):
    t = tl.program_id(0)
    pid_h = tl.program_id(1)
    offs_h = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_HALF)
    h_mask = offs_h < H
    d_mask = offs_d < HALF
    mask = h_mask[:, None] & d_mask[None, :]

    t64 = t.to(tl.int64)
    c = tl.load(cos_ptr + t64 * stride_ct + offs_d, mask=d_mask, other=0.0)
    s = tl.load(sin_ptr + t64 * stride_st + offs_d, mask=d_mask, other=0.0)

    q_row = q_ptr + t64 * stride_qt + offs_h[:, None] * stride_qh
    x1 = tl.load(q_row + offs_d[None, :] * stride_qd, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(q_row + (offs_d[None, :] + HALF) * stride_qd, mask=mask, other=0.0).to(tl.float32)

    y1 = x1 * c[None, :] - x2 * s[None, :]
    y2 = x2 * c[None, :] + x1 * s[None, :]

    o_row = out_ptr + t64 * stride_ot + offs_h[:, None] * stride_oh
    tl.store(o_row + offs_d[None, :] * stride_od, y1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(o_row + (offs_d[None, :] + HALF) * stride_od, y2.to(out_ptr.dtype.element_ty), mask=mask)


def rotary_embedding_neox(q, cos, sin):
    """q (T, H, D) bf16, cos/sin (T, D//2) f32 -> out (T, H, D) bf16 (NeoX rotate-halves)."""
    assert q.dim() == 3 and q.shape[2] % 2 == 0
    T, H, D = q.shape
    half = D // 2
    assert cos.shape == (T, half) and sin.shape == (T, half)
    cos = cos.contiguous()
    sin = sin.contiguous()
    out = torch.empty_like(q)
    BLOCK_HALF = triton.next_power_of_2(half)
    BLOCK_H = 8 if D <= 128 else 4
    grid = (T, triton.cdiv(H, BLOCK_H))
    rotary_neox_kernel[grid](
        q, cos, sin, out,
        H, half,
        q.stride(0), q.stride(1), q.stride(2),
        cos.stride(0), sin.stride(0),
        out.stride(0), out.stride(1), out.stride(2),
        BLOCK_H=BLOCK_H, BLOCK_HALF=BLOCK_HALF,
        num_warps=4,
    )
    return out
