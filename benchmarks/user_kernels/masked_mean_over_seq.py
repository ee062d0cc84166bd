"""Written for benchmarks/fresh_user_kernels.py as a user brings a kernel:
Masked mean pooling over the sequence axis (sentence embeddings from padded batches):
x (B, S, D) bf16, mask (B, S) bool or int8 (nonzero = valid token) -> out (B, D) f32,
out[b, :] = sum_s mask[b, s] * x[b, s, :] / max(sum_s mask[b, s], 1) (all-padding rows give zeros).
Grid (B, cdiv(D, BLOCK_D)): each program owns one batch row and a BLOCK_D column slice, loops over S in
BLOCK_S chunks loading a [BLOCK_S, BLOCK_D] tile plus the mask chunk, accumulates the masked column sums
(tl.sum over axis 0) and the valid-token count in fp32, then divides once. A bool mask is reinterpreted as
int8 on the host. Fixed meta-parameters from the host: BLOCK_D = 128, BLOCK_S = 32, num_warps = 4.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def masked_mean_seq_kernel(
    x_ptr, m_ptr, out_ptr,
    S, D,
    stride_xb, stride_xs, stride_xd,
    stride_mb, stride_ms,
    stride_ob, stride_od,
    BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr,
):
    b = tl.program_id(0)
    pid_d = tl.program_id(1)
    b64 = b.to(tl.int64)
    offs_d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    d_mask = offs_d < D

    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    cnt = tl.zeros((BLOCK_S,), dtype=tl.float32)
    x_base = x_ptr + b64 * stride_xb
    m_base = m_ptr + b64 * stride_mb
    for s0 in range(0, S, BLOCK_S):
        offs_s = s0 + tl.arange(0, BLOCK_S)
        s_mask = offs_s < S
        mv = tl.load(m_base + offs_s * stride_ms, mask=s_mask, other=0)
        valid = (mv != 0) & s_mask
        xv = tl.load(x_base + offs_s[:, None].to(tl.int64) * stride_xs + offs_d[None, :] * stride_xd,
                     mask=valid[:, None] & d_mask[None, :], other=0.0)
        acc += tl.sum(xv.to(tl.float32), axis=0)
        cnt += valid.to(tl.float32)

    total = tl.sum(cnt, axis=0)
    res = acc / tl.maximum(total, 1.0)
    tl.store(out_ptr + b64 * stride_ob + offs_d * stride_od, res, mask=d_mask)


def masked_mean_over_seq(x, mask):
    """x (B, S, D) bf16, mask (B, S) bool/int8 -> out (B, D) f32 masked mean over S."""
    assert x.dim() == 3 and mask.dim() == 2
    B, S, D = x.shape
    assert mask.shape == (B, S)
    if mask.dtype == torch.bool:
        mask = mask.view(torch.int8)
    elif mask.dtype != torch.int8:
        mask = (mask != 0).to(torch.int8)
    out = torch.empty((B, D), device=x.device, dtype=torch.float32)
    BLOCK_D = 128
    BLOCK_S = 32
    grid = (B, triton.cdiv(D, BLOCK_D))
    masked_mean_seq_kernel[grid](
        x, mask, out,
        S, D,
        x.stride(0), x.stride(1), x.stride(2),
        mask.stride(0), mask.stride(1),
        out.stride(0), out.stride(1),
        BLOCK_S=BLOCK_S, BLOCK_D=BLOCK_D,
        num_warps=4,
    )
    return out
