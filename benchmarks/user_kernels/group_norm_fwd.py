"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
GroupNorm forward: x (N, C, H, W) contiguous bf16, weight/bias (C,) bf16, num_groups G; fp32 mean/var per (n, group),
out (N, C, H, W) bf16. One program per (n, group), two looped passes over the group's C/G*H*W contiguous elements.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def group_norm_fwd_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    C, HW, num_groups, eps,
    BLOCK_SIZE: tl.constexpr,
):
    n = tl.program_id(0)
    g = tl.program_id(1)
    cpg = C // num_groups
    group_numel = cpg * HW
    # elements of one (n, group) are contiguous in NCHW
    base = (n.to(tl.int64) * C + g * cpg) * HW
    x_base = x_ptr + base
    y_base = y_ptr + base

    offs = tl.arange(0, BLOCK_SIZE)
    acc_sum = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    acc_sq = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, group_numel, BLOCK_SIZE):
        idx = start + offs
        mask = idx < group_numel
        v = tl.load(x_base + idx, mask=mask, other=0.0).to(tl.float32)
        acc_sum += v
        acc_sq += v * v
    mean = tl.sum(acc_sum, axis=0) / group_numel
    var = tl.sum(acc_sq, axis=0) / group_numel - mean * mean
    var = tl.maximum(var, 0.0)
    rstd = 1.0 / tl.sqrt(var + eps)

    for start in range(0, group_numel, BLOCK_SIZE):
        idx = start + offs
        mask = idx < group_numel
        ch = g * cpg + idx // HW
        v = tl.load(x_base + idx, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + ch, mask=mask, other=1.0).to(tl.float32)
        b = tl.load(b_ptr + ch, mask=mask, other=0.0).to(tl.float32)
        out = (v - mean) * rstd * w + b
        tl.store(y_base + idx, out.to(y_ptr.dtype.element_ty), mask=mask)


def group_norm_fwd(x, weight, bias, num_groups=32, eps=1e-5):
    """x (N, C, H, W), weight/bias (C,); C must be divisible by num_groups. Returns y like x."""
    N, C, H, W = x.shape
    assert C % num_groups == 0
    x = x.contiguous()
    y = torch.empty_like(x)
    grid = (N, num_groups)
    group_norm_fwd_kernel[grid](
        x, weight, bias, y,
        C, H * W, num_groups, eps,
        BLOCK_SIZE=2048,
        num_warps=8,
    )
    return y
