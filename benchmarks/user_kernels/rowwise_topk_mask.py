"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Row-wise top-k masking (e.g. top-k sparse attention scores or top-k logits filtering): scores (R, C) fp32; the host
finds each row's k-th largest value with torch.topk(...).values[:, -1] (R,), and the kernel writes
out[r, c] = scores[r, c] if scores[r, c] >= thresh[r] else -inf, one program per (row, column block). Output (R, C).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def rowwise_topk_mask_kernel(
    scores_ptr, thresh_ptr, out_ptr,
    n_cols, stride_sr, stride_or,
    BLOCK_C: tl.constexpr,
):
    row = tl.program_id(0)
    pid_c = tl.program_id(1)
    cols = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < n_cols

    thr = tl.load(thresh_ptr + row)
    s = tl.load(scores_ptr + row.to(tl.int64) * stride_sr + cols, mask=cmask, other=float("-inf"))
    y = tl.where(s >= thr, s, float("-inf"))
    tl.store(out_ptr + row.to(tl.int64) * stride_or + cols, y, mask=cmask)


def rowwise_topk_mask(scores, k):
    """scores (R, C) float, 1 <= k <= C. Ties with the k-th value are kept, so a row may keep more than k entries."""
    R, C = scores.shape
    if scores.stride(-1) != 1:
        scores = scores.contiguous()
    thresh = torch.topk(scores, k, dim=-1).values[:, -1].contiguous()
    out = torch.empty_like(scores)
    BLOCK_C = 1024
    grid = (R, triton.cdiv(C, BLOCK_C))
    rowwise_topk_mask_kernel[grid](
        scores, thresh, out,
        C, scores.stride(0), out.stride(0),
        BLOCK_C=1024,
        num_warps=4,
    )
    return out
