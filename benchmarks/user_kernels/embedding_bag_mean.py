"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
EmbeddingBag(mode="mean") for recsys / sparse features: table (V, D) fp16; the host draws bag indices
(num_bags, bag_size) int64 with torch.randint and per-bag lengths (num_bags,) in [1, bag_size]; each program
(bag, D block) averages the first lengths[b] gathered rows in fp32. Output (num_bags, D) in the table dtype.
Returns (out, indices, lengths). Autotuned over BLOCK_D / BLOCK_B keyed on D.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_D": 64, "BLOCK_B": 16}, num_warps=2),
        triton.Config({"BLOCK_D": 128, "BLOCK_B": 16}, num_warps=4),
        triton.Config({"BLOCK_D": 128, "BLOCK_B": 32}, num_warps=4),
        triton.Config({"BLOCK_D": 256, "BLOCK_B": 8}, num_warps=8),
    ],
    key=["dim"],
)
@triton.jit
def embedding_bag_mean_kernel(
    table_ptr, indices_ptr, lengths_ptr, out_ptr,
    dim, stride_tv, stride_ib, stride_ob,
    BLOCK_D: tl.constexpr,
    BLOCK_B: tl.constexpr,
):
    bag = tl.program_id(0)
    pid_d = tl.program_id(1)
    cols = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    cmask = cols < dim

    n = tl.load(lengths_ptr + bag).to(tl.int32)
    idx_row = indices_ptr + bag.to(tl.int64) * stride_ib

    acc = tl.zeros((BLOCK_B, BLOCK_D), dtype=tl.float32)
    for j0 in range(0, n, BLOCK_B):
        j = j0 + tl.arange(0, BLOCK_B)
        jmask = j < n
        idx = tl.load(idx_row + j, mask=jmask, other=0)
        x = tl.load(table_ptr + idx[:, None] * stride_tv + cols[None, :],
                    mask=jmask[:, None] & cmask[None, :], other=0.0)
        acc += x.to(tl.float32)

    mean = tl.sum(acc, axis=0) / tl.maximum(n, 1).to(tl.float32)
    tl.store(out_ptr + bag.to(tl.int64) * stride_ob + cols, mean.to(out_ptr.dtype.element_ty), mask=cmask)


def embedding_bag_mean(table, num_bags, bag_size):
    """table (V, D). Draws indices (num_bags, bag_size) in [0, V) and lengths in [1, bag_size]."""
    V, D = table.shape
    if table.stride(-1) != 1:
        table = table.contiguous()
    indices = torch.randint(0, V, (num_bags, bag_size), dtype=torch.int64, device=table.device)
    lengths = torch.randint(1, bag_size + 1, (num_bags,), dtype=torch.int64, device=table.device)
    out = torch.empty((num_bags, D), dtype=table.dtype, device=table.device)
    grid = lambda meta: (num_bags, triton.cdiv(D, meta["BLOCK_D"]))
    embedding_bag_mean_kernel[grid](
        table, indices, lengths, out,
        D, table.stride(0), indices.stride(0), out.stride(0),
    )
    return out, indices, lengths
