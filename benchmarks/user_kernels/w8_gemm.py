"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Bf16 activations times int8 weights with one scale per output channel.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BM": 64, "BN": 64, "BK": 64}, num_warps=4, num_stages=3),
        triton.Config({"BM": 128, "BN": 64, "BK": 64}, num_warps=4, num_stages=4),
        triton.Config({"BM": 64, "BN": 128, "BK": 128}, num_warps=8, num_stages=3),
        triton.Config({"BM": 128, "BN": 128, "BK": 64}, num_warps=8, num_stages=3),
        triton.Config({"BM": 16, "BN": 128, "BK": 128}, num_warps=4, num_stages=4),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def w8_gemm_kernel(a_ptr, w_ptr, s_ptr, c_ptr, M, N, K, stride_am, stride_wk, stride_cm,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        w = tl.load(w_ptr + kk[:, None] * stride_wk + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0)
        acc += tl.dot(a, w.to(tl.bfloat16))
    scale = tl.load(s_ptr + rn, mask=rn < N, other=0.0)
    out = (acc * scale[None, :]).to(tl.bfloat16)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], out, mask=(rm[:, None] < M) & (rn[None, :] < N))


def w8_matmul(a: torch.Tensor, w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    _, N = w.shape
    c = torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    grid = lambda meta: (triton.cdiv(M, meta["BM"]), triton.cdiv(N, meta["BN"]))  # noqa: E731
    w8_gemm_kernel[grid](a, w, scale, c, M, N, K, a.stride(0), w.stride(0), c.stride(0))
    return c
