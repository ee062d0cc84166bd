"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Pixel shuffle (depth-to-space) on channels-last tensors: x (N, H, W, C*r*r) any dtype/strides, r int ->
out (N, H*r, W*r, C) contiguous, out[n, h*r+i, w*r+j, c] = x[n, h, w, c*r*r + i*r + j]
(same channel order as torch.nn.functional.pixel_shuffle on NCHW).
Grid (cdiv(N*H*r*W*r, BLOCK_P), cdiv(C, BLOCK_C)); each program handles a BLOCK_P x BLOCK_C tile of
(flattened output pixels, output channels) and rebuilds (n, h, i, w, j) with integer division/modulo.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def pixel_shuffle_nhwc_kernel(
    x_ptr, out_ptr,
    P, C, Ho, Wo,
    stride_xn, stride_xh, stride_xw, stride_xc,
    R: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    offs_p = pid_p.to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    p_mask = offs_p < P
    c_mask = offs_c < C

    n = offs_p // (Ho * Wo)
    rem = offs_p % (Ho * Wo)
    oh = rem // Wo
    ow = rem % Wo
    h = oh // R
    i = oh % R
    w = ow // R
    j = ow % R

    in_row = n * stride_xn + h * stride_xh + w * stride_xw + (i * R + j) * stride_xc
    in_ptrs = x_ptr + in_row[:, None] + (offs_c * (R * R))[None, :] * stride_xc
    mask = p_mask[:, None] & c_mask[None, :]
    vals = tl.load(in_ptrs, mask=mask)

    out_ptrs = out_ptr + offs_p[:, None] * C + offs_c[None, :]
    tl.store(out_ptrs, vals, mask=mask)


def pixel_shuffle_nhwc(x, r):
    """x (N, H, W, C*r*r) -> (N, H*r, W*r, C), same dtype."""
    assert x.dim() == 4 and x.shape[3] % (r * r) == 0
    N, H, W, Cin = x.shape
    C = Cin // (r * r)
    Ho, Wo = H * r, W * r
    out = torch.empty((N, Ho, Wo, C), device=x.device, dtype=x.dtype)
    P = N * Ho * Wo
    BLOCK_C = min(triton.next_power_of_2(C), 128)
    BLOCK_P = 64
    grid = (triton.cdiv(P, BLOCK_P), triton.cdiv(C, BLOCK_C))
    pixel_shuffle_nhwc_kernel[grid](
        x, out,
        P, C, Ho, Wo,
        x.stride(0), x.stride(1), x.stride(2), x.stride(3),
        R=r, BLOCK_P=BLOCK_P, BLOCK_C=BLOCK_C,
        num_warps=4,
    )
    return out
