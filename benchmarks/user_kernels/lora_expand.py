"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Multi-LoRA expand: y (T, H) bf16 += x_lora (T, R) bf16 @ lora_b[adapter_ids[t]], lora_b (num_adapters, R, H) bf16,
adapter_ids (T,) int32 (id < 0: no adapter). Tokens are grouped by adapter on the host (sort + bincount), and a program
handles one (adapter, token tile, hidden tile) with tl.dot over K = R (16 or 64). Updates y in place and returns it.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def lora_expand_kernel(
    x_ptr, b_ptr, y_ptr,
    sorted_tok_ptr, seg_start_ptr, seg_len_ptr,
    hidden,
    stride_xt, stride_xr,
    stride_ba, stride_br, stride_bh,
    stride_yt, stride_yh,
    RANK: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    adapter = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_n = tl.program_id(2)

    seg_len = tl.load(seg_len_ptr + adapter)
    if pid_m * BLOCK_M >= seg_len:
        return
    seg_start = tl.load(seg_start_ptr + adapter)

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < seg_len
    tok = tl.load(sorted_tok_ptr + seg_start + rows, mask=row_mask, other=0).to(tl.int64)

    r = tl.arange(0, RANK)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < hidden

    x = tl.load(x_ptr + tok[:, None] * stride_xt + r[None, :] * stride_xr,
                mask=row_mask[:, None], other=0.0)
    w = tl.load(b_ptr + adapter.to(tl.int64) * stride_ba + r[:, None] * stride_br + cols[None, :] * stride_bh,
                mask=col_mask[None, :], other=0.0)
    acc = tl.dot(x, w)

    y_ptrs = y_ptr + tok[:, None] * stride_yt + cols[None, :] * stride_yh
    mask = row_mask[:, None] & col_mask[None, :]
    y = tl.load(y_ptrs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptrs, (y + acc).to(y_ptr.dtype.element_ty), mask=mask)


def lora_expand(y, x_lora, lora_b, adapter_ids=None):
    """y (T, H) bf16 (updated in place), x_lora (T, R) bf16, lora_b (num_adapters, R, H) bf16,
    adapter_ids (T,) int32 or None (then drawn in [-1, num_adapters))."""
    T, H = y.shape
    num_adapters, R, _ = lora_b.shape
    dev = y.device
    if adapter_ids is None:
        adapter_ids = torch.randint(-1, num_adapters, (T,), device=dev, dtype=torch.int32)
    # bucket tokens by adapter; "no adapter" goes to an extra last bucket that is never launched
    bucket = torch.where(adapter_ids < 0, torch.full_like(adapter_ids, num_adapters), adapter_ids).to(torch.int64)
    sorted_tok = torch.argsort(bucket, stable=True).to(torch.int32)
    seg_len = torch.bincount(bucket, minlength=num_adapters + 1)[:num_adapters]
    seg_start = (torch.cumsum(seg_len, 0) - seg_len).to(torch.int32)
    seg_len = seg_len.to(torch.int32)

    BLOCK_M = 64
    BLOCK_N = 128
    grid = (num_adapters, triton.cdiv(T, BLOCK_M), triton.cdiv(H, BLOCK_N))
    lora_expand_kernel[grid](
        x_lora, lora_b, y,
        sorted_tok, seg_start, seg_len,
        H,
        x_lora.stride(0), x_lora.stride(1),
        lora_b.stride(0), lora_b.stride(1), lora_b.stride(2),
        y.stride(0), y.stride(1),
        RANK=R, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        num_warps=4, num_stages=2,
    )
    return y
