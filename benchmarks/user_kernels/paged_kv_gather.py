"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Paged KV cache -> contiguous gather: cache (num_blocks, block_size, Hkv, D) with a block table (B, max_blocks) int32
that the host draws as torch.randperm(num_blocks)[: B * max_blocks]; the kernel copies each sequence's pages into a
contiguous (B, max_blocks * block_size, Hkv, D) buffer, one program per (sequence, page, head block).
Returns (gathered, block_table).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def paged_kv_gather_kernel(
    cache_ptr, block_table_ptr, out_ptr,
    num_heads, head_dim,
    stride_cb, stride_ct, stride_ch,
    stride_ob, stride_ot, stride_oh,
    stride_tb,
    PAGE_SIZE: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    seq = tl.program_id(0)
    page = tl.program_id(1)
    pid_h = tl.program_id(2)

    phys = tl.load(block_table_ptr + seq * stride_tb + page).to(tl.int64)

    t = tl.arange(0, PAGE_SIZE)
    h = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    d = tl.arange(0, BLOCK_D)
    mask = (h[None, :, None] < num_heads) & (d[None, None, :] < head_dim)

    src = (cache_ptr + phys * stride_cb + t[:, None, None] * stride_ct
           + h[None, :, None] * stride_ch + d[None, None, :])
    x = tl.load(src, mask=mask, other=0.0)

    tok = page * PAGE_SIZE + t
    dst = (out_ptr + seq.to(tl.int64) * stride_ob + tok.to(tl.int64)[:, None, None] * stride_ot
           + h[None, :, None] * stride_oh + d[None, None, :])
    tl.store(dst, x, mask=mask)


def paged_kv_gather(kv_cache, batch_size, max_blocks):
    """kv_cache (num_blocks, block_size, Hkv, D); needs batch_size * max_blocks <= num_blocks and a power-of-2
    block_size. Returns (out (B, max_blocks*block_size, Hkv, D), block_table (B, max_blocks) int32)."""
    num_blocks, block_size, Hkv, D = kv_cache.shape
    if kv_cache.stride(-1) != 1:
        kv_cache = kv_cache.contiguous()
    perm = torch.randperm(num_blocks, device=kv_cache.device)
    block_table = perm[: batch_size * max_blocks].view(batch_size, max_blocks).to(torch.int32)
    out = torch.empty((batch_size, max_blocks * block_size, Hkv, D), dtype=kv_cache.dtype, device=kv_cache.device)
    BLOCK_H = 2
    BLOCK_D = triton.next_power_of_2(D)
    grid = (batch_size, max_blocks, triton.cdiv(Hkv, BLOCK_H))
    paged_kv_gather_kernel[grid](
        kv_cache, block_table, out,
        Hkv, D,
        kv_cache.stride(0), kv_cache.stride(1), kv_cache.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        block_table.stride(0),
        PAGE_SIZE=block_size, BLOCK_H=2, BLOCK_D=BLOCK_D,
        num_warps=4,
    )
    return out, block_table
