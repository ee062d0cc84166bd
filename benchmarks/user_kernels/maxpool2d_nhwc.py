"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
2-D max pooling, kernel 3x3, stride 2, padding 1, on channels-last x (N, H, W, C) bf16 -> out (N, OH, OW, C) bf16,
OH = (H + 2 - 3) // 2 + 1. One program per (n * OH + output row, output-column block, channel block).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def maxpool2d_nhwc_kernel(
    x_ptr, y_ptr,
    H, W, C, OH, OW,
    stride_xn, stride_xh, stride_xw,
    stride_yn, stride_yh, stride_yw,
    KSIZE: tl.constexpr,
    STRIDE: tl.constexpr,
    PAD: tl.constexpr,
    BLOCK_W: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    pid_row = tl.program_id(0)
    pid_w = tl.program_id(1)
    pid_c = tl.program_id(2)
    n = pid_row // OH
    oh = pid_row % OH

    ow = pid_w * BLOCK_W + tl.arange(0, BLOCK_W)
    c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    ow_mask = ow < OW
    c_mask = c < C

    x_base = x_ptr + n.to(tl.int64) * stride_xn
    acc = tl.full([BLOCK_W, BLOCK_C], float("-inf"), tl.float32)
    for kh in tl.static_range(KSIZE):
        ih = oh * STRIDE - PAD + kh
        # rows above/below the image (padding) contribute nothing
        if (ih >= 0) & (ih < H):
            for kw in tl.static_range(KSIZE):
                iw = ow * STRIDE - PAD + kw
                w_ok = (iw >= 0) & (iw < W) & ow_mask
                mask = w_ok[:, None] & c_mask[None, :]
                ptrs = x_base + ih * stride_xh + iw[:, None] * stride_xw + c[None, :]
                v = tl.load(ptrs, mask=mask, other=float("-inf")).to(tl.float32)
                acc = tl.maximum(acc, v)

    y_ptrs = (y_ptr + n.to(tl.int64) * stride_yn + oh * stride_yh
              + ow[:, None] * stride_yw + c[None, :])
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=ow_mask[:, None] & c_mask[None, :])


def maxpool2d_nhwc(x):
    """x (N, H, W, C) channels-last bf16 -> (N, OH, OW, C), 3x3 window, stride 2, padding 1."""
    N, H, W, C = x.shape
    if x.stride(-1) != 1:
        x = x.contiguous()
    KSIZE, STRIDE, PAD = 3, 2, 1
    OH = (H + 2 * PAD - KSIZE) // STRIDE + 1
    OW = (W + 2 * PAD - KSIZE) // STRIDE + 1
    y = torch.empty((N, OH, OW, C), dtype=x.dtype, device=x.device)
    BLOCK_W = 8
    BLOCK_C = 64
    grid = (N * OH, triton.cdiv(OW, BLOCK_W), triton.cdiv(C, BLOCK_C))
    maxpool2d_nhwc_kernel[grid](
        x, y,
        H, W, C, OH, OW,
        x.stride(0), x.stride(1), x.stride(2),
        y.stride(0), y.stride(1), y.stride(2),
        KSIZE=KSIZE, STRIDE=STRIDE, PAD=PAD,
        BLOCK_W=BLOCK_W, BLOCK_C=BLOCK_C,
        num_warps=4,
    )
    return y
