"""Written as a user brings a kernel: causal depthwise conv1d (Mamba style).

x [batch, dim, seqlen], weight [dim, width], optional bias [dim], optional SiLU; out has x's shape.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_D": 16, "BLOCK_L": 128}, num_warps=4),
        triton.Config({"BLOCK_D": 32, "BLOCK_L": 128}, num_warps=4),
        triton.Config({"BLOCK_D": 8, "BLOCK_L": 256}, num_warps=4),
        triton.Config({"BLOCK_D": 16, "BLOCK_L": 256}, num_warps=8),
        triton.Config({"BLOCK_D": 64, "BLOCK_L": 64}, num_warps=4),
        triton.Config({"BLOCK_D": 32, "BLOCK_L": 256}, num_warps=8),
    ],
    key=["dim", "seqlen"],
)
@triton.jit
def _causal_conv1d_kernel(X, W, B, OUT, dim, seqlen,
                          s_xb, s_xd, s_ob, s_od, s_wd,
                          WIDTH: tl.constexpr, HAS_BIAS: tl.constexpr, SILU: tl.constexpr,
                          BLOCK_D: tl.constexpr, BLOCK_L: tl.constexpr):
    pid_l = tl.program_id(0)
    pid_d = tl.program_id(1)
    b = tl.program_id(2).to(tl.int64)
    d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    pos = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    dmask = d < dim
    acc = tl.zeros([BLOCK_D, BLOCK_L], dtype=tl.float32)
    if HAS_BIAS:
        bias = tl.load(B + d, mask=dmask, other=0.0).to(tl.float32)
        acc += bias[:, None]
    x_row = X + b * s_xb + d[:, None] * s_xd
    for k in tl.static_range(WIDTH):
        w = tl.load(W + d * s_wd + k, mask=dmask, other=0.0).to(tl.float32)
        src = pos - (WIDTH - 1) + k
        m = dmask[:, None] & (src[None, :] >= 0) & (src[None, :] < seqlen)
        xv = tl.load(x_row + src[None, :], mask=m, other=0.0).to(tl.float32)
        acc += w[:, None] * xv
    if SILU:
        acc = acc / (1.0 + tl.exp(-acc))
    omask = dmask[:, None] & (pos[None, :] < seqlen)
    tl.store(OUT + b * s_ob + d[:, None] * s_od + pos[None, :], acc.to(OUT.dtype.element_ty), mask=omask)


def causal_conv1d(x, weight, bias=None, activation=True):
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    if x.stride(-1) != 1:
        x = x.contiguous()
    weight = weight.contiguous()
    out = torch.empty_like(x)
    grid = lambda meta: (triton.cdiv(seqlen, meta["BLOCK_L"]), triton.cdiv(dim, meta["BLOCK_D"]), batch)
    _causal_conv1d_kernel[grid](
        x, weight, bias if bias is not None else weight, out, dim, seqlen,
        x.stride(0), x.stride(1), out.stride(0), out.stride(1), weight.stride(0),
        WIDTH=width, HAS_BIAS=bias is not None, SILU=bool(activation),
    )
    return out
