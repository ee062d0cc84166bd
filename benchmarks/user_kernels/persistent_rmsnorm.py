"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
RMSNorm forward over a persistent grid (one program per SM slot, rows strided).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_persistent_kernel(x_ptr, w_ptr, y_ptr, n_rows, n_cols, eps, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    for row in range(pid, n_rows, nprog):
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        tl.store(y_ptr + row * n_cols + cols, (x * rstd * w).to(tl.bfloat16), mask=mask)


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6, programs: int = 132 * 4) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    rmsnorm_persistent_kernel[(min(n_rows, programs),)](x, w, y, n_rows, n_cols, eps, BLOCK=block, num_warps=8)
    return y
