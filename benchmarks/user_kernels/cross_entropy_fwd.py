"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Per-token cross-entropy loss forward over a large vocabulary using an online log-sum-exp across vocab chunks.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_V": 1024}, num_warps=4),
        triton.Config({"BLOCK_V": 2048}, num_warps=8),
        triton.Config({"BLOCK_V": 4096}, num_warps=8),
        triton.Config({"BLOCK_V": 8192}, num_warps=16),
    ],
    key=["n_vocab"],
)
@triton.jit
def cross_entropy_fwd_kernel(
    logits_ptr, labels_ptr, loss_ptr,
    n_vocab, stride_row, ignore_index,
    BLOCK_V: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    row_ptr = logits_ptr + row * stride_row
    label = tl.load(labels_ptr + row)

    m = float("-inf")
    s = 0.0
    for start in range(0, n_vocab, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        x = tl.load(row_ptr + cols, mask=cols < n_vocab, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    lse = m + tl.log(s)

    ignored = label == ignore_index
    safe_label = tl.where(ignored, 0, label)
    target = tl.load(row_ptr + safe_label).to(tl.float32)
    loss = tl.where(ignored, 0.0, lse - target)
    tl.store(loss_ptr + row, loss)


def cross_entropy_loss(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """logits: (n_tokens, vocab), labels: (n_tokens,) int -> per-token loss (float32, no reduction)."""
    assert logits.ndim == 2 and labels.shape[0] == logits.shape[0]
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    n_rows, n_vocab = logits.shape
    loss = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
    cross_entropy_fwd_kernel[(n_rows,)](
        logits, labels, loss,
        n_vocab, logits.stride(0), ignore_index,
    )
    return loss
