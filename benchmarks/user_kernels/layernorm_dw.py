"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
LayerNorm backward, weight and bias gradients. dW = sum_rows(dy * (x - mean) * rstd), dB = sum_rows(dy).
Each program reduces a slab of rows for one column block and adds its partial sums into fp32 dW/dB with atomics.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def layernorm_dwdb_kernel(
    dy_ptr, x_ptr, mean_ptr, rstd_ptr, dw_ptr, db_ptr,
    M, N, rows_per_prog,
    stride_dy, stride_x,
    BLOCK_ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid_r = tl.program_id(0)
    pid_n = tl.program_id(1)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    row_begin = pid_r * rows_per_prog
    row_end = min(row_begin + rows_per_prog, M)

    acc_w = tl.zeros((BLOCK_ROWS, BLOCK_N), dtype=tl.float32)
    acc_b = tl.zeros((BLOCK_ROWS, BLOCK_N), dtype=tl.float32)
    for r0 in range(row_begin, row_end, BLOCK_ROWS):
        rows = r0 + tl.arange(0, BLOCK_ROWS)
        row_ok = rows < row_end
        m = row_ok[:, None] & col_ok[None, :]
        r64 = rows.to(tl.int64)
        dy = tl.load(dy_ptr + r64[:, None] * stride_dy + cols[None, :], mask=m, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + r64[:, None] * stride_x + cols[None, :], mask=m, other=0.0).to(tl.float32)
        mu = tl.load(mean_ptr + rows, mask=row_ok, other=0.0)
        rs = tl.load(rstd_ptr + rows, mask=row_ok, other=0.0)
        xhat = (x - mu[:, None]) * rs[:, None]
        acc_w += dy * xhat
        acc_b += dy

    part_w = tl.sum(acc_w, axis=0)
    part_b = tl.sum(acc_b, axis=0)
    tl.atomic_add(dw_ptr + cols, part_w, mask=col_ok)
    tl.atomic_add(db_ptr + cols, part_b, mask=col_ok)


def layernorm_dw_db(dy: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor):
    """dy, x: (..., N); mean, rstd: float32 per row. Returns (dW, dB), both float32 of shape (N,)."""
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    dy2 = dy.reshape(-1, N)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    if dy2.stride(-1) != 1:
        dy2 = dy2.contiguous()
    M = x2.shape[0]
    mean = mean.reshape(-1)
    rstd = rstd.reshape(-1)
    dw = torch.zeros((N,), dtype=torch.float32, device=x.device)
    db = torch.zeros((N,), dtype=torch.float32, device=x.device)

    BLOCK_ROWS = 32
    BLOCK_N = 128
    ROWS_PER_PROG = 256
    grid = (triton.cdiv(M, ROWS_PER_PROG), triton.cdiv(N, BLOCK_N))
    layernorm_dwdb_kernel[grid](
        dy2, x2, mean, rstd, dw, db,
        M, N, ROWS_PER_PROG,
        dy2.stride(0), x2.stride(0),
        BLOCK_ROWS=BLOCK_ROWS, BLOCK_N=BLOCK_N, num_warps=4,
    )
    return dw, db
