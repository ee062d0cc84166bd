"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
MoE combine / un-permute: expert outputs (T*K, H) sit in expert-sorted order; out[t] = sum_k w[t,k] *
expert_out[pos[t*K+k]]
where pos is the inverse of the stable argsort of topk_ids (T, K). Output (T, H) in the expert_out dtype, fp32
accumulation.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def moe_combine_kernel(
    expert_out_ptr, weights_ptr, src_row_ptr, out_ptr,
    hidden,
    stride_er, stride_wt, stride_ot,
    TOPK: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    tok = tl.program_id(0)
    pid_h = tl.program_id(1)
    cols = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    cmask = cols < hidden

    acc = tl.zeros((BLOCK_H,), dtype=tl.float32)
    for k in tl.static_range(TOPK):
        src = tl.load(src_row_ptr + tok * TOPK + k).to(tl.int64)
        w = tl.load(weights_ptr + tok * stride_wt + k).to(tl.float32)
        x = tl.load(expert_out_ptr + src * stride_er + cols, mask=cmask, other=0.0)
        acc += w * x.to(tl.float32)

    out_row = out_ptr + tok.to(tl.int64) * stride_ot
    tl.store(out_row + cols, acc.to(out_ptr.dtype.element_ty), mask=cmask)


def moe_combine(expert_out, topk_weights, topk_ids):
    """expert_out (T*K, H), rows ordered by expert (stable sort of topk_ids.flatten());
    topk_weights (T, K) float; topk_ids (T, K) int. Returns (T, H)."""
    T, K = topk_ids.shape
    H = expert_out.shape[1]
    assert expert_out.shape[0] == T * K
    if expert_out.stride(-1) != 1:
        expert_out = expert_out.contiguous()
    # sorted position s holds flat slot order[s]; we need, for each flat slot, where it landed
    order = torch.argsort(topk_ids.reshape(-1), stable=True)
    src_row = torch.empty_like(order, dtype=torch.int32)
    src_row[order] = torch.arange(T * K, device=order.device, dtype=torch.int32)
    topk_weights = topk_weights.contiguous()
    out = torch.empty((T, H), dtype=expert_out.dtype, device=expert_out.device)
    if T == 0:
        return out
    BLOCK_H = 1024
    grid = (T, triton.cdiv(H, BLOCK_H))
    moe_combine_kernel[grid](
        expert_out, topk_weights, src_row, out,
        H,
        expert_out.stride(0), topk_weights.stride(0), out.stride(0),
        TOPK=K, BLOCK_H=BLOCK_H,
        num_warps=4,
    )
    return out
