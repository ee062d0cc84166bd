"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Sampler filtering: logits (rows, vocab) -> fp32 logits/temperature with everything outside the top-p nucleus or below
min_p * p_max set to -inf. Host sorts each row descending; one program per row scans sorted probs with a running cumsum
and scatters results back to the original vocab positions via the sort indices.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def topp_minp_mask_kernel(
    sorted_logits_ptr, sorted_idx_ptr, out_ptr,
    vocab, inv_temp, top_p, min_p,
    stride_sr, stride_ir, stride_or,
    BLOCK_V: tl.constexpr,
):
    row = tl.program_id(0)
    s_row = sorted_logits_ptr + row.to(tl.int64) * stride_sr
    i_row = sorted_idx_ptr + row.to(tl.int64) * stride_ir
    o_row = out_ptr + row.to(tl.int64) * stride_or

    # row is sorted descending, so the max is the first entry
    m = tl.load(s_row).to(tl.float32) * inv_temp

    denom = 0.0
    for start in range(0, vocab, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        x = tl.load(s_row + cols, mask=cols < vocab, other=float("-inf")).to(tl.float32) * inv_temp
        denom += tl.sum(tl.exp(x - m), axis=0)
    inv_denom = 1.0 / denom
    p_floor = min_p * inv_denom  # p_max = exp(0) / denom

    carry = 0.0
    for start in range(0, vocab, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        ok = cols < vocab
        x = tl.load(s_row + cols, mask=ok, other=float("-inf")).to(tl.float32) * inv_temp
        p = tl.exp(x - m) * inv_denom
        csum = tl.cumsum(p, axis=0) + carry
        keep = ((csum - p) < top_p) & (p >= p_floor)
        y = tl.where(keep, x, float("-inf"))
        dst = tl.load(i_row + cols, mask=ok, other=0)
        tl.store(o_row + dst, y, mask=ok)
        carry += tl.sum(p, axis=0)


def topp_minp_mask(logits, top_p=0.9, min_p=0.0, temperature=1.0):
    """logits (rows, vocab) any float dtype -> filtered fp32 logits (rows, vocab), -inf where removed."""
    assert temperature > 0 and 0.0 < top_p <= 1.0 and 0.0 <= min_p <= 1.0
    if logits.dim() == 1:
        logits = logits[None, :]
    n_rows, vocab = logits.shape
    sorted_logits, sorted_idx = torch.sort(logits, dim=-1, descending=True)
    out = torch.empty((n_rows, vocab), dtype=torch.float32, device=logits.device)
    if n_rows == 0:
        return out
    topp_minp_mask_kernel[(n_rows,)](
        sorted_logits, sorted_idx, out,
        vocab, 1.0 / temperature, top_p, min_p,
        sorted_logits.stride(0), sorted_idx.stride(0), out.stride(0),
        BLOCK_V=2048,
        num_warps=8,
    )
    return out
