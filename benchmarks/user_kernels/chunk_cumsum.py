"""Written as a user brings a kernel: chunked cumulative sum of gates for linear attention.

g [batch, seqlen, heads] float32 -> out, the cumsum along seqlen restarted every CHUNK positions.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _chunk_cumsum_kernel(G, OUT, seqlen, heads,
                         s_gb, s_gt, s_ob, s_ot,
                         CHUNK: tl.constexpr, BLOCK_H: tl.constexpr):
    pid_c = tl.program_id(0)
    b = tl.program_id(1).to(tl.int64)
    t = pid_c * CHUNK + tl.arange(0, CHUNK)
    tmask = t < seqlen
    for h0 in range(0, heads, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        m = tmask[:, None] & (h[None, :] < heads)
        g = tl.load(G + b * s_gb + t[:, None] * s_gt + h[None, :], mask=m, other=0.0).to(tl.float32)
        c = tl.cumsum(g, axis=0)
        tl.store(OUT + b * s_ob + t[:, None] * s_ot + h[None, :], c, mask=m)


def chunk_cumsum(g, chunk_size=64):
    batch, seqlen, heads = g.shape
    if g.stride(-1) != 1:
        g = g.contiguous()
    out = torch.empty((batch, seqlen, heads), dtype=torch.float32, device=g.device)
    BLOCK_H = min(triton.next_power_of_2(heads), 32)
    grid = (triton.cdiv(seqlen, chunk_size), batch)
    _chunk_cumsum_kernel[grid](g, out, seqlen, heads,
                               g.stride(0), g.stride(1), out.stride(0), out.stride(1),
                               CHUNK=chunk_size, BLOCK_H=BLOCK_H, num_warps=4)
    return out
