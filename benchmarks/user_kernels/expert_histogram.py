"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
MoE bookkeeping: number of tokens routed to each expert, from the (tokens, top_k) int32 expert ids of the router.
Each program takes BLOCK tokens and bumps an int32 counts vector with atomic adds. Ids outside [0, E) are skipped.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def expert_histogram_kernel(
    ids_ptr, counts_ptr,
    n_tokens, num_experts,
    stride_t, stride_k,
    TOP_K: tl.constexpr, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0)
    tok = pid * BLOCK + tl.arange(0, BLOCK)
    kk = tl.arange(0, BLOCK_K)
    mask = (tok[:, None] < n_tokens) & (kk[None, :] < TOP_K)
    ids = tl.load(ids_ptr + tok.to(tl.int64)[:, None] * stride_t + kk[None, :] * stride_k, mask=mask, other=-1)
    ok = mask & (ids >= 0) & (ids < num_experts)
    ones = tl.full([BLOCK, BLOCK_K], 1, dtype=tl.int32)
    tl.atomic_add(counts_ptr + ids, ones, mask=ok)


def expert_histogram(topk_ids: torch.Tensor, num_experts: int = 64):
    """topk_ids: (tokens, top_k) int32 -> counts (num_experts,) int32."""
    if topk_ids.dim() == 1:
        topk_ids = topk_ids[:, None]
    n_tokens, top_k = topk_ids.shape
    counts = torch.zeros(num_experts, dtype=torch.int32, device=topk_ids.device)
    if n_tokens == 0:
        return counts
    BLOCK = 128
    BLOCK_K = triton.next_power_of_2(top_k)
    grid = (triton.cdiv(n_tokens, BLOCK),)
    expert_histogram_kernel[grid](
        topk_ids, counts,
        n_tokens, num_experts,
        topk_ids.stride(0), topk_ids.stride(1),
        TOP_K=top_k, BLOCK=BLOCK, BLOCK_K=BLOCK_K, num_warps=4,
    )
    return counts
