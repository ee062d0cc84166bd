"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Greedy sampling: argmax over the vocabulary of each row of the logits (first index wins on ties), returned as int64
token ids.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def argmax_rows_kernel(logits_ptr, out_ptr, vocab_size, row_stride, TILE_V: tl.constexpr):
    row = tl.program_id(0)
    base = logits_ptr + row.to(tl.int64) * row_stride
    offs = tl.arange(0, TILE_V)

    best_val = tl.full([TILE_V], float("-inf"), dtype=tl.float32)
    best_idx = tl.zeros([TILE_V], dtype=tl.int32)
    for start in range(0, vocab_size, TILE_V):
        idx = start + offs
        vals = tl.load(base + idx, mask=idx < vocab_size, other=float("-inf")).to(tl.float32)
        better = vals > best_val  # strict: earlier index kept on ties within a lane
        best_val = tl.where(better, vals, best_val)
        best_idx = tl.where(better, idx, best_idx)

    top = tl.max(best_val, axis=0)
    cand = tl.where(best_val == top, best_idx, vocab_size)
    token = tl.min(cand, axis=0)
    tl.store(out_ptr + row, token.to(tl.int64))


def greedy_sample(logits: torch.Tensor) -> torch.Tensor:
    """logits: (batch, vocab) -> next token ids (batch,) int64."""
    assert logits.ndim == 2
    if logits.stride(1) != 1:
        logits = logits.contiguous()
    batch, vocab = logits.shape
    out = torch.empty(batch, device=logits.device, dtype=torch.int64)

    TILE_V = min(4096, triton.next_power_of_2(vocab))
    num_warps = 8 if TILE_V >= 4096 else 4
    argmax_rows_kernel[(batch,)](logits, out, vocab, logits.stride(0), TILE_V=TILE_V, num_warps=num_warps)
    return out
