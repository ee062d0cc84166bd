"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Embedding lookup: out[t, :] = table[ids[t], :] in bf16, BLOCK_T tokens and BLOCK_D columns a program.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def embedding_kernel(ids_ptr, table_ptr, out_ptr, n_tokens, dim, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    ids = tl.load(ids_ptr + t, mask=t < n_tokens, other=0)
    m = (t[:, None] < n_tokens) & (d[None, :] < dim)
    rows = tl.load(table_ptr + ids[:, None].to(tl.int64) * dim + d[None, :], mask=m, other=0.0)
    tl.store(out_ptr + t[:, None].to(tl.int64) * dim + d[None, :], rows, mask=m)


def embedding(ids: torch.Tensor, table: torch.Tensor, block_t: int = 4, block_d: int = 512) -> torch.Tensor:
    n_tokens = ids.numel()
    dim = table.shape[1]
    out = torch.empty((n_tokens, dim), dtype=table.dtype, device=table.device)
    grid = (triton.cdiv(n_tokens, block_t), triton.cdiv(dim, block_d))
    embedding_kernel[grid](ids, table, out, n_tokens, dim, BLOCK_T=block_t, BLOCK_D=block_d, num_warps=4)
    return out
