"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Sampling-side softmax with a temperature: probs = softmax(logits / temperature) over each row of the vocab.
One program per row; pass 1 keeps a running max and rescaled sum over BLOCK_V chunks, pass 2 writes fp32 probs.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_V": 1024}, num_warps=4),
        triton.Config({"BLOCK_V": 2048}, num_warps=4),
        triton.Config({"BLOCK_V": 2048}, num_warps=8),
        triton.Config({"BLOCK_V": 4096}, num_warps=8),
        triton.Config({"BLOCK_V": 8192}, num_warps=16),
    ],
    key=["vocab"],
)
@triton.jit
def temperature_softmax_kernel(
    logits_ptr, probs_ptr,
    vocab, inv_temp,
    stride_lr, stride_pr,
    BLOCK_V: tl.constexpr,
):
    row = tl.program_id(0)
    in_row = logits_ptr + row.to(tl.int64) * stride_lr
    out_row = probs_ptr + row.to(tl.int64) * stride_pr

    m = -float("inf")
    denom = 0.0
    for start in range(0, vocab, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        x = tl.load(in_row + cols, mask=cols < vocab, other=float("-inf")).to(tl.float32) * inv_temp
        m_new = tl.maximum(m, tl.max(x, axis=0))
        denom = denom * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new

    inv_denom = 1.0 / denom
    for start in range(0, vocab, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        ok = cols < vocab
        x = tl.load(in_row + cols, mask=ok, other=float("-inf")).to(tl.float32) * inv_temp
        tl.store(out_row + cols, tl.exp(x - m) * inv_denom, mask=ok)


def temperature_softmax(logits: torch.Tensor, temperature: float = 1.0):
    """logits (rows, vocab) -> probs (rows, vocab) float32."""
    assert temperature > 0
    if logits.dim() == 1:
        logits = logits[None, :]
    n_rows, vocab = logits.shape
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    probs = torch.empty((n_rows, vocab), dtype=torch.float32, device=logits.device)
    if n_rows == 0:
        return probs
    temperature_softmax_kernel[(n_rows,)](
        logits, probs,
        vocab, 1.0 / temperature,
        logits.stride(0), probs.stride(0),
    )
    return probs
