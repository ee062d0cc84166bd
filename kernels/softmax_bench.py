"""A measurable launch of the shipped softmax for sweeps (the counterpart of kernels.moe_bench)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ceilings.launch import Config
from kernels import softmax as sm
from kernels.warmup import loaded_resources

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class SoftmaxSpec:
    """Y = softmax(X) over rows of length `cols`; a sweep case is one width at one row count `m`."""

    cols: int
    m: int
    dtype: str = "bfloat16"
    gemm: int = 1

    @property
    def shape_label(self) -> str:
        return f"COLS{self.cols}"

    def flops(self) -> int:
        return 0

    def compile_signature(self, config: Config) -> tuple:
        return (self.dtype, self.cols <= config["BLOCK_N"], tuple((v % 16 == 0, v == 1) for v in (self.m, self.cols)))


def resource_precheck(config: Config) -> str | None:
    """A row chunk of BLOCK_N fp32 values must fit the threads' registers (at most 64 per thread here)."""
    per_thread = config["BLOCK_N"] // (32 * config.num_warps)
    if per_thread > 64:
        return f"{per_thread} values per thread for one chunk; use more warps or a smaller BLOCK_N"
    return None


class SoftmaxCase:
    def __init__(self, spec: SoftmaxSpec, device: str = "cuda", seed: int = 0):
        self.spec = spec
        gen = torch.Generator(device=device).manual_seed(seed)
        self.x = (torch.randn(spec.m, spec.cols, device=device, generator=gen) * 4).to(_DTYPES[spec.dtype])
        self.out = torch.empty_like(self.x)
        self.reference = sm.softmax_reference(self.x)

    def compulsory_bytes(self) -> int:
        return 2 * self.x.numel() * self.x.element_size()


    def runner(self, config: Config):
        def run():
            sm.softmax(self.x, config, out=self.out)
        return run


def compile_config(spec: SoftmaxSpec, config: Config) -> dict:
    x = torch.empty(16, 16, dtype=_DTYPES[spec.dtype], device="cuda")
    kernel = sm.softmax_kernel.warmup(x, x, spec.m, spec.cols, spec.cols, spec.cols, grid=(1,),
                                      ONE_CHUNK=spec.cols <= config["BLOCK_N"], num_warps=config.num_warps,
                                      num_stages=config.num_stages, **config.params)
    return loaded_resources(kernel)
