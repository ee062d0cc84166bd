"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
MoE router. Softmax over the expert logits of each token fused with top-k selection;
writes the k routing weights (optionally renormalised to sum to 1) and the k expert ids.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_T": 1}, num_warps=1),
        triton.Config({"BLOCK_T": 4}, num_warps=2),
        triton.Config({"BLOCK_T": 16}, num_warps=4),
        triton.Config({"BLOCK_T": 32}, num_warps=8),
    ],
    key=["n_tokens", "n_experts"],
)
@triton.jit
def router_topk_kernel(
    logits_ptr, weights_ptr, ids_ptr,
    n_tokens, n_experts,
    stride_lt, stride_wt, stride_it,
    TOP_K: tl.constexpr, RENORM: tl.constexpr,
    BLOCK_E: tl.constexpr, BLOCK_T: tl.constexpr,
):
    pid = tl.program_id(0)
    tok = pid * BLOCK_T + tl.arange(0, BLOCK_T)
    exp_idx = tl.arange(0, BLOCK_E)
    tok_ok = tok < n_tokens
    valid = tok_ok[:, None] & (exp_idx[None, :] < n_experts)

    x = tl.load(logits_ptr + tok[:, None].to(tl.int64) * stride_lt + exp_idx[None, :],
                mask=valid, other=float("-inf")).to(tl.float32)
    row_max = tl.max(x, axis=1)
    # fully masked rows (past the end) would give nan; keep them finite
    row_max = tl.where(tok_ok, row_max, 0.0)
    e = tl.exp(x - row_max[:, None])
    e = tl.where(valid, e, 0.0)
    denom = tl.sum(e, axis=1)
    denom = tl.where(tok_ok, denom, 1.0)
    probs = e / denom[:, None]

    # k rounds of "take the max, knock it out"; chosen slots become -1 so they lose later rounds
    picked_sum = tl.zeros([BLOCK_T], dtype=tl.float32)
    for j in tl.static_range(TOP_K):
        best = tl.max(probs, axis=1)
        best_id = tl.argmax(probs, axis=1)
        picked_sum += best
        tl.store(weights_ptr + tok.to(tl.int64) * stride_wt + j, best, mask=tok_ok)
        tl.store(ids_ptr + tok.to(tl.int64) * stride_it + j, best_id.to(tl.int32), mask=tok_ok)
        probs = tl.where(exp_idx[None, :] == best_id[:, None], -1.0, probs)

    if RENORM:
        inv = 1.0 / tl.where(tok_ok, picked_sum, 1.0)
        for j in tl.static_range(TOP_K):
            w_ptrs = weights_ptr + tok.to(tl.int64) * stride_wt + j
            w = tl.load(w_ptrs, mask=tok_ok, other=0.0)
            tl.store(w_ptrs, w * inv, mask=tok_ok)


def topk_router(logits: torch.Tensor, top_k: int = 2, renormalize: bool = True):
    """logits: (tokens, experts) -> (weights float32 (tokens, top_k), expert ids int32 (tokens, top_k))."""
    n_tokens, n_experts = logits.shape
    assert top_k <= n_experts
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    weights = torch.empty((n_tokens, top_k), dtype=torch.float32, device=logits.device)
    ids = torch.empty((n_tokens, top_k), dtype=torch.int32, device=logits.device)
    BLOCK_E = triton.next_power_of_2(n_experts)
    grid = lambda meta: (triton.cdiv(n_tokens, meta["BLOCK_T"]),)  # noqa: E731
    router_topk_kernel[grid](
        logits, weights, ids,
        n_tokens, n_experts,
        logits.stride(0), weights.stride(0), ids.stride(0),
        TOP_K=top_k, RENORM=renormalize, BLOCK_E=BLOCK_E,
    )
    return weights, ids
