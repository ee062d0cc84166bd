"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
5x5 Gaussian blur with zero padding over a batch of single-channel images x (B, H, W) float32 -> (B, H, W) float32.
The 25 normalized weights are computed on the host from sigma and passed as a (25,) float32 tensor. Grid
(B, cdiv(H, BLOCK_H), cdiv(W, BLOCK_W)); each program loads 25 shifted, masked 2-D tiles and sums weight * tile.
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def gaussian_blur5_kernel(
    x_ptr, w_ptr, y_ptr,
    H, W,
    stride_xb, stride_xh, stride_xw,
    stride_yb, stride_yh, stride_yw,
    BLOCK_H: tl.constexpr,
    BLOCK_W: tl.constexpr,
):
    b = tl.program_id(0)
    pid_h = tl.program_id(1)
    pid_w = tl.program_id(2)
    rows = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    cols = pid_w * BLOCK_W + tl.arange(0, BLOCK_W)
    x_base = x_ptr + b.to(tl.int64) * stride_xb
    acc = tl.zeros((BLOCK_H, BLOCK_W), dtype=tl.float32)
    for di in tl.static_range(5):
        r = rows + (di - 2)
        r_ok = (r >= 0) & (r < H)
        for dj in tl.static_range(5):
            c = cols + (dj - 2)
            c_ok = (c >= 0) & (c < W)
            wgt = tl.load(w_ptr + di * 5 + dj)
            v = tl.load(x_base + r[:, None] * stride_xh + c[None, :] * stride_xw,
                        mask=r_ok[:, None] & c_ok[None, :], other=0.0)
            acc += wgt * v
    out_mask = (rows < H)[:, None] & (cols < W)[None, :]
    tl.store(y_ptr + b.to(tl.int64) * stride_yb + rows[:, None] * stride_yh + cols[None, :] * stride_yw,
             acc, mask=out_mask)


def gaussian_blur5(x, sigma=1.0):
    """x (B, H, W) float32 -> blurred (B, H, W) float32 (5x5 Gaussian, zero padding)."""
    B, H, W = x.shape
    g = [math.exp(-((i - 2) ** 2) / (2.0 * sigma * sigma)) for i in range(5)]
    tot = sum(g)
    g = [v / tot for v in g]
    weights = torch.tensor([g[i] * g[j] for i in range(5) for j in range(5)],
                           dtype=torch.float32, device=x.device)
    y = torch.empty((B, H, W), device=x.device, dtype=torch.float32)
    BLOCK_H = 16
    BLOCK_W = 64
    grid = (B, triton.cdiv(H, BLOCK_H), triton.cdiv(W, BLOCK_W))
    gaussian_blur5_kernel[grid](
        x, weights, y,
        H, W,
        x.stride(0), x.stride(1), x.stride(2),
        y.stride(0), y.stride(1), y.stride(2),
        BLOCK_H=BLOCK_H, BLOCK_W=BLOCK_W,
        num_warps=4,
    )
    return y
