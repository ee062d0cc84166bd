"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Flash-decoding reduce step: partial outputs o_part (B, Hq, S, D) fp32 and log-sum-exps lse_part (B, Hq, S) fp32 from
S KV splits -> out (B, Hq, D) bf16 = sum_s exp(lse_s - LSE) * o_s, with LSE = logsumexp_s(lse_s).
One program per (b, head).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def split_kv_combine_kernel(
    o_ptr, lse_ptr, out_ptr,
    num_splits, head_dim,
    stride_ob, stride_oh, stride_os,
    stride_lb, stride_lh,
    stride_outb, stride_outh,
    BLOCK_S: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)

    s = tl.arange(0, BLOCK_S)
    d = tl.arange(0, BLOCK_D)
    s_mask = s < num_splits
    d_mask = d < head_dim

    lse = tl.load(lse_ptr + b * stride_lb + h * stride_lh + s, mask=s_mask, other=float("-inf"))
    m = tl.max(lse, axis=0)
    # guard against all splits being empty (every lse == -inf)
    m = tl.where(m == float("-inf"), 0.0, m)
    w = tl.exp(lse - m)
    w = tl.where(s_mask, w, 0.0)
    denom = tl.sum(w, axis=0)

    o_ptrs = (o_ptr + b.to(tl.int64) * stride_ob + h * stride_oh
              + s[:, None] * stride_os + d[None, :])
    o = tl.load(o_ptrs, mask=s_mask[:, None] & d_mask[None, :], other=0.0)
    acc = tl.sum(o * w[:, None], axis=0)
    acc = acc / tl.maximum(denom, 1e-30)

    tl.store(out_ptr + b * stride_outb + h * stride_outh + d, acc.to(out_ptr.dtype.element_ty), mask=d_mask)


def split_kv_combine(o_part, lse_part):
    """o_part (B, Hq, S, D) fp32, lse_part (B, Hq, S) fp32 -> out (B, Hq, D) bf16."""
    B, Hq, S, D = o_part.shape
    if o_part.stride(-1) != 1:
        o_part = o_part.contiguous()
    if lse_part.stride(-1) != 1:
        lse_part = lse_part.contiguous()
    out = torch.empty((B, Hq, D), dtype=torch.bfloat16, device=o_part.device)
    BLOCK_S = max(triton.next_power_of_2(S), 2)
    BLOCK_D = triton.next_power_of_2(D)
    grid = (B, Hq)
    split_kv_combine_kernel[grid](
        o_part, lse_part, out,
        S, D,
        o_part.stride(0), o_part.stride(1), o_part.stride(2),
        lse_part.stride(0), lse_part.stride(1),
        out.stride(0), out.stride(1),
        BLOCK_S=BLOCK_S, BLOCK_D=BLOCK_D,
        num_warps=2,
    )
    return out
