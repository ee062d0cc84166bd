"""Written as a user brings a kernel: RMSNorm backward.

dx per row plus per-program partial dw sums (float32) that the host reduces with torch.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_bwd_kernel(DY, X, W, RSTD, DX, DW_PART,
                        n_rows, n_cols,
                        stride_dy, stride_x, stride_dx,
                        BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for row in range(pid, n_rows, nprog):
        dy = tl.load(DY + row * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(RSTD + row)
        xhat = x * rstd
        g = dy * w
        c = tl.sum(g * xhat, axis=0) / n_cols
        dx = (g - xhat * c) * rstd
        tl.store(DX + row * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=mask)
        dw_acc += dy * xhat
    tl.store(DW_PART + pid * n_cols + cols, dw_acc, mask=mask)


def rmsnorm_backward(dy, x, weight, rstd):
    hidden = x.shape[-1]
    x2 = x.reshape(-1, hidden)
    dy2 = dy.reshape(-1, hidden)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    if dy2.stride(-1) != 1:
        dy2 = dy2.contiguous()
    rstd = rstd.reshape(-1).float().contiguous()
    rows = x2.shape[0]

    BLOCK_SIZE = triton.next_power_of_2(hidden)
    if BLOCK_SIZE <= 1024:
        num_warps = 4
    elif BLOCK_SIZE <= 4096:
        num_warps = 8
    else:
        num_warps = 16

    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
    programs = max(1, min(rows, 2 * sms))

    dx = torch.empty_like(x2)
    dw_part = torch.empty((programs, hidden), dtype=torch.float32, device=x.device)
    _rmsnorm_bwd_kernel[(programs,)](
        dy2, x2, weight, rstd, dx, dw_part,
        rows, hidden,
        dy2.stride(0), x2.stride(0), dx.stride(0),
        BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps,
    )
    dw = dw_part.sum(0).to(weight.dtype)
    return dx.view_as(x), dw
