"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Rotary position embedding (half-split, NeoX style) applied to q of shape (tokens, heads, head_dim) into a new tensor.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def rope_kernel(q_ptr, cos_ptr, sin_ptr, out_ptr, n_heads, stride_qt, stride_qh, stride_ot, stride_oh, stride_ct,
                BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    tok = tl.program_id(0)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    d = tl.arange(0, BLOCK_D)
    hmask = heads[:, None] < n_heads
    cos = tl.load(cos_ptr + tok * stride_ct + d).to(tl.float32)
    sin = tl.load(sin_ptr + tok * stride_ct + d).to(tl.float32)
    q_row = q_ptr + tok * stride_qt + heads[:, None] * stride_qh
    x1 = tl.load(q_row + d[None, :], mask=hmask, other=0.0).to(tl.float32)
    x2 = tl.load(q_row + BLOCK_D + d[None, :], mask=hmask, other=0.0).to(tl.float32)
    y1 = x1 * cos[None, :] - x2 * sin[None, :]
    y2 = x2 * cos[None, :] + x1 * sin[None, :]
    o_row = out_ptr + tok * stride_ot + heads[:, None] * stride_oh
    tl.store(o_row + d[None, :], y1.to(out_ptr.dtype.element_ty), mask=hmask)
    tl.store(o_row + BLOCK_D + d[None, :], y2.to(out_ptr.dtype.element_ty), mask=hmask)


def apply_rope(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    tokens, heads, head_dim = q.shape
    out = torch.empty_like(q)
    grid = (tokens, triton.cdiv(heads, 4))
    rope_kernel[grid](q, cos, sin, out, heads, q.stride(0), q.stride(1), out.stride(0), out.stride(1), cos.stride(0),
                      BLOCK_H=4, BLOCK_D=head_dim // 2)
    return out
