"""Written as a user brings a kernel: weight-only int4 matmul for decode.

x [M, K] bf16 times int4 weights packed two per uint8 as [N, K//2] (low nibble = even k),
per-group scales [N, K//group], zero point 8; out [M, N] bf16, float32 accumulation.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _int4_gemv_kernel(X, WQ, S, OUT, M, N, K,
                      s_xm, s_wn, s_sn, s_om,
                      GROUP: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mmask = rm < M
    nmask = rn < N
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(X + rm[:, None] * s_xm + rk[None, :], mask=mmask[:, None], other=0.0)
        packed = tl.load(WQ + rn[:, None] * s_wn + (rk // 2)[None, :],
                         mask=nmask[:, None], other=0).to(tl.int32)
        q = (packed >> ((rk % 2) * 4)[None, :]) & 0xF
        w = (q - 8).to(tl.float32).to(tl.bfloat16)        # [BLOCK_N, BLOCK_K], exact in bf16
        part = tl.dot(x.to(tl.bfloat16), tl.trans(w))     # [BLOCK_M, BLOCK_N]
        scale = tl.load(S + rn * s_sn + k0 // GROUP, mask=nmask, other=0.0).to(tl.float32)
        acc += part * scale[None, :]
    tl.store(OUT + rm[:, None] * s_om + rn[None, :], acc.to(OUT.dtype.element_ty),
             mask=mmask[:, None] & nmask[None, :])


def int4_gemv(x, w_packed, scales, group_size=128):
    M, K = x.shape
    N = w_packed.shape[0]
    assert w_packed.shape[1] * 2 == K and K % group_size == 0
    assert scales.shape == (N, K // group_size)
    x = x.contiguous()
    w_packed = w_packed.contiguous()
    scales = scales.contiguous()
    out = torch.empty((M, N), dtype=torch.bfloat16, device=x.device)

    BLOCK_M = 16                      # tl.dot needs >= 16 rows; decode batches are padded
    BLOCK_K = 128 if group_size >= 128 else group_size
    BLOCK_N = 64 if N >= 8192 else 32
    grid = (triton.cdiv(N, BLOCK_N), triton.cdiv(M, BLOCK_M))
    _int4_gemv_kernel[grid](
        x, w_packed, scales, out, M, N, K,
        x.stride(0), w_packed.stride(0), scales.stride(0), out.stride(0),
        GROUP=group_size, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        num_warps=4, num_stages=3,
    )
    return out
