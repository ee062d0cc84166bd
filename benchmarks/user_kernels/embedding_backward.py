"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Embedding backward: grad_weight (num_embeddings, D) fp32, zero-initialised, += grad_out (T, D) bf16 rows scattered by
token ids (T,) int64 with tl.atomic_add (duplicate ids accumulate). Ids are drawn with torch.randint unless given.
Returns (grad_weight, token_ids).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def embedding_backward_kernel(
    grad_out_ptr, ids_ptr, grad_w_ptr,
    T, D,
    stride_gt, stride_wn,
    BLOCK_T: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    pid_t = tl.program_id(0)
    pid_d = tl.program_id(1)

    t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    t_mask = t < T
    d_mask = d < D
    mask = t_mask[:, None] & d_mask[None, :]

    ids = tl.load(ids_ptr + t, mask=t_mask, other=0)
    g = tl.load(grad_out_ptr + t.to(tl.int64)[:, None] * stride_gt + d[None, :], mask=mask, other=0.0)
    dst = grad_w_ptr + ids.to(tl.int64)[:, None] * stride_wn + d[None, :]
    tl.atomic_add(dst, g.to(tl.float32), mask=mask, sem="relaxed")


def embedding_backward(grad_out, num_embeddings, token_ids=None):
    """grad_out (T, D) bf16, token ids (T,) int64 in [0, num_embeddings) or None.
    Returns (grad_weight (num_embeddings, D) fp32, token_ids)."""
    T, D = grad_out.shape
    if grad_out.stride(-1) != 1:
        grad_out = grad_out.contiguous()
    if token_ids is None:
        token_ids = torch.randint(0, num_embeddings, (T,), device=grad_out.device)
    grad_weight = torch.zeros((num_embeddings, D), dtype=torch.float32, device=grad_out.device)
    BLOCK_T = 8
    BLOCK_D = 256
    grid = (triton.cdiv(T, BLOCK_T), triton.cdiv(D, BLOCK_D))
    embedding_backward_kernel[grid](
        grad_out, token_ids, grad_weight,
        T, D,
        grad_out.stride(0), grad_weight.stride(0),
        BLOCK_T=BLOCK_T, BLOCK_D=BLOCK_D,
        num_warps=4,
    )
    return grad_weight, token_ids
