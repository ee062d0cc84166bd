"""The exact work of one fused-MoE GEMM launch, from its shape, config and routing (no compile).

The GEMM runs one CTA per (M block, N block) of the padded, expert-sorted pairs; blocks past the
padded count exit at once. With the per-expert token counts of the routing, the padded blocks are
exact; without them, the expectation under uniform random top-k routing is used (each expert is
among a token's k with probability k/E, so its count is Binomial(M, k/E)).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from ceilings.launch import Config
from ceilings.roofline import Demand
from kernels import fused_moe as fm
from kernels.moe_bench import MoEGemmSpec

_BYTES = {"bfloat16": 2, "float16": 2}
_TL = {"bfloat16": "bf16", "float16": "fp16"}


def _binomial_pmf(n: int, p: float):
    if p >= 1.0:
        yield n, 1.0
        return
    log_p, log_q = math.log(p), math.log1p(-p)
    for c in range(n + 1):
        log_pmf = math.lgamma(n + 1) - math.lgamma(c + 1) - math.lgamma(n - c + 1) + c * log_p + (n - c) * log_q
        if log_pmf > -40:
            yield c, math.exp(log_pmf)


def padded_blocks(spec: MoEGemmSpec, block_m: int, counts: Sequence[int] | None = None) -> tuple[float, float]:
    """(M blocks that do work, experts that receive tokens): exact from counts, else expected."""
    if counts is not None:
        return float(sum(math.ceil(c / block_m) for c in counts)), float(sum(1 for c in counts if c))
    return _expected_blocks(spec.num_experts, spec.top_k, spec.m, block_m)


@functools.lru_cache(maxsize=4096)
def _expected_blocks(num_experts: int, top_k: int, m: int, block_m: int) -> tuple[float, float]:
    p = top_k / num_experts
    blocks = sum(prob * math.ceil(c / block_m) for c, prob in _binomial_pmf(m, p))
    routed = 1.0 - (1.0 - p) ** m
    return num_experts * blocks, num_experts * routed


def moe_gemm_demand(spec: MoEGemmSpec, config: Config, arch: int = 90, counts: Sequence[int] | None = None,
                    shared_bytes: int | None = None, registers: int | None = None) -> Demand:
    bm, bn, bk = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]
    warps = config.num_warps
    size = _BYTES[spec.dtype]
    m_blocks, routed = padded_blocks(spec, bm, counts)
    n_blocks = math.ceil(spec.n / bn)
    em = math.ceil(fm.max_padded_tokens(spec.pairs, spec.num_experts, bm) / bm) * bm
    k_padded = math.ceil(spec.k / bk) * bk
    b_tma = spec.b_tma if spec.b_tma is not None else arch >= 90
    wgmma = arch >= 90 and bm % 64 == 0 and warps % 4 == 0
    if shared_bytes is None:  # Triton keeps num_stages buffers of the A and B tiles
        shared_bytes = config.num_stages * (bm + bn) * bk * size

    # Shared memory: every A and B tile is written once and read at least once by the MMAs. (Warp
    # MMAs and warpgroup MMAs re-read tiles across warps; how often depends on the layout Triton
    # picks, so the floor counts one read.)
    smem = size * 2 * (bm + bn) * k_padded

    # Load/store issue, warp instructions: 16-byte vectors of A (and of B without TMA), C stores.
    vec = 16 // size
    lsu = bm * k_padded / vec / 32 + bm * bn / vec / 32 + bm / 32
    lsu += (k_padded / bk) if b_tma else bn * k_padded / vec / 32
    # Epilogue: the router-weight multiply (FP32) and packing pairs of outputs to 16 bits (ALU).
    fma = bm * bn / 32 if spec.gemm == 2 else 0.0
    alu = bm * bn / 2 / 32
    # Integer division of pair ids by top_k: a reciprocal on the XU per element.
    xu = bm / 32

    active = m_blocks * n_blocks
    rows = spec.m if spec.gemm == 1 else spec.pairs
    # L2 -> SM traffic: each working CTA reads its B tile; A rows are gathered with a mask, so only
    # the real pairs' rows are read, once per N block; C is written once.
    l2 = (active * bn * k_padded + spec.pairs * n_blocks * k_padded + spec.pairs * spec.n) * size
    dram = size * (routed * spec.n * spec.k + rows * spec.k + spec.pairs * spec.n) + 4 * (spec.pairs + em // bm)
    notes = [] if counts is not None else ["tile padding from the expected routing (uniform random top-k); a "
                                           "real routing's per-expert token counts may pad more or less"]
    return Demand(kernel="fused_moe_kernel", ctas=fm.gemm_grid(em, spec.n, config)[0],
                  active_ctas=math.ceil(active), warps_per_cta=warps,
                  tensor_flops_per_cta=2.0 * bm * bn * k_padded, tensor_dtype=_TL[spec.dtype],
                  tensor_kind="wgmma" if wgmma else "mma_sync",
                  instructions_per_cta={"lsu": lsu, "fma": fma, "alu": alu, "xu": xu}, smem_bytes_per_cta=smem,
                  l2_bytes=l2, dram_bytes=dram, shared_bytes=shared_bytes, registers=registers,
                  source="semantic (kernels.moe_demand)", notes=notes)
