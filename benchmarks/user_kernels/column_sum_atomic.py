"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Column sums of a tall matrix: x (M, N) bf16/f16/f32 (any strides) -> out (N,) float32, out[n] = sum_m x[m, n].
Grid (cdiv(M, ROWS_PER_PROG), cdiv(N, BLOCK_N)); each program walks its ROWS_PER_PROG rows in chunks of
BLOCK_M, accumulates a BLOCK_M x BLOCK_N fp32 tile, reduces it over rows and tl.atomic_add's the partial
column sums into the zero-initialised output. ROWS_PER_PROG is set by a @triton.heuristics from M so that
there are at most about 256 row programs per column block.
"""
import torch
import triton
import triton.language as tl


def _rows_per_prog(args):
    # about 256 programs down the rows, never fewer rows than one BLOCK_M chunk
    return max(args["BLOCK_M"], triton.next_power_of_2(triton.cdiv(args["M"], 256)))


@triton.heuristics({"ROWS_PER_PROG": _rows_per_prog})
@triton.jit
def column_sum_kernel(
    x_ptr, out_ptr,
    M, N,
    stride_m, stride_n,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    ROWS_PER_PROG: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    row_start = pid_m * ROWS_PER_PROG

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for r in range(0, ROWS_PER_PROG, BLOCK_M):
        offs_m = row_start + r + tl.arange(0, BLOCK_M)
        mask = (offs_m < M)[:, None] & n_mask[None, :]
        ptrs = x_ptr + offs_m[:, None].to(tl.int64) * stride_m + offs_n[None, :] * stride_n
        x = tl.load(ptrs, mask=mask, other=0.0)
        acc += x.to(tl.float32)

    col = tl.sum(acc, axis=0)
    tl.atomic_add(out_ptr + offs_n, col, mask=n_mask)


def column_sum_atomic(x):
    """x (M, N) -> (N,) float32 column sums."""
    assert x.dim() == 2
    M, N = x.shape
    out = torch.zeros((N,), device=x.device, dtype=torch.float32)
    grid = lambda meta: (triton.cdiv(M, meta["ROWS_PER_PROG"]), triton.cdiv(N, meta["BLOCK_N"]))
    column_sum_kernel[grid](
        x, out,
        M, N,
        x.stride(0), x.stride(1),
        BLOCK_M=32, BLOCK_N=128,
        num_warps=4,
    )
    return out
