"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
One decode step of gated delta-rule linear attention (Gated DeltaNet style recurrent update):
state S (B, Hh, K, V) float32 (contiguous, updated in place), q, k (B, Hh, K) bf16, v (B, Hh, V) bf16,
g (B, Hh) float32 log-decay, beta (B, Hh) float32:
  S <- exp(g) * S;  u = beta * (v - S^T k);  S <- S + k u^T;  o = (S^T q) * K**-0.5  -> o (B, Hh, V) bf16.
k is expected to be roughly unit-norm (models L2-normalise it upstream), which keeps repeated steps stable.
Grid (B*Hh, cdiv(V, BLOCK_V)); each program keeps a K x BLOCK_V fp32 block of S in registers.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def gated_delta_decode_kernel(
    s_ptr, q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, o_ptr,
    K, V, scale,
    stride_qbh, stride_kbh, stride_vbh, stride_obh,
    BLOCK_K: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    bh = tl.program_id(0)
    pid_v = tl.program_id(1)
    offs_k = tl.arange(0, BLOCK_K)
    offs_v = pid_v * BLOCK_V + tl.arange(0, BLOCK_V)
    k_mask = offs_k < K
    v_mask = offs_v < V
    kv_mask = k_mask[:, None] & v_mask[None, :]

    s_ptrs = s_ptr + bh.to(tl.int64) * K * V + offs_k[:, None] * V + offs_v[None, :]
    S = tl.load(s_ptrs, mask=kv_mask, other=0.0)

    q = tl.load(q_ptr + bh * stride_qbh + offs_k, mask=k_mask, other=0.0).to(tl.float32)
    k = tl.load(k_ptr + bh * stride_kbh + offs_k, mask=k_mask, other=0.0).to(tl.float32)
    v = tl.load(v_ptr + bh * stride_vbh + offs_v, mask=v_mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + bh)
    beta = tl.load(beta_ptr + bh)

    S = S * tl.exp(g)
    kS = tl.sum(S * k[:, None], axis=0)
    u = beta * (v - kS)
    S = S + k[:, None] * u[None, :]
    o = tl.sum(S * q[:, None], axis=0) * scale

    tl.store(s_ptrs, S, mask=kv_mask)
    tl.store(o_ptr + bh * stride_obh + offs_v, o.to(o_ptr.dtype.element_ty), mask=v_mask)


def gated_delta_decode(S, q, k, v, g, beta):
    """S (B, Hh, K, V) f32 (in place); q, k (B, Hh, K); v (B, Hh, V); g, beta (B, Hh) f32 -> o (B, Hh, V)."""
    B, Hh, K, V = S.shape
    assert S.is_contiguous() and q.shape == (B, Hh, K) and k.shape == (B, Hh, K) and v.shape == (B, Hh, V)
    q = q.contiguous()
    k = k.contiguous()
    v = v.contiguous()
    g = g.contiguous()
    beta = beta.contiguous()
    o = torch.empty((B, Hh, V), device=S.device, dtype=v.dtype)
    BLOCK_K = triton.next_power_of_2(K)
    BLOCK_V = min(triton.next_power_of_2(V), 32)
    grid = (B * Hh, triton.cdiv(V, BLOCK_V))
    gated_delta_decode_kernel[grid](
        S, q, k, v, g, beta, o,
        K, V, K ** -0.5,
        q.stride(1), k.stride(1), v.stride(1), o.stride(1),
        BLOCK_K=BLOCK_K, BLOCK_V=BLOCK_V,
        num_warps=4,
    )
    return o
