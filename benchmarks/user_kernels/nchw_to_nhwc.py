"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
channels-first to channels-last permute of a 4-D tensor: x (N, C, H, W) (any strides, any dtype) ->
out (N, H, W, C) contiguous, out[n, h, w, c] = x[n, c, h, w]. The H*W plane is treated as one flat
spatial axis hw, split back into (h, w) = (hw // W, hw % W) for the strided source address. Grid
(N * cdiv(H*W, BLOCK_HW), cdiv(C, BLOCK_C)); program 0-axis id is split into (n, hw tile) with // and %;
each program loads a [BLOCK_C, BLOCK_HW] tile (coalesced along hw), transposes it in registers and
stores it as [BLOCK_HW, BLOCK_C] (coalesced along c). Tile sizes are plain constexprs picked by the host
wrapper (64 x 64, num_warps=4).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def nchw_to_nhwc_kernel(
    x_ptr, out_ptr,
    C, H, W,
    stride_xn, stride_xc, stride_xh, stride_xw,
    BLOCK_C: tl.constexpr, BLOCK_HW: tl.constexpr,
):
    pid0 = tl.program_id(0)
    pid_c = tl.program_id(1)
    HW = H * W
    num_hw_tiles = tl.cdiv(HW, BLOCK_HW)
    n = pid0 // num_hw_tiles
    hw_tile = pid0 % num_hw_tiles

    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    offs_hw = hw_tile * BLOCK_HW + tl.arange(0, BLOCK_HW)
    h = offs_hw // W
    w = offs_hw % W
    c_mask = offs_c < C
    hw_mask = offs_hw < HW

    # source tile [BLOCK_C, BLOCK_HW]
    src = (x_ptr + n.to(tl.int64) * stride_xn
           + offs_c[:, None] * stride_xc
           + h[None, :] * stride_xh + w[None, :] * stride_xw)
    tile = tl.load(src, mask=c_mask[:, None] & hw_mask[None, :], other=0.0)

    # destination tile [BLOCK_HW, BLOCK_C], out is contiguous (N, H*W, C)
    tile_t = tl.trans(tile)
    dst = out_ptr + n.to(tl.int64) * HW * C + offs_hw[:, None] * C + offs_c[None, :]
    tl.store(dst, tile_t, mask=hw_mask[:, None] & c_mask[None, :])


def nchw_to_nhwc(x):
    """x (N, C, H, W) -> (N, H, W, C) contiguous, same dtype."""
    assert x.dim() == 4
    N, C, H, W = x.shape
    out = torch.empty((N, H, W, C), device=x.device, dtype=x.dtype)
    BLOCK_C = 64
    BLOCK_HW = 64
    grid = (N * triton.cdiv(H * W, BLOCK_HW), triton.cdiv(C, BLOCK_C))
    nchw_to_nhwc_kernel[grid](
        x, out,
        C, H, W,
        x.stride(0), x.stride(1), x.stride(2), x.stride(3),
        BLOCK_C=BLOCK_C, BLOCK_HW=BLOCK_HW,
        num_warps=4,
    )
    return out
