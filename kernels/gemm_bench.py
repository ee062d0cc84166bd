"""A measurable launch of the shipped GEMM: random inputs, the float32 reference, a runner per config,
and a compile step for sweep workers (the counterpart of kernels.moe_bench)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ceilings.launch import Config
from kernels import gemm as g
from kernels.warmup import loaded_resources

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class GemmSpec:
    """C [M, N] = A [M, K] @ B [K, N]; a sweep case is one (N, K) shape at one M."""

    n: int
    k: int
    m: int
    dtype: str = "bfloat16"
    gemm: int = 1

    @property
    def shape_label(self) -> str:
        return f"N{self.n}_K{self.k}"

    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    def compile_signature(self, config: Config) -> tuple:
        ints = (self.m, self.n, self.k)
        return (self.dtype, self.k % config["BLOCK_K"] == 0, tuple((v % 16 == 0, v == 1) for v in ints))


def resource_precheck(config: Config, max_shared_bytes: int, dtype_bytes: int = 2) -> str | None:
    """Why a config cannot run well, from its tiles alone (as fused_moe.resource_precheck)."""
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    if bm * bn // (32 * config.num_warps) > 255:
        return "accumulator needs over 255 registers per thread; use smaller tiles or more warps"
    if (bm * bk + bk * bn) * dtype_bytes * config.num_stages > max_shared_bytes:
        return f"{config.num_stages} pipeline buffers overflow {max_shared_bytes} B of shared memory"
    return None


class GemmCase:
    def __init__(self, spec: GemmSpec, device: str = "cuda", seed: int = 0):
        self.spec = spec
        gen = torch.Generator(device=device).manual_seed(seed)
        dtype = _DTYPES[spec.dtype]
        self.a = torch.randn(spec.m, spec.k, device=device, generator=gen).to(dtype)
        self.b = (torch.randn(spec.k, spec.n, device=device, generator=gen) / spec.k ** 0.5).to(dtype)
        self.out = torch.empty(spec.m, spec.n, device=device, dtype=dtype)
        self.reference = g.gemm_reference(self.a, self.b)

    def compulsory_bytes(self) -> int:
        return self.a.element_size() * (self.a.numel() + self.b.numel() + self.out.numel())


    def runner(self, config: Config):
        def run():
            g.gemm(self.a, self.b, config, out=self.out)
        return run


def compile_config(spec: GemmSpec, config: Config) -> dict:
    """Compile (no launch) for `spec`'s specialisation on the current GPU; tiny stand-in tensors."""
    dtype = _DTYPES[spec.dtype]
    a = torch.empty(16, 16, dtype=dtype, device="cuda")
    s = dict(g.describe_launch(spec.m, spec.n, spec.k, config, spec.dtype).scalars)
    kernel = g.gemm_kernel.warmup(
        a, a, a, s["M"], s["N"], s["K"], s["stride_am"], s["stride_ak"], s["stride_bk"], s["stride_bn"],
        s["stride_cm"], s["stride_cn"], grid=(1,), EVEN_K=spec.k % config["BLOCK_K"] == 0,
        num_warps=config.num_warps, num_stages=config.num_stages, **config.params)
    return loaded_resources(kernel)
