"""Written as a user brings a kernel: GeGLU activation.

h [tokens, 2*d] holds (gate | up); out [tokens, d] = gelu_tanh(gate) * up.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _geglu_kernel(H, OUT, n_tokens, d, s_h, s_o,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_tokens) & (cols[None, :] < d)
    base = H + rows[:, None].to(tl.int64) * s_h + cols[None, :]
    gate = tl.load(base, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(base + d, mask=mask, other=0.0).to(tl.float32)
    # gelu, tanh approximation; tanh(z) = 1 - 2 / (1 + exp(2z))
    z = 0.7978845608028654 * (gate + 0.044715 * gate * gate * gate)
    t = 1.0 - 2.0 / (1.0 + tl.exp(2.0 * z))
    out = 0.5 * gate * (1.0 + t) * up
    tl.store(OUT + rows[:, None].to(tl.int64) * s_o + cols[None, :],
             out.to(OUT.dtype.element_ty), mask=mask)


def geglu(h):
    tokens, two_d = h.shape
    assert two_d % 2 == 0
    d = two_d // 2
    if h.stride(-1) != 1:
        h = h.contiguous()
    out = torch.empty((tokens, d), dtype=h.dtype, device=h.device)
    BLOCK_M = 4
    BLOCK_N = 1024
    grid = (triton.cdiv(tokens, BLOCK_M), triton.cdiv(d, BLOCK_N))
    _geglu_kernel[grid](h, out, tokens, d, h.stride(0), out.stride(0),
                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=8)
    return out
