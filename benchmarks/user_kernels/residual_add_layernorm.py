"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Fused residual add + LayerNorm forward (pre-LN transformer block input): x (T, D) bf16/f16, residual (T, D)
same dtype, weight (D,) and bias (D,) -> (out, hidden), both (T, D) in x's dtype, where
hidden = x + residual (rounded to x's dtype, the new residual stream) and
out = (hidden - mean(hidden)) / sqrt(var(hidden) + eps) * weight + bias, statistics in fp32 (biased variance).
Grid (T,): one program per row, the whole row held in a BLOCK_D = next_power_of_2(D) vector; the sum is
stored first, then mean and variance are reduced from the rounded sum and the normalized row is stored.
Host-chosen meta-parameters: BLOCK_D as above, num_warps = 4 up to 1024 columns, 8 up to 8192, 16 above.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def residual_add_layernorm_kernel(
    x_ptr, r_ptr, w_ptr, b_ptr, out_ptr, h_ptr,
    D,
    stride_xt, stride_rt, stride_ot, stride_ht,
    eps,
    BLOCK_D: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    cmask = cols < D

    x = tl.load(x_ptr + row * stride_xt + cols, mask=cmask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * stride_rt + cols, mask=cmask, other=0.0).to(tl.float32)
    h = (x + r).to(h_ptr.dtype.element_ty)
    tl.store(h_ptr + row * stride_ht + cols, h, mask=cmask)

    hf = h.to(tl.float32)
    mean = tl.sum(hf, axis=0) / D
    diff = tl.where(cmask, hf - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / D
    rstd = 1.0 / tl.sqrt(var + eps)

    w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    y = diff * rstd * w + b
    tl.store(out_ptr + row * stride_ot + cols, y.to(out_ptr.dtype.element_ty), mask=cmask)


def residual_add_layernorm(x, residual, weight, bias, eps=1e-5):
    """x, residual (T, D); weight, bias (D,) -> (layernorm(x + residual), x + residual), both in x's dtype."""
    assert x.dim() == 2 and residual.shape == x.shape
    T, D = x.shape
    assert weight.shape == (D,) and bias.shape == (D,)
    if x.stride(1) != 1:
        x = x.contiguous()
    if residual.stride(1) != 1:
        residual = residual.contiguous()
    weight = weight.contiguous()
    bias = bias.contiguous()
    out = torch.empty((T, D), device=x.device, dtype=x.dtype)
    hidden = torch.empty((T, D), device=x.device, dtype=x.dtype)
    BLOCK_D = triton.next_power_of_2(D)
    if BLOCK_D <= 1024:
        num_warps = 4
    elif BLOCK_D <= 8192:
        num_warps = 8
    else:
        num_warps = 16
    residual_add_layernorm_kernel[(T,)](
        x, residual, weight, bias, out, hidden,
        D,
        x.stride(0), residual.stride(0), out.stride(0), hidden.stride(0),
        eps,
        BLOCK_D=BLOCK_D,
        num_warps=num_warps,
    )
    return out, hidden
