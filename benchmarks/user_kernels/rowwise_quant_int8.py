"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Per-token symmetric int8 quantisation: each row scaled by its absmax / 127, rounded and clamped, scales kept in fp32.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def quantize_rows_kernel(x_ptr, q_ptr, scale_ptr, N, stride_x, stride_q, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    absmax = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-8)
    scale = absmax / 127.0
    y = x / scale
    # round half away from zero, then clamp to the int8 range
    y = tl.where(y >= 0, tl.floor(y + 0.5), tl.ceil(y - 0.5))
    y = tl.minimum(tl.maximum(y, -127.0), 127.0)
    tl.store(q_ptr + row * stride_q + cols, y.to(tl.int8), mask=mask)
    tl.store(scale_ptr + row, scale)


def quantize_rows(x: torch.Tensor):
    M, N = x.shape
    q = torch.empty((M, N), dtype=torch.int8, device=x.device)
    scales = torch.empty((M,), dtype=torch.float32, device=x.device)
    block_n = triton.next_power_of_2(N)
    quantize_rows_kernel[(M,)](x, q, scales, N, x.stride(0), q.stride(0), BLOCK_N=block_n, num_warps=8)
    return q, scales
