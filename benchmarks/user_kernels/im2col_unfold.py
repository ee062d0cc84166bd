"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
im2col / unfold (same result as torch.nn.functional.unfold with dilation 1): x (N, C, H, W), kernel
(kh, kw), stride, padding -> out (N, C*kh*kw, L) same dtype, L = OH * OW, where row r = (c, i, j) with
c = r // (kh*kw), i = (r // kw) % kh, j = r % kw, column l = (oh, ow) = (l // OW, l % OW) and
out[n, r, l] = x[n, c, oh*stride - padding + i, ow*stride - padding + j] (zero outside the image).
Grid (cdiv(L, BLOCK_L), cdiv(C*kh*kw, BLOCK_R), N); each program fills a [BLOCK_R, BLOCK_L] tile with
a masked gather (writes are coalesced along L). Tile sizes are plain constexprs picked by the host
wrapper (BLOCK_R=16, BLOCK_L=128, num_warps=4); kh, kw, stride, padding are constexpr.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def im2col_unfold_kernel(
    x_ptr, out_ptr,
    C, H, W, OW, L,
    stride_xn, stride_xc, stride_xh, stride_xw,
    KH: tl.constexpr, KW: tl.constexpr, STRIDE: tl.constexpr, PAD: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_L: tl.constexpr,
):
    pid_l = tl.program_id(0)
    pid_r = tl.program_id(1)
    n = tl.program_id(2).to(tl.int64)
    R = C * KH * KW

    offs_r = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_l = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    r_mask = offs_r < R
    l_mask = offs_l < L

    c = offs_r // (KH * KW)
    i = (offs_r // KW) % KH
    j = offs_r % KW
    oh = offs_l // OW
    ow = offs_l % OW

    hin = oh[None, :] * STRIDE - PAD + i[:, None]
    win = ow[None, :] * STRIDE - PAD + j[:, None]
    inside = (hin >= 0) & (hin < H) & (win >= 0) & (win < W)
    mask = r_mask[:, None] & l_mask[None, :]

    src = x_ptr + n * stride_xn + c[:, None] * stride_xc + hin * stride_xh + win * stride_xw
    vals = tl.load(src, mask=mask & inside, other=0.0)

    dst = out_ptr + n * R * L + offs_r[:, None] * L + offs_l[None, :]
    tl.store(dst, vals, mask=mask)


def im2col_unfold(x, kh, kw, stride=1, padding=0):
    """x (N, C, H, W) -> (N, C*kh*kw, OH*OW), like F.unfold(x, (kh, kw), stride=stride, padding=padding)."""
    assert x.dim() == 4
    N, C, H, W = x.shape
    OH = (H + 2 * padding - kh) // stride + 1
    OW = (W + 2 * padding - kw) // stride + 1
    assert OH > 0 and OW > 0
    L = OH * OW
    R = C * kh * kw
    out = torch.empty((N, R, L), device=x.device, dtype=x.dtype)
    BLOCK_R = 16
    BLOCK_L = 128
    grid = (triton.cdiv(L, BLOCK_L), triton.cdiv(R, BLOCK_R), N)
    im2col_unfold_kernel[grid](
        x, out,
        C, H, W, OW, L,
        x.stride(0), x.stride(1), x.stride(2), x.stride(3),
        KH=kh, KW=kw, STRIDE=stride, PAD=padding,
        BLOCK_R=BLOCK_R, BLOCK_L=BLOCK_L,
        num_warps=4,
    )
    return out
