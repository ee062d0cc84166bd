"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Grouped-query-attention decode logits (the QK^T half of a GQA decode step, before softmax):
q (B, Hq, D) f16 (one new token per sequence), k_cache (B, S, Hkv, D) f16 with Hq = G * Hkv, scale float
-> scores (B, Hq, S) f32, scores[b, h, s] = scale * q[b, h] . k_cache[b, s, h // G].
Grid (B * Hkv, cdiv(S, BLOCK_S)): each program owns one (batch, kv head) and a BLOCK_S slice of keys, loads
the G query heads that share that kv head as a [BLOCK_G, BLOCK_D] tile (BLOCK_G = max(16, next_pow2(G)),
padded rows masked to zero so tl.dot gets an MMA-legal shape; BLOCK_D = next_pow2(D) masked), loads the
keys transposed as [BLOCK_D, BLOCK_S] and does a single tl.dot (fp32 acc), then stores only the G valid rows.
@triton.autotune over BLOCK_S / num_warps / num_stages keyed on S, D, G.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_S": 32}, num_warps=2, num_stages=2),
        triton.Config({"BLOCK_S": 64}, num_warps=4, num_stages=2),
        triton.Config({"BLOCK_S": 64}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_S": 128}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_S": 128}, num_warps=8, num_stages=2),
        triton.Config({"BLOCK_S": 256}, num_warps=8, num_stages=3),
    ],
    key=["S", "D", "G"],
)
@triton.jit
def gqa_decode_scores_kernel(
    q_ptr, k_ptr, out_ptr,
    S, D, G, HKV,
    scale,
    stride_qb, stride_qh, stride_qd,
    stride_kb, stride_ks, stride_kh, stride_kd,
    stride_ob, stride_oh, stride_os,
    BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr,
):
    pid_bh = tl.program_id(0)
    pid_s = tl.program_id(1)
    b = pid_bh // HKV
    kvh = pid_bh % HKV
    b64 = b.to(tl.int64)

    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, BLOCK_D)
    offs_s = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    g_mask = offs_g < G
    d_mask = offs_d < D
    s_mask = offs_s < S

    heads = kvh * G + offs_g
    q = tl.load(q_ptr + b64 * stride_qb + heads[:, None] * stride_qh + offs_d[None, :] * stride_qd,
                mask=g_mask[:, None] & d_mask[None, :], other=0.0)            # [BLOCK_G, BLOCK_D]
    kt = tl.load(k_ptr + b64 * stride_kb + kvh * stride_kh
                 + offs_s[None, :].to(tl.int64) * stride_ks + offs_d[:, None] * stride_kd,
                 mask=d_mask[:, None] & s_mask[None, :], other=0.0)           # [BLOCK_D, BLOCK_S]

    acc = tl.dot(q, kt)                                                       # [BLOCK_G, BLOCK_S] f32
    acc = acc * scale

    o_ptrs = out_ptr + b64 * stride_ob + heads[:, None] * stride_oh + offs_s[None, :] * stride_os
    tl.store(o_ptrs, acc, mask=g_mask[:, None] & s_mask[None, :])


def gqa_decode_scores(q, k_cache, scale):
    """q (B, Hq, D) f16, k_cache (B, S, Hkv, D) f16, scale -> (B, Hq, S) f32."""
    assert q.dim() == 3 and k_cache.dim() == 4
    B, HQ, D = q.shape
    Bk, S, HKV, Dk = k_cache.shape
    assert Bk == B and Dk == D and HQ % HKV == 0
    G = HQ // HKV
    out = torch.empty((B, HQ, S), device=q.device, dtype=torch.float32)
    BLOCK_G = max(16, triton.next_power_of_2(G))
    BLOCK_D = max(16, triton.next_power_of_2(D))
    grid = lambda meta: (B * HKV, triton.cdiv(S, meta["BLOCK_S"]))
    gqa_decode_scores_kernel[grid](
        q, k_cache, out,
        S, D, G, HKV,
        float(scale),
        q.stride(0), q.stride(1), q.stride(2),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), k_cache.stride(3),
        out.stride(0), out.stride(1), out.stride(2),
        BLOCK_G=BLOCK_G, BLOCK_D=BLOCK_D,
    )
    return out
