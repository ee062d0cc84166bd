"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Softmax cross-entropy backward over a large vocabulary, recomputing the softmax instead of saving it:
logits (T, V) bf16/f16/f32, targets (T,) int64 (ignore_index rows get a zero gradient), grad_loss (T,) f32
(the per-token upstream gradient, already holding any 1/n of a mean reduction), optional label smoothing eps:
dlogits[t, v] = grad_loss[t] * (softmax(logits[t])[v] - (1 - eps) * [v == targets[t]] - eps / V), dtype of logits.
Grid (T,): one program per token row; pass 1 walks the row in BLOCK_V chunks keeping a running scalar max and
rescaled sum-exp in fp32 (log-sum-exp), pass 2 re-reads the logits and writes the gradient chunk by chunk.
Fixed meta-parameters from the host: BLOCK_V = 4096 (smaller for short rows), num_warps = 8.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def cross_entropy_bwd_kernel(
    logits_ptr, tgt_ptr, gl_ptr, dx_ptr,
    V,
    stride_lt, stride_lv,
    stride_dt, stride_dv,
    ignore_index, smoothing,
    BLOCK_V: tl.constexpr,
):
    row = tl.program_id(0)
    row64 = row.to(tl.int64)
    tgt = tl.load(tgt_ptr + row)
    g = tl.load(gl_ptr + row).to(tl.float32)
    g = tl.where(tgt == ignore_index, 0.0, g)

    x_row = logits_ptr + row64 * stride_lt
    d_row = dx_ptr + row64 * stride_dt

    m = -float("inf")
    s = 0.0
    for v0 in range(0, V, BLOCK_V):
        offs = v0 + tl.arange(0, BLOCK_V)
        x = tl.load(x_row + offs * stride_lv, mask=offs < V, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    lse = m + tl.log(s)

    uniform = smoothing / V
    on_target = 1.0 - smoothing
    for v0 in range(0, V, BLOCK_V):
        offs = v0 + tl.arange(0, BLOCK_V)
        vmask = offs < V
        x = tl.load(x_row + offs * stride_lv, mask=vmask, other=0.0).to(tl.float32)
        p = tl.exp(x - lse)
        grad = p - uniform - tl.where(offs == tgt, on_target, 0.0)
        tl.store(d_row + offs * stride_dv, (grad * g).to(dx_ptr.dtype.element_ty), mask=vmask)


def cross_entropy_backward(logits, targets, grad_loss, ignore_index=-100, label_smoothing=0.0):
    """logits (T, V), targets (T,) int, grad_loss (T,) f32 -> dlogits (T, V) in the logits dtype."""
    assert logits.dim() == 2
    T, V = logits.shape
    assert targets.shape == (T,) and grad_loss.shape == (T,)
    targets = targets.contiguous()
    grad_loss = grad_loss.contiguous()
    dlogits = torch.empty_like(logits)
    BLOCK_V = min(4096, triton.next_power_of_2(V))
    grid = (T,)
    cross_entropy_bwd_kernel[grid](
        logits, targets, grad_loss, dlogits,
        V,
        logits.stride(0), logits.stride(1),
        dlogits.stride(0), dlogits.stride(1),
        ignore_index, float(label_smoothing),
        BLOCK_V=BLOCK_V,
        num_warps=8,
    )
    return dlogits
