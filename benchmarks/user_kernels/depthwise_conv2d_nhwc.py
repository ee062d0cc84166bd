"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
depthwise 2-D convolution (MobileNet style) on a channels-last activation: x (N, H, W, C) f16/bf16,
weight (KH, KW, C), bias (C,) -> out (N, H, W, C) same dtype, stride 1, zero "same" padding
(KH // 2, KW // 2), out[n, h, w, c] = bias[c] + sum_{i,j} x[n, h + i - KH//2, w + j - KW//2, c] * weight[i, j, c],
fp32 accumulation. Grid (N * H, cdiv(W, BLOCK_W), cdiv(C, BLOCK_C)); program axis 0 is split into
(n, h) with // and %; each program owns a [BLOCK_W, BLOCK_C] output tile and loops over the KH x KW
taps (skipping tap rows outside the image with a scalar if), loading a shifted, boundary-masked
input tile and the tap's weight vector per iteration.
@triton.autotune over BLOCK_W / BLOCK_C / num_warps keyed on C and W.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_W": 8, "BLOCK_C": 64}, num_warps=2),
        triton.Config({"BLOCK_W": 16, "BLOCK_C": 64}, num_warps=4),
        triton.Config({"BLOCK_W": 8, "BLOCK_C": 128}, num_warps=4),
        triton.Config({"BLOCK_W": 32, "BLOCK_C": 32}, num_warps=4),
    ],
    key=["C", "W"],
)
@triton.jit
def depthwise_conv2d_nhwc_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr,
    H, W, C,
    KH: tl.constexpr, KW: tl.constexpr,
    BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr,
):
    pid_nh = tl.program_id(0)
    pid_w = tl.program_id(1)
    pid_c = tl.program_id(2)
    n = pid_nh // H
    h = pid_nh % H

    offs_w = pid_w * BLOCK_W + tl.arange(0, BLOCK_W)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    w_mask = offs_w < W
    c_mask = offs_c < C

    x_base = x_ptr + n.to(tl.int64) * H * W * C
    acc = tl.zeros((BLOCK_W, BLOCK_C), dtype=tl.float32)
    for i in range(KH):
        hin = h + i - KH // 2
        if (hin >= 0) & (hin < H):  # input rows above / below the image contribute zero
            for j in range(KW):
                win = offs_w + j - KW // 2
                ok = (win >= 0) & (win < W)
                ptrs = x_base + (hin * W + win)[:, None] * C + offs_c[None, :]
                xv = tl.load(ptrs, mask=ok[:, None] & c_mask[None, :], other=0.0)
                wv = tl.load(w_ptr + (i * KW + j) * C + offs_c, mask=c_mask, other=0.0)
                acc += xv.to(tl.float32) * wv.to(tl.float32)[None, :]

    bias = tl.load(b_ptr + offs_c, mask=c_mask, other=0.0).to(tl.float32)
    acc += bias[None, :]
    out_base = out_ptr + n.to(tl.int64) * H * W * C + h * W * C
    out_ptrs = out_base + offs_w[:, None] * C + offs_c[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=w_mask[:, None] & c_mask[None, :])


def depthwise_conv2d_nhwc(x, weight, bias):
    """x (N, H, W, C), weight (KH, KW, C), bias (C,) -> (N, H, W, C), stride 1, same padding."""
    assert x.dim() == 4 and weight.dim() == 3 and bias.dim() == 1
    N, H, W, C = x.shape
    KH, KW, Cw = weight.shape
    assert Cw == C and bias.shape[0] == C
    x = x.contiguous()
    weight = weight.contiguous()
    out = torch.empty_like(x)
    grid = lambda meta: (N * H, triton.cdiv(W, meta["BLOCK_W"]), triton.cdiv(C, meta["BLOCK_C"]))
    depthwise_conv2d_nhwc_kernel[grid](
        x, weight, bias, out,
        H, W, C,
        KH=KH, KW=KW,
    )
    return out
