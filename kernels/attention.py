"""A shipped attention forward, O = softmax(Q K^T * scale) V per batch and head, with its exact demand.

One program computes BLOCK_M query rows of one (batch, head): it streams the keys and values in
BLOCK_N blocks, keeps a running max and sum (online softmax), and does two tensor-core products per
block (Q K^T and P V) and one exp2 per score on the special-function unit. With `causal`, key blocks
past the query block are skipped and the diagonal block is masked.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ceilings.errors import AdvisorError
from ceilings.launch import Config, Launch, TensorArg
from ceilings.roofline import Demand

CONFIG_SPACE: dict[str, tuple[int, ...]] = {
    "BLOCK_M": (32, 64, 128),
    "BLOCK_N": (32, 64, 128),
    "num_warps": (4, 8),
    "num_stages": (1, 2, 3),
}
_TL = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}


@triton.jit
def attention_kernel(
    # Pointers: Q, K, V, O as [batch * heads, seq, head_dim], contiguous in the last dimension.
    q_ptr, k_ptr, v_ptr, o_ptr,
    # Sizes and strides (per batch-head and per row).
    seq, scale_log2, stride_bh, stride_s,
    # Meta-parameters.
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    d = tl.arange(0, HEAD_DIM)
    base = bh * stride_bh
    q = tl.load(q_ptr + base + rows[:, None] * stride_s + d[None, :], mask=rows[:, None] < seq, other=0.0)
    m_i = tl.full((BLOCK_M,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    end = tl.minimum((pid_m + 1) * BLOCK_M, seq) if CAUSAL else seq
    for start in range(0, end, BLOCK_N):
        keys = start + cols
        k = tl.load(k_ptr + base + keys[:, None] * stride_s + d[None, :], mask=keys[:, None] < seq, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale_log2
        valid = keys[None, :] < seq
        if CAUSAL:
            valid = valid & (keys[None, :] <= rows[:, None])
        s = tl.where(valid, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + keys[:, None] * stride_s + d[None, :], mask=keys[:, None] < seq, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + base + rows[:, None] * stride_s + d[None, :], out.to(o_ptr.dtype.element_ty),
             mask=rows[:, None] < seq)


def default_config(batch_heads: int, seq: int, head_dim: int) -> Config:
    return Config({"BLOCK_M": 128 if seq >= 1024 else 64, "BLOCK_N": 64}, 8 if head_dim >= 128 else 4, 2)


def grid(batch_heads: int, seq: int, config: Config) -> tuple[int, int]:
    return (triton.cdiv(seq, config["BLOCK_M"]), batch_heads)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, config: Config | None = None,
              out: torch.Tensor | None = None) -> torch.Tensor:
    """q, k, v: [batch, heads, seq, head_dim] fp16/bf16, head_dim a power of two in 16..256."""
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape:
        raise AdvisorError(f"attention takes q, k, v of one shape [batch, heads, seq, head_dim]; got "
                           f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.dtype not in _TL or k.dtype != q.dtype or v.dtype != q.dtype:
        raise AdvisorError(f"attention takes fp16 or bf16 tensors of one dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    b, h, seq, dim = q.shape
    if dim not in (16, 32, 64, 128, 256):
        raise AdvisorError(f"head_dim {dim} must be a power of two from 16 to 256")
    config = config or default_config(b * h, seq, dim)
    q, k, v = (t.contiguous().view(b * h, seq, dim) for t in (q, k, v))
    o = out if out is not None else torch.empty((b, h, seq, dim), dtype=q.dtype, device=q.device)
    attention_kernel[grid(b * h, seq, config)](
        q, k, v, o, seq, (1.0 / math.sqrt(dim)) * 1.4426950408889634, seq * dim, dim,
        HEAD_DIM=dim, CAUSAL=causal, num_warps=config.num_warps, num_stages=config.num_stages, **config.params)
    return o


def attention_reference(q, k, v, causal: bool = False) -> torch.Tensor:
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[-2]
        s = s.masked_fill(torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v.float()


def describe_launch(batch_heads: int, seq: int, head_dim: int, config: Config, causal: bool = False,
                    dtype: str = "bfloat16") -> Launch:
    shape = (batch_heads, seq, head_dim)
    return Launch(source=__file__, kernel="attention_kernel", grid=grid(batch_heads, seq, config),
                  tensors=tuple(TensorArg.contiguous(n, shape, dtype) for n in ("q_ptr", "k_ptr", "v_ptr", "o_ptr")),
                  scalars={"seq": seq, "scale_log2": 1.4426950408889634 / math.sqrt(head_dim),
                           "stride_bh": seq * head_dim, "stride_s": head_dim},
                  constexprs={"HEAD_DIM": head_dim, "CAUSAL": causal}, config=config)


def attention_demand(batch_heads: int, seq: int, head_dim: int, config: Config, dtype: str = "bfloat16",
                     arch: int = 90, causal: bool = False) -> Demand:
    """Exact work per program; with `causal`, the mean over programs (a query block visits the key blocks
    up to its own end, so later programs do more), which keeps the total exact."""
    bm, bn = config["BLOCK_M"], config["BLOCK_N"]
    size = 2
    m_blocks = math.ceil(seq / bm)
    key_blocks = math.ceil(seq / bn)
    flops = 2 * 2.0 * bm * bn * head_dim * key_blocks  # Q K^T and P V per key block
    ctas = m_blocks * batch_heads
    mean_blocks = sum(math.ceil(min((i + 1) * bm, seq) / bn) for i in range(m_blocks)) / m_blocks if causal \
        else key_blocks
    wgmma = arch >= 90 and bm % 64 == 0 and config.num_warps % 4 == 0
    exps = bm * bn * key_blocks + bm * key_blocks  # one per score and one per row rescale
    return Demand(kernel="attention_kernel", ctas=ctas, active_ctas=ctas, warps_per_cta=config.num_warps,
                  tensor_flops_per_cta=flops * (mean_blocks / key_blocks), tensor_dtype="bf16" if dtype == "bfloat16"
                  else "fp16", tensor_kind="wgmma" if wgmma else "mma_sync",
                  instructions_per_cta={"xu": exps * (mean_blocks / key_blocks) / 32,
                                        "lsu": 2 * bn * head_dim * mean_blocks * size / 16 / 32},
                  smem_bytes_per_cta=2 * 2 * bn * head_dim * size * mean_blocks,
                  l2_bytes=ctas * (2 * bn * head_dim * mean_blocks + 2 * bm * head_dim) * size,
                  dram_bytes=4 * batch_heads * seq * head_dim * size, source="semantic (kernels.attention)")
