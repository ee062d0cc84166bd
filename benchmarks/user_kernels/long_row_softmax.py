"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Softmax over long rows (a vocabulary), two passes over the row in BLOCK-wide chunks: max and sum, then write.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (1024, 4096) for w in (4, 8)],
    key=["n_cols"],
)
@triton.jit
def long_softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    m = tl.full((BLOCK,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        tl.store(y_ptr + row * n_cols + cols, (tl.exp(x - row_max) / total).to(tl.bfloat16), mask=cols < n_cols)


def softmax(x: torch.Tensor) -> torch.Tensor:
    rows, n_cols = x.shape
    y = torch.empty_like(x)
    long_softmax_kernel[(rows,)](x, y, n_cols)
    return y
