"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Jensen-Shannon divergence (beta = 0.5) between student and teacher logits, both (T, V) bf16 with V up to 152k;
returns the per-row loss (T,) fp32. One program per row: online max/sum-exp pass over V, then a looped JSD pass.
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
    key=["V"],
)
@triton.jit
def jsd_loss_kernel(
    s_ptr, t_ptr, loss_ptr,
    V,
    stride_s, stride_t,
    BLOCK_V: tl.constexpr,
):
    row = tl.program_id(0)
    s_row = s_ptr + row.to(tl.int64) * stride_s
    t_row = t_ptr + row.to(tl.int64) * stride_t
    offs = tl.arange(0, BLOCK_V)

    # pass 1: running max and sum of exp for both rows
    m_s = tl.full([BLOCK_V], float("-inf"), tl.float32)
    m_t = tl.full([BLOCK_V], float("-inf"), tl.float32)
    l_s = tl.zeros([BLOCK_V], dtype=tl.float32)
    l_t = tl.zeros([BLOCK_V], dtype=tl.float32)
    for start in range(0, V, BLOCK_V):
        idx = start + offs
        mask = idx < V
        xs = tl.load(s_row + idx, mask=mask, other=float("-inf")).to(tl.float32)
        xt = tl.load(t_row + idx, mask=mask, other=float("-inf")).to(tl.float32)
        new_s = tl.maximum(m_s, xs)
        new_t = tl.maximum(m_t, xt)
        # lanes that have only seen padding keep max == -inf; avoid (-inf) - (-inf)
        safe_s = tl.where(new_s == float("-inf"), 0.0, new_s)
        safe_t = tl.where(new_t == float("-inf"), 0.0, new_t)
        l_s = l_s * tl.exp(m_s - safe_s) + tl.exp(xs - safe_s)
        l_t = l_t * tl.exp(m_t - safe_t) + tl.exp(xt - safe_t)
        m_s = new_s
        m_t = new_t
    row_max_s = tl.max(m_s, axis=0)
    row_max_t = tl.max(m_t, axis=0)
    lse_s = row_max_s + tl.log(tl.sum(l_s * tl.exp(m_s - row_max_s), axis=0))
    lse_t = row_max_t + tl.log(tl.sum(l_t * tl.exp(m_t - row_max_t), axis=0))

    # pass 2: JSD = 0.5 * sum p (log p - log m) + 0.5 * sum q (log q - log m), m = (p + q) / 2
    acc = tl.zeros([BLOCK_V], dtype=tl.float32)
    for start in range(0, V, BLOCK_V):
        idx = start + offs
        mask = idx < V
        xs = tl.load(s_row + idx, mask=mask, other=0.0).to(tl.float32)
        xt = tl.load(t_row + idx, mask=mask, other=0.0).to(tl.float32)
        logq = xs - lse_s
        logp = xt - lse_t
        hi = tl.maximum(logp, logq)
        lo = tl.minimum(logp, logq)
        logm = hi + tl.log(0.5 + 0.5 * tl.exp(lo - hi))
        p = tl.exp(logp)
        q = tl.exp(logq)
        term = 0.5 * (p * (logp - logm) + q * (logq - logm))
        acc += tl.where(mask, term, 0.0)
    tl.store(loss_ptr + row, tl.sum(acc, axis=0))


def jsd_loss(student_logits, teacher_logits):
    """student_logits, teacher_logits (T, V) bf16 -> loss (T,) fp32."""
    T, V = student_logits.shape
    assert teacher_logits.shape == (T, V)
    if student_logits.stride(-1) != 1:
        student_logits = student_logits.contiguous()
    if teacher_logits.stride(-1) != 1:
        teacher_logits = teacher_logits.contiguous()
    loss = torch.empty((T,), dtype=torch.float32, device=student_logits.device)
    grid = (T,)
    jsd_loss_kernel[grid](
        student_logits, teacher_logits, loss,
        V,
        student_logits.stride(0), teacher_logits.stride(0),
    )
    return loss
