"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
CSR sparse x dense matmul: A is R x C in CSR form (values (nnz,) f16, crow (R+1,) int32 row offsets,
col (nnz,) int32 column indices), dense (C, Ncols) f16 -> out (R, Ncols) f16, out = A @ dense with
fp32 accumulation. Grid (R, cdiv(Ncols, BLOCK_N)); each program reads its row's [crow[r], crow[r+1])
range (a data-dependent loop bound) and, one nonzero at a time, gathers the BLOCK_N slice of the
matching dense row and accumulates value * row. @triton.autotune over BLOCK_N / num_warps keyed on Ncols.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_N": 32}, num_warps=1),
        triton.Config({"BLOCK_N": 64}, num_warps=2),
        triton.Config({"BLOCK_N": 128}, num_warps=4),
        triton.Config({"BLOCK_N": 256}, num_warps=4),
        triton.Config({"BLOCK_N": 256}, num_warps=8),
    ],
    key=["Ncols"],
)
@triton.jit
def spmm_csr_kernel(
    val_ptr, crow_ptr, col_ptr, b_ptr, out_ptr,
    Ncols,
    stride_bk, stride_bn,
    stride_om, stride_on,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < Ncols

    start = tl.load(crow_ptr + row)
    end = tl.load(crow_ptr + row + 1)

    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for i in range(start, end):
        c = tl.load(col_ptr + i).to(tl.int64)
        a = tl.load(val_ptr + i).to(tl.float32)
        b = tl.load(b_ptr + c * stride_bk + offs_n * stride_bn, mask=n_mask, other=0.0)
        acc += a * b.to(tl.float32)

    out_ptrs = out_ptr + row.to(tl.int64) * stride_om + offs_n * stride_on
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=n_mask)


def spmm_csr(values, crow, col, dense):
    """values (nnz,) f16, crow (R+1,) int32, col (nnz,) int32, dense (C, Ncols) f16 -> (R, Ncols) f16."""
    assert crow.dim() == 1 and col.shape == values.shape and dense.dim() == 2
    R = crow.numel() - 1
    Ncols = dense.shape[1]
    out = torch.empty((R, Ncols), device=dense.device, dtype=dense.dtype)
    grid = lambda meta: (R, triton.cdiv(Ncols, meta["BLOCK_N"]))
    spmm_csr_kernel[grid](
        values, crow, col, dense, out,
        Ncols,
        dense.stride(0), dense.stride(1),
        out.stride(0), out.stride(1),
    )
    return out
