"""A measurable launch of the shipped attention forward for sweeps (the counterpart of kernels.moe_bench)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ceilings.launch import Config
from kernels import attention as at
from kernels.warmup import loaded_resources

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class AttentionSpec:
    """Non-causal attention of `m` = batch x heads sequences of length `seq` and head size `head_dim`."""

    seq: int
    head_dim: int
    m: int
    dtype: str = "bfloat16"
    gemm: int = 1

    @property
    def shape_label(self) -> str:
        return f"SEQ{self.seq}_D{self.head_dim}"

    def flops(self) -> int:
        return 4 * self.m * self.seq * self.seq * self.head_dim

    def compile_signature(self, config: Config) -> tuple:
        return (self.dtype, self.head_dim, tuple((v % 16 == 0, v == 1) for v in (self.seq, self.seq * self.head_dim)))


def resource_precheck(config: Config, head_dim: int = 128) -> str | None:
    acc = config["BLOCK_M"] * (head_dim + config["BLOCK_N"]) // (32 * config.num_warps)
    if acc > 255:
        return f"accumulator and scores need {acc} registers per thread; use smaller blocks or more warps"
    return None


class AttentionCase:
    def __init__(self, spec: AttentionSpec, device: str = "cuda", seed: int = 0):
        self.spec = spec
        gen = torch.Generator(device=device).manual_seed(seed)
        shape = (spec.m, 1, spec.seq, spec.head_dim)
        self.q, self.k, self.v = (torch.randn(shape, device=device, generator=gen).to(_DTYPES[spec.dtype])
                                  for _ in range(3))
        self.out = torch.empty_like(self.q)
        self.reference = at.attention_reference(self.q, self.k, self.v)

    def compulsory_bytes(self) -> int:
        return 4 * self.q.numel() * self.q.element_size()


    def runner(self, config: Config):
        def run():
            at.attention(self.q, self.k, self.v, False, config, out=self.out)
        return run


def compile_config(spec: AttentionSpec, config: Config) -> dict:
    x = torch.empty(16, 16, dtype=_DTYPES[spec.dtype], device="cuda")
    s = dict(at.describe_launch(spec.m, spec.seq, spec.head_dim, config, False, spec.dtype).scalars)
    kernel = at.attention_kernel.warmup(x, x, x, x, s["seq"], s["scale_log2"], s["stride_bh"], s["stride_s"],
                                        grid=(1, 1), HEAD_DIM=spec.head_dim, CAUSAL=False,
                                        num_warps=config.num_warps, num_stages=config.num_stages, **config.params)
    return loaded_resources(kernel)
