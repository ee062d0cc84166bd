"""Written as a user brings a kernel: paged KV-cache write.

key/value [tokens, heads, head_dim] are scattered into [num_blocks, block_size, heads, head_dim]
caches at slot_mapping[t] = block * block_size + offset (negative slots are padding and skipped).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _kv_cache_write_kernel(K, V, KC, VC, SLOTS,
                           num_heads, head_dim, block_size,
                           s_kt, s_kh, s_vt, s_vh,
                           s_cb, s_co, s_ch,
                           BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    tok = tl.program_id(0)
    hblk = tl.program_id(1)
    slot = tl.load(SLOTS + tok)
    if slot < 0:
        return
    blk = slot // block_size
    off = slot % block_size
    heads = hblk * BLOCK_H + tl.arange(0, BLOCK_H)
    hmask = heads < num_heads
    src_k = K + tok.to(tl.int64) * s_kt + heads[:, None] * s_kh
    src_v = V + tok.to(tl.int64) * s_vt + heads[:, None] * s_vh
    dst = blk * s_cb + off * s_co + heads[:, None] * s_ch
    for d0 in range(0, head_dim, BLOCK_D):
        d = d0 + tl.arange(0, BLOCK_D)
        m = hmask[:, None] & (d[None, :] < head_dim)
        k = tl.load(src_k + d[None, :], mask=m)
        v = tl.load(src_v + d[None, :], mask=m)
        tl.store(KC + dst + d[None, :], k.to(KC.dtype.element_ty), mask=m)
        tl.store(VC + dst + d[None, :], v.to(VC.dtype.element_ty), mask=m)


def kv_cache_write(key, value, key_cache=None, value_cache=None, slot_mapping=None,
                   num_blocks=None, block_size=16):
    """Writes into key_cache / value_cache (allocated here when not given) and returns them."""
    tokens, heads, head_dim = key.shape
    if key_cache is None:
        num_blocks = num_blocks or triton.cdiv(tokens, block_size)
        key_cache = torch.zeros((num_blocks, block_size, heads, head_dim), dtype=key.dtype, device=key.device)
        value_cache = torch.zeros_like(key_cache)
    block_size = key_cache.shape[1]
    assert key.stride(-1) == 1 and value.stride(-1) == 1
    assert key_cache.is_contiguous() and value_cache.is_contiguous()
    slot_mapping = slot_mapping.contiguous()
    BLOCK_H = 8
    BLOCK_D = 64
    grid = (tokens, triton.cdiv(heads, BLOCK_H))
    _kv_cache_write_kernel[grid](
        key, value, key_cache, value_cache, slot_mapping,
        heads, head_dim, block_size,
        key.stride(0), key.stride(1), value.stride(0), value.stride(1),
        key_cache.stride(0), key_cache.stride(1), key_cache.stride(2),
        BLOCK_H=BLOCK_H, BLOCK_D=BLOCK_D, num_warps=2,
    )
    return key_cache, value_cache
