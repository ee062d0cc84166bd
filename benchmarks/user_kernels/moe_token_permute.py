"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
MoE dispatch / token permute: hidden states (T, H) and router logits (T, E); the host takes top-k experts per token
and a stable argsort of the flattened (T*K,) expert ids, then the kernel gathers out[i] = hidden[sorted_idx[i] // K]
into an expert-sorted (T*K, H) buffer in the hidden dtype. Also returns the sorted expert ids and sorted_idx (T*K,).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def moe_token_permute_kernel(
    hidden_ptr, sorted_idx_ptr, out_ptr,
    num_rows, hidden_size,
    stride_hr, stride_or,
    TOPK: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_h = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    rmask = rows < num_rows
    cmask = cols < hidden_size

    # flat slot t*K + k -> token t
    slot = tl.load(sorted_idx_ptr + rows, mask=rmask, other=0)
    src_tok = (slot // TOPK).to(tl.int64)

    mask = rmask[:, None] & cmask[None, :]
    x = tl.load(hidden_ptr + src_tok[:, None] * stride_hr + cols[None, :], mask=mask, other=0.0)
    dst = out_ptr + rows.to(tl.int64)[:, None] * stride_or + cols[None, :]
    tl.store(dst, x, mask=mask)


def moe_token_permute(hidden, router_logits, top_k=2):
    """hidden (T, H), router_logits (T, E). Returns (permuted (T*K, H), sorted_expert_ids (T*K,), sorted_idx (T*K,))."""
    T, H = hidden.shape
    if hidden.stride(-1) != 1:
        hidden = hidden.contiguous()
    topk_ids = torch.topk(router_logits, top_k, dim=-1).indices
    sorted_ids, sorted_idx = torch.sort(topk_ids.reshape(-1), stable=True)
    sorted_idx = sorted_idx.to(torch.int32)
    num_rows = T * top_k
    out = torch.empty((num_rows, H), dtype=hidden.dtype, device=hidden.device)
    BLOCK_M = 16
    BLOCK_H = 256
    grid = (triton.cdiv(num_rows, BLOCK_M), triton.cdiv(H, BLOCK_H))
    moe_token_permute_kernel[grid](
        hidden, sorted_idx, out,
        num_rows, H,
        hidden.stride(0), out.stride(0),
        TOPK=top_k, BLOCK_M=16, BLOCK_H=256,
        num_warps=4,
    )
    return out, sorted_ids, sorted_idx
