"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
y = gelu_tanh(x + bias) in bf16, as a persistent kernel: the grid is one program per SM and each
program walks the rows with a stride of the number of programs, looping over the columns in BLOCK_N chunks.
"""
import torch
import triton
import triton.language as tl

NUM_SMS = 132  # H100 SXM


@triton.jit
def persistent_bias_gelu_kernel(x_ptr, b_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y,
                                BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols0 = tl.arange(0, BLOCK_N)
    for row in range(pid, n_rows, nprog):
        x_row = x_ptr + tl.cast(row, tl.int64) * stride_x
        y_row = y_ptr + tl.cast(row, tl.int64) * stride_y
        for c0 in range(0, n_cols, BLOCK_N):
            cols = c0 + cols0
            m = cols < n_cols
            v = tl.load(x_row + cols, mask=m, other=0.0).to(tl.float32)
            v += tl.load(b_ptr + cols, mask=m, other=0.0).to(tl.float32)
            # tanh(u) = 2 * sigmoid(2u) - 1
            u = 0.7978845608028654 * v * (1.0 + 0.044715 * v * v)
            th = 2.0 * tl.sigmoid(2.0 * u) - 1.0
            out = 0.5 * v * (1.0 + th)
            tl.store(y_row + cols, out.to(y_ptr.dtype.element_ty), mask=m)


def add_bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    n_rows = x2.shape[0]
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    BLOCK_N = 2048
    grid = (max(1, min(NUM_SMS, n_rows)),)
    persistent_bias_gelu_kernel[grid](x2, bias, y, n_rows, n_cols, x2.stride(0), y.stride(0),
                                      BLOCK_N=BLOCK_N, num_warps=8)
    return y.reshape(x.shape)
