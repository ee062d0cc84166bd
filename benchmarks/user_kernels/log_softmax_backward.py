"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
row-wise log-softmax backward: given the forward output logp = log_softmax(x, -1) (M, N) and the
upstream gradient dy (M, N) (bf16/f16/f32), dx = dy - exp(logp) * sum_j dy[:, j], same dtype as dy.
Grid (M,): one program per row; the row is processed in BLOCK_N chunks in two in-kernel loops, the
first reducing sum(dy) in fp32, the second re-reading dy and logp and writing dx. BLOCK_N is a plain
constexpr chosen by the host wrapper (min(next_power_of_2(N), 4096)), num_warps 4 or 8 by BLOCK_N.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def log_softmax_backward_kernel(
    dy_ptr, logp_ptr, dx_ptr,
    N,
    stride_dym, stride_lpm, stride_dxm,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    dy_row = dy_ptr + row * stride_dym
    lp_row = logp_ptr + row * stride_lpm
    dx_row = dx_ptr + row * stride_dxm

    # pass 1: sum of the upstream gradient
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        dy = tl.load(dy_row + offs, mask=offs < N, other=0.0).to(tl.float32)
        acc += dy
    total = tl.sum(acc, axis=0)

    # pass 2: dx = dy - softmax * sum(dy)
    for start in range(0, N, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        mask = offs < N
        dy = tl.load(dy_row + offs, mask=mask, other=0.0).to(tl.float32)
        lp = tl.load(lp_row + offs, mask=mask, other=float("-inf")).to(tl.float32)
        dx = dy - tl.exp(lp) * total
        tl.store(dx_row + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)


def log_softmax_backward(dy, logp):
    """dy (M, N), logp (M, N) = log_softmax output -> dx (M, N) with dy's dtype."""
    assert dy.dim() == 2 and dy.shape == logp.shape
    M, N = dy.shape
    if dy.stride(1) != 1:
        dy = dy.contiguous()
    if logp.stride(1) != 1:
        logp = logp.contiguous()
    dx = torch.empty((M, N), device=dy.device, dtype=dy.dtype)
    BLOCK_N = min(triton.next_power_of_2(N), 4096)
    num_warps = 8 if BLOCK_N >= 2048 else 4
    log_softmax_backward_kernel[(M,)](
        dy, logp, dx,
        N,
        dy.stride(0), logp.stride(0), dx.stride(0),
        BLOCK_N=BLOCK_N,
        num_warps=num_warps,
    )
    return dx
