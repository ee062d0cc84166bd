"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Sampled-token log-probability for RL rollouts / logprob return: logits (B, V); the host samples one token id per row
with torch.multinomial(softmax(logits)) and the kernel computes log_softmax(logits)[b, id_b] with one program per
row (looping over V in BLOCK_V chunks for an online max / sum-exp, then gathering the sampled logit).
Returns (token_ids (B,) int64, logprobs (B,) fp32).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def sampled_logprob_kernel(
    logits_ptr, ids_ptr, out_ptr,
    vocab, stride_lr,
    BLOCK_V: tl.constexpr,
):
    row = tl.program_id(0)
    row_ptr = logits_ptr + row.to(tl.int64) * stride_lr

    m_vec = tl.full((BLOCK_V,), float("-inf"), dtype=tl.float32)
    s_vec = tl.zeros((BLOCK_V,), dtype=tl.float32)
    for v0 in range(0, vocab, BLOCK_V):
        offs = v0 + tl.arange(0, BLOCK_V)
        x = tl.load(row_ptr + offs, mask=offs < vocab, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_vec, x)
        # lanes that have only seen -inf keep m = -inf; shift by 0 there so no inf - inf appears
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        s_vec = s_vec * tl.exp(m_vec - m_safe) + tl.exp(x - m_safe)
        m_vec = m_new

    m = tl.max(m_vec, axis=0)
    s = tl.sum(s_vec * tl.exp(m_vec - m), axis=0)
    lse = m + tl.log(s)

    tok = tl.load(ids_ptr + row)
    x_tok = tl.load(row_ptr + tok).to(tl.float32)
    tl.store(out_ptr + row, x_tok - lse)


def sampled_logprob_gather(logits, temperature=1.0):
    """logits (B, V) any float dtype. Samples from softmax(logits / temperature); logprob is of the raw logits."""
    B, V = logits.shape
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    token_ids = torch.multinomial(probs, num_samples=1).squeeze(-1)
    out = torch.empty((B,), dtype=torch.float32, device=logits.device)
    BLOCK_V = 2048  # noqa: F841 - as the user wrote it
    grid = (B,)
    sampled_logprob_kernel[grid](
        logits, token_ids, out,
        V, logits.stride(0),
        BLOCK_V=2048,
        num_warps=8,
    )
    return token_ids, out
