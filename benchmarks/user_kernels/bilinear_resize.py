"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Bilinear resize of an NCHW float tensor x (N, C, H, W) bf16/f32 to (N, C, out_h, out_w) in the same dtype, with
align_corners=False semantics (as torch.nn.functional.interpolate(mode="bilinear")), interpolating in fp32.
Grid (N * C, cdiv(out_h, BLOCK_H), cdiv(out_w, BLOCK_W)); each program computes a BLOCK_H x BLOCK_W output tile
of one image plane, gathering the four neighbouring input pixels per output pixel.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def bilinear_resize_kernel(
    x_ptr, y_ptr,
    H, W, OH, OW,
    scale_h, scale_w,
    stride_xp, stride_xh, stride_xw,
    stride_yp, stride_yh, stride_yw,
    BLOCK_H: tl.constexpr,
    BLOCK_W: tl.constexpr,
):
    plane = tl.program_id(0)
    pid_h = tl.program_id(1)
    pid_w = tl.program_id(2)

    oh = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    ow = pid_w * BLOCK_W + tl.arange(0, BLOCK_W)
    mask_h = oh < OH
    mask_w = ow < OW

    # source coordinates (half-pixel centres), clamped at 0 like PyTorch
    src_h = (oh.to(tl.float32) + 0.5) * scale_h - 0.5
    src_w = (ow.to(tl.float32) + 0.5) * scale_w - 0.5
    src_h = tl.maximum(src_h, 0.0)
    src_w = tl.maximum(src_w, 0.0)

    h0 = tl.minimum(src_h.to(tl.int32), H - 1)
    w0 = tl.minimum(src_w.to(tl.int32), W - 1)
    h1 = tl.minimum(h0 + 1, H - 1)
    w1 = tl.minimum(w0 + 1, W - 1)
    lh = src_h - h0.to(tl.float32)
    lw = src_w - w0.to(tl.float32)

    base = x_ptr + plane.to(tl.int64) * stride_xp
    m2 = mask_h[:, None] & mask_w[None, :]
    r0 = base + h0[:, None] * stride_xh
    r1 = base + h1[:, None] * stride_xh
    v00 = tl.load(r0 + w0[None, :] * stride_xw, mask=m2, other=0.0).to(tl.float32)
    v01 = tl.load(r0 + w1[None, :] * stride_xw, mask=m2, other=0.0).to(tl.float32)
    v10 = tl.load(r1 + w0[None, :] * stride_xw, mask=m2, other=0.0).to(tl.float32)
    v11 = tl.load(r1 + w1[None, :] * stride_xw, mask=m2, other=0.0).to(tl.float32)

    lw2 = lw[None, :]
    lh2 = lh[:, None]
    top = v00 * (1.0 - lw2) + v01 * lw2
    bot = v10 * (1.0 - lw2) + v11 * lw2
    out = top * (1.0 - lh2) + bot * lh2

    y_base = y_ptr + plane.to(tl.int64) * stride_yp
    tl.store(y_base + oh[:, None] * stride_yh + ow[None, :] * stride_yw,
             out.to(y_ptr.dtype.element_ty), mask=m2)


def bilinear_resize(x, out_h, out_w):
    """x (N, C, H, W) bf16/f32 -> (N, C, out_h, out_w), bilinear, align_corners=False."""
    assert x.dim() == 4
    n, c, h, w = x.shape
    x = x.contiguous()
    y = torch.empty((n, c, out_h, out_w), device=x.device, dtype=x.dtype)
    BLOCK_H = 16
    BLOCK_W = 64 if out_w >= 64 else 32
    grid = (n * c, triton.cdiv(out_h, BLOCK_H), triton.cdiv(out_w, BLOCK_W))
    bilinear_resize_kernel[grid](
        x, y,
        h, w, out_h, out_w,
        float(h) / float(out_h), float(w) / float(out_w),
        h * w, x.stride(2), x.stride(3),
        out_h * out_w, y.stride(2), y.stride(3),
        BLOCK_H=BLOCK_H, BLOCK_W=BLOCK_W,
        num_warps=4,
    )
    return y
