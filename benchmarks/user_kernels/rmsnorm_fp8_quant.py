"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
RMSNorm followed by dynamic per-token FP8 quantisation: x (T, H) bf16, weight (H,) bf16, eps ->
y = x * rsqrt(mean(x^2) + eps) * weight (in fp32), scale[t] = max(max|y[t]| / 448, 1e-12),
q = clamp(y / scale, -448, 448) -> q (T, H) torch.float8_e4m3fn and scales (T,) float32
(dequantise as q.float() * scale[:, None]). Grid (T,): one program per row, BLOCK = next_power_of_2(H).
Interpreter check: scales and the pre-cast values y / scale (kernel launched with a float32 q buffer)
match a float32 torch reference to fp32 rounding; the fp8 codes match the interpreter's own f32->fp8 cast
of that reference (the interpreter's fp8 cast is not round-to-nearest-even, so ~2% differ from torch's).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_fp8_quant_kernel(
    x_ptr, w_ptr, q_ptr, scale_ptr,
    H, eps,
    stride_xt, stride_qt,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < H

    x = tl.load(x_ptr + row.to(tl.int64) * stride_xt + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)

    var = tl.sum(x * x, axis=0) / H
    rstd = 1.0 / tl.sqrt(var + eps)
    y = x * rstd * w

    amax = tl.max(tl.abs(y), axis=0)
    scale = tl.maximum(amax / 448.0, 1e-12)
    q = y / scale
    q = tl.minimum(tl.maximum(q, -448.0), 448.0)

    tl.store(q_ptr + row.to(tl.int64) * stride_qt + offs, q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(scale_ptr + row, scale)


def rmsnorm_fp8_quant(x, weight, eps=1e-6):
    """x (T, H) bf16, weight (H,) -> (q (T, H) float8_e4m3fn, scales (T,) float32)."""
    assert x.dim() == 2 and weight.shape == (x.shape[1],)
    x = x.contiguous()
    T, H = x.shape
    q = torch.empty((T, H), device=x.device, dtype=torch.float8_e4m3fn)
    scales = torch.empty((T,), device=x.device, dtype=torch.float32)
    BLOCK = triton.next_power_of_2(H)
    num_warps = 8 if BLOCK >= 4096 else 4
    rmsnorm_fp8_quant_kernel[(T,)](
        x, weight, q, scales,
        H, eps,
        x.stride(0), q.stride(0),
        BLOCK=BLOCK,
        num_warps=num_warps,
    )
    return q, scales
