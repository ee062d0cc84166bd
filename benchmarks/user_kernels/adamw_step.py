"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Fused AdamW optimizer step over a flat parameter buffer of n elements: fp32 master params,
fp32 exp_avg / exp_avg_sq, bf16/fp16/fp32 grads; decoupled weight decay, bias correction, all updated in place.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 2048}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 4096}, num_warps=8),
    ],
    key=["n_elements"],
    restore_value=["param_ptr", "exp_avg_ptr", "exp_avg_sq_ptr"],
)
@triton.jit
def adamw_step_kernel(
    param_ptr, grad_ptr, exp_avg_ptr, exp_avg_sq_ptr,
    n_elements,
    lr, beta1, beta2, eps, weight_decay,
    bias_corr1, bias_corr2_sqrt,
    BLOCK_SIZE: tl.constexpr,
):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements

    p = tl.load(param_ptr + offs, mask=mask, other=0.0)
    g = tl.load(grad_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    m = tl.load(exp_avg_ptr + offs, mask=mask, other=0.0)
    v = tl.load(exp_avg_sq_ptr + offs, mask=mask, other=0.0)

    # decoupled weight decay
    p = p * (1.0 - lr * weight_decay)

    m = beta1 * m + (1.0 - beta1) * g
    v = beta2 * v + (1.0 - beta2) * g * g

    step_size = lr / bias_corr1
    denom = tl.sqrt(v) / bias_corr2_sqrt + eps
    p = p - step_size * (m / denom)

    tl.store(param_ptr + offs, p, mask=mask)
    tl.store(exp_avg_ptr + offs, m, mask=mask)
    tl.store(exp_avg_sq_ptr + offs, v, mask=mask)


def adamw_step(param, grad, exp_avg, exp_avg_sq, lr=1e-3, beta1=0.9, beta2=0.999,
               eps=1e-8, weight_decay=0.01, step=1):
    """All tensors have the same number of elements; param/exp_avg/exp_avg_sq are fp32 and updated in place.
    Returns param."""
    assert param.dtype == torch.float32 and exp_avg.dtype == torch.float32 and exp_avg_sq.dtype == torch.float32
    assert param.numel() == grad.numel() == exp_avg.numel() == exp_avg_sq.numel()
    assert param.is_contiguous() and exp_avg.is_contiguous() and exp_avg_sq.is_contiguous()
    grad = grad.contiguous()
    n = param.numel()
    if n == 0:
        return param
    bias_corr1 = 1.0 - beta1 ** step
    bias_corr2_sqrt = (1.0 - beta2 ** step) ** 0.5
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    adamw_step_kernel[grid](
        param, grad, exp_avg, exp_avg_sq,
        n,
        lr, beta1, beta2, eps, weight_decay,
        bias_corr1, bias_corr2_sqrt,
    )
    return param
