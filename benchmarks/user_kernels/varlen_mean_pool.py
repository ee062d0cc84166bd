"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Ragged-batch mean pooling over packed sequences: x (total_tokens, Hd) bf16/f16/f32, cu_seqlens (nseq+1,)
int32 offsets (sequence s is rows cu_seqlens[s] .. cu_seqlens[s+1]-1) -> out (nseq, Hd) float32 means
(an empty sequence gives zeros). Grid (nseq, cdiv(Hd, BLOCK_H)); each program reads its bounds from
cu_seqlens and loops over the sequence's tokens in chunks of BLOCK_T, accumulating in fp32.
(The calls file builds cu_seqlens with torch.arange, i.e. equal lengths; the kernel handles any lengths.)
"""
import torch
import triton
import triton.language as tl


@triton.jit
def varlen_mean_pool_kernel(
    x_ptr, cu_ptr, out_ptr,
    Hd,
    stride_xt, stride_xh,
    stride_os, stride_oh,
    BLOCK_T: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    seq = tl.program_id(0)
    pid_h = tl.program_id(1)
    offs_h = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    h_mask = offs_h < Hd

    start = tl.load(cu_ptr + seq)
    end = tl.load(cu_ptr + seq + 1)

    acc = tl.zeros((BLOCK_T, BLOCK_H), dtype=tl.float32)
    for t0 in range(start, end, BLOCK_T):
        offs_t = t0 + tl.arange(0, BLOCK_T)
        mask = (offs_t < end)[:, None] & h_mask[None, :]
        ptrs = x_ptr + offs_t[:, None].to(tl.int64) * stride_xt + offs_h[None, :] * stride_xh
        acc += tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)

    total = tl.sum(acc, axis=0)
    n = tl.maximum(end - start, 1).to(tl.float32)
    tl.store(out_ptr + seq * stride_os + offs_h * stride_oh, total / n, mask=h_mask)


def varlen_mean_pool(x, cu_seqlens):
    """x (total_tokens, Hd), cu_seqlens (nseq+1,) int32 -> (nseq, Hd) float32."""
    assert x.dim() == 2 and cu_seqlens.dim() == 1
    nseq = cu_seqlens.numel() - 1
    Hd = x.shape[1]
    out = torch.empty((nseq, Hd), device=x.device, dtype=torch.float32)
    BLOCK_T = 32
    BLOCK_H = 128
    grid = (nseq, triton.cdiv(Hd, BLOCK_H))
    varlen_mean_pool_kernel[grid](
        x, cu_seqlens, out,
        Hd,
        x.stride(0), x.stride(1),
        out.stride(0), out.stride(1),
        BLOCK_T=BLOCK_T, BLOCK_H=BLOCK_H,
        num_warps=4,
    )
    return out
