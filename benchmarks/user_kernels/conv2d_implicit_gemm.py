"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
2-D convolution as implicit GEMM (vision encoder / VAE style): x (N, H, W, C) NHWC, w (R, S, C, K), optional bias (K,)
-> y (N, P, Q, K) with stride/padding; GEMM is M = N*P*Q, N = K, reduction over R*S*C, fp32 accumulation via tl.dot.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def conv2d_implicit_gemm_kernel(
    x_ptr, w_ptr, bias_ptr, y_ptr,
    N, H, W, C, K, P, Q,
    R, S, stride_h, stride_w, pad_h, pad_w,
    sxn, sxh, sxw, sxc,
    swr, sws, swc, swk,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    M = N * P * Q

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_k = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = offs_m < M
    k_mask = offs_k < K

    n_idx = offs_m // (P * Q)
    pq = offs_m % (P * Q)
    oh = pq // Q
    ow = pq % Q

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for r in range(R):
        ih = oh * stride_h - pad_h + r
        for s in range(S):
            iw = ow * stride_w - pad_w + s
            valid = m_mask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            x_base = x_ptr + n_idx.to(tl.int64) * sxn + ih * sxh + iw * sxw
            w_base = w_ptr + r * swr + s * sws
            for c0 in range(0, C, BLOCK_K):
                cc = c0 + tl.arange(0, BLOCK_K)
                c_mask = cc < C
                a = tl.load(x_base[:, None] + cc[None, :] * sxc,
                            mask=valid[:, None] & c_mask[None, :], other=0.0)
                b = tl.load(w_base + cc[:, None] * swc + offs_k[None, :] * swk,
                            mask=c_mask[:, None] & k_mask[None, :], other=0.0)
                acc = tl.dot(a, b, acc)

    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_k, mask=k_mask, other=0.0).to(tl.float32)
        acc += bias[None, :]

    y_ptrs = y_ptr + offs_m.to(tl.int64)[:, None] * K + offs_k[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_mask[:, None] & k_mask[None, :])


def conv2d_implicit_gemm(x, w, bias=None, stride=1, padding=1):
    """x (N, H, W, C), w (R, S, C, K), bias (K,) or None -> y (N, P, Q, K) in x.dtype."""
    N, H, W, C = x.shape
    R, S, C2, K = w.shape
    assert C == C2
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    P = (H + 2 * ph - R) // sh + 1
    Q = (W + 2 * pw - S) // sw + 1
    y = torch.empty((N, P, Q, K), dtype=x.dtype, device=x.device)
    M = N * P * Q
    if M == 0:
        return y
    BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 32
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(K, BLOCK_N))
    conv2d_implicit_gemm_kernel[grid](
        x, w, bias if bias is not None else x, y,
        N, H, W, C, K, P, Q,
        R, S, sh, sw, ph, pw,
        x.stride(0), x.stride(1), x.stride(2), x.stride(3),
        w.stride(0), w.stride(1), w.stride(2), w.stride(3),
        HAS_BIAS=bias is not None,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        num_warps=8, num_stages=3,
    )
    return y
