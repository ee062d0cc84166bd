"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
GELU (tanh approximation) backward dx = dy * gelu'(x) for x, dy (M, N) bf16/f32 given as arbitrary strided views
(e.g. transposes of (N, M) tensors); dx is allocated contiguous (M, N) in dy's dtype, math in fp32.
2-D grid (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)) of BLOCK_M x BLOCK_N tiles, each tensor addressed with both of its
strides; tile shape picked by @triton.autotune over 4 configs keyed on M and N.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64}, num_warps=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=8),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128}, num_warps=8),
        triton.Config({"BLOCK_M": 32, "BLOCK_N": 32}, num_warps=2),
    ],
    key=["M", "N"],
)
@triton.jit
def strided_gelu_backward_kernel(
    dy_ptr, x_ptr, dx_ptr,
    M, N,
    stride_dym, stride_dyn,
    stride_xm, stride_xn,
    stride_dxm, stride_dxn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    rm64 = rm[:, None].to(tl.int64)
    rn64 = rn[None, :].to(tl.int64)

    x = tl.load(x_ptr + rm64 * stride_xm + rn64 * stride_xn, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + rm64 * stride_dym + rn64 * stride_dyn, mask=mask, other=0.0).to(tl.float32)

    SQRT_2_OVER_PI: tl.constexpr = 0.7978845608028654
    C: tl.constexpr = 0.044715
    x2 = x * x
    z = SQRT_2_OVER_PI * (x + C * x2 * x)
    # tanh(z) = 1 - 2 / (exp(2z) + 1), saturates correctly for large |z|
    t = 1.0 - 2.0 / (tl.exp(2.0 * z) + 1.0)
    dz = SQRT_2_OVER_PI * (1.0 + 3.0 * C * x2)
    grad = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dz
    dx = dy * grad

    tl.store(dx_ptr + rm64 * stride_dxm + rn64 * stride_dxn, dx.to(dx_ptr.dtype.element_ty), mask=mask)


def strided_gelu_backward(dy, x):
    """dy, x (M, N) strided views (any strides) -> dx (M, N) contiguous, dx = dy * gelu_tanh'(x)."""
    assert dy.shape == x.shape and dy.dim() == 2
    M, N = x.shape
    dx = torch.empty((M, N), device=x.device, dtype=dy.dtype)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))
    strided_gelu_backward_kernel[grid](
        dy, x, dx,
        M, N,
        dy.stride(0), dy.stride(1),
        x.stride(0), x.stride(1),
        dx.stride(0), dx.stride(1),
    )
    return dx
