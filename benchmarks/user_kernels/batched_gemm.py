"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
A batch of small fp16 GEMMs, one program per output tile of one batch entry; the host picks 32 x 32 x 32 tiles.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def bmm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n, batch = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    a_ptr += batch * M * K
    b_ptr += batch * K * N
    c_ptr += batch * M * N
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def bmm(a: torch.Tensor, b: torch.Tensor, bm: int = 32, bn: int = 32, bk: int = 32) -> torch.Tensor:
    batch, M, K = a.shape
    N = b.shape[2]
    c = torch.empty((batch, M, N), dtype=torch.float16, device=a.device)
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn), batch)
    bmm_kernel[grid](a, b, c, M, N, K, BM=bm, BN=bn, BK=bk, num_warps=4, num_stages=2)
    return c
