"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Dequantise an int8 weight matrix with one scale per row (output channel) to bf16: w_bf16[i, j] = w[i, j] * scale[i].
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 1, "BLOCK_N": 1024}, num_warps=4),
        triton.Config({"BLOCK_M": 8, "BLOCK_N": 512}, num_warps=4),
        triton.Config({"BLOCK_M": 16, "BLOCK_N": 256}, num_warps=4),
        triton.Config({"BLOCK_M": 32, "BLOCK_N": 256}, num_warps=8),
    ],
    key=["n_rows", "n_cols"],
)
@triton.jit
def dequant_rows_kernel(w_ptr, scale_ptr, out_ptr, n_rows, n_cols, stride_w, stride_o,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols[None, :] < n_cols)
    r64 = rows.to(tl.int64)
    w = tl.load(w_ptr + r64[:, None] * stride_w + cols[None, :], mask=mask, other=0)
    s = tl.load(scale_ptr + rows, mask=row_ok, other=0.0).to(tl.float32)
    y = w.to(tl.float32) * s[:, None]
    tl.store(out_ptr + r64[:, None] * stride_o + cols[None, :], y.to(tl.bfloat16), mask=mask)


def dequant_int8_rows(w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """w: int8 (N, K); scale: (N,) or (N, 1) -> bf16 (N, K)."""
    n_rows, n_cols = w.shape
    if w.stride(-1) != 1:
        w = w.contiguous()
    scale = scale.reshape(-1)
    out = torch.empty((n_rows, n_cols), dtype=torch.bfloat16, device=w.device)
    grid = lambda meta: (triton.cdiv(n_rows, meta["BLOCK_M"]), triton.cdiv(n_cols, meta["BLOCK_N"]))  # noqa: E731
    dequant_rows_kernel[grid](w, scale, out, n_rows, n_cols, w.stride(0), out.stride(0))
    return out
