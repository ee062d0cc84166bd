"""The exact work of one launch of a `kernels.fused_moe_fused` variant (issue 16), from its shape,
config and routing, built on the previous kernel's model (`kernels.moe_demand`): the same tiles, K
loop, operand loads and weight reads, and what each change alters on top of them.

The variants are `kernels.moe_bench.VARIANTS` ("previous" is `kernels.fused_moe`'s kernel, whose
demand this module returns unchanged). A `FusedMoEGemmSpec` is the family's shape with the variant
and the SM count the persistent grid is sized for; the advisor reaches it through the "moe" family
(`kernels.moe_family.demand` takes either spec).

- **fused epilogue, GEMM1** (SiLU-and-mul): a CTA's output tile is BLOCK_M x BLOCK_N / 2 (gate and up
  columns combined), so the epilogue stores, the 16-bit packing, the C bytes through L2 and to DRAM
  all halve; SiLU adds per output element an exp and a reciprocal on the XU (ex2, rcp) and about nine
  FP32 operations (the exponent's scale, 1 + e, the precise division's refinement, the product with
  up). With w1 as it comes (variant "fused") the tile is two dots of BLOCK_N / 2 over one A tile: A is
  read from shared memory twice per K step (`FusedMoEGemmSpec.mma_dots` = 2) and B takes two TMA loads;
  interleaved w1 ("fused-il") is one dot of BLOCK_N, as before.
- **fused epilogue, GEMM2** (router weight and top-k sum): each output element is one 4-byte float32
  atomic add (a scalar `red.global.add.f32` per element: an assumption, noted) into [M, N] instead of a
  2-byte store into [pairs, N]: 4 bytes per element through L2, and the [M, N] float32 output read (the
  host zeroed it) and written once in DRAM instead of the [pairs, N] rows written.
- **persistent**: the grid is `fused_moe_fused.persistent_grid` (SMs x CTAs per SM, no more than the
  worst routing's tiles); programs loop over the real tiles, so `Demand.ctas` is the programs and
  `active_ctas` the tiles they run (one tile is one CTA's work of the previous kernel): programs only
  exit where the tiles are fewer than the programs. The busiest SM runs ceil(tiles / SMs) tiles, as a
  hardware-scheduled grid of equal tiles does. The launch order the L2 re-read model replays is
  grouped over the real M blocks only (`persistent` on the spec), in waves of at most the programs.
"""

from __future__ import annotations

import dataclasses
import math

from ceilings.errors import AdvisorError
from ceilings.launch import Config
from ceilings.roofline import Demand
from kernels import fused_moe as fm
from kernels import fused_moe_fused as ff
from kernels.moe_bench import VARIANTS, MoEGemmSpec, _interleaved, _variant_flags
from kernels.moe_demand import _BYTES, moe_gemm_demand

# Hopper SMs (H100 SXM and H200: 132): the persistent grid's size when the GPU is not given.
DEFAULT_SMS = 132
# SiLU-and-mul per output element: ex2 and rcp on the XU; FP32 work of exp's scale, 1 + e, the
# IEEE division's Newton refinement (about five FFMA, as ptxas expands div.rn.f32) and the product.
SILU_XU_OPS = 2
SILU_FP32_OPS = 9
ATOMIC_BYTES = 4  # float32 atomics into the [M, N] output


@dataclasses.dataclass(frozen=True)
class FusedMoEGemmSpec(MoEGemmSpec):
    """A GEMM of the fused-MoE layer run by one kernel variant (`kernels.moe_bench.VARIANTS`)."""

    variant: str = "previous"
    num_sms: int = DEFAULT_SMS  # the persistent grid's SMs

    def __post_init__(self):
        fused, persistent = _variant_flags(self.variant)  # raises AdvisorError naming the variants
        _interleaved(self, self.variant)
        if self.gemm == 2 and persistent and not fused:
            raise AdvisorError("variant 'persistent' of GEMM2 runs without the fused sum in no layer; use "
                               "'fused-persistent'")

    @property
    def gated(self) -> bool:
        return _variant_flags(self.variant)[0] and self.gemm == 1

    @property
    def accumulate(self) -> bool:
        return _variant_flags(self.variant)[0] and self.gemm == 2

    @property
    def interleaved(self) -> bool:
        return _interleaved(self, self.variant)

    @property
    def persistent(self) -> bool:
        return _variant_flags(self.variant)[1]

    @property
    def mma_dots(self) -> int:
        """Dots per K step over one A tile: 2 for the gated GEMM on w1 as it comes (gate and up halves)."""
        return 2 if self.gated and not self.interleaved else 1

    @property
    def n_out(self) -> int:
        return self.n // 2 if self.gated else self.n

    def output_tile_bytes(self, config: Config) -> float:
        """Bytes one tile's epilogue sends out: BLOCK_M x its output columns x the stored element."""
        bn_out = config["BLOCK_SIZE_N"] // 2 if self.gated else config["BLOCK_SIZE_N"]
        return float(config["BLOCK_SIZE_M"] * bn_out * (ATOMIC_BYTES if self.accumulate else _BYTES[self.dtype]))

    def output_dram_bytes(self) -> float | None:
        """DRAM bytes the output takes where they are not the stored tiles' (the accumulated [M, N] float32
        written once, however many of a token's top_k rows add into it); None: the stored tiles' bytes."""
        return float(self.m * self.n * ATOMIC_BYTES) if self.accumulate else None

    def programs(self, config: Config) -> int:
        """The persistent grid `invoke_fused_gemm` launches (the kernel module's own rule)."""
        em = math.ceil(fm.max_padded_tokens(self.pairs, self.num_experts, config["BLOCK_SIZE_M"])
                       / config["BLOCK_SIZE_M"]) * config["BLOCK_SIZE_M"]
        return ff.persistent_grid(em, self.n_out, config, self.gated, self.num_sms)[0]


def variant_spec(spec: MoEGemmSpec, variant: str, num_sms: int = DEFAULT_SMS) -> MoEGemmSpec:
    """`spec` run by `variant` on a GPU of `num_sms` SMs ("previous": the plain spec, the previous kernel)."""
    if variant not in VARIANTS:
        raise AdvisorError(f"--variant {variant!r}: choose one of {', '.join(VARIANTS)} (kernels/moe_bench.py)")
    if variant == "previous":
        return MoEGemmSpec(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(MoEGemmSpec)})
    fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(MoEGemmSpec)}
    return FusedMoEGemmSpec(**fields, variant=variant, num_sms=num_sms)


def fused_gemm_demand(spec: FusedMoEGemmSpec, config: Config, arch: int = 90, counts=None,
                      shared_bytes: int | None = None, registers: int | None = None) -> Demand:
    """The exact work of `spec`'s variant at `config` (expected routing without `counts`)."""
    base = moe_gemm_demand(spec, config, arch, counts, shared_bytes, registers)
    if getattr(spec, "variant", "previous") == "previous":  # the previous kernel's own spec, or named so
        return base
    bm, bn, bk = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]
    size = _BYTES[spec.dtype]
    vec = 16 // size
    k_padded = math.ceil(spec.k / bk) * bk
    inst = dict(base.instructions_per_cta)
    smem, l2, dram = base.smem_bytes_per_cta, base.l2_bytes, base.dram_bytes
    notes = list(base.notes)
    if spec.gated:
        half = bm * bn / 2
        inst["lsu"] -= half / vec / 32                  # half the C stores
        inst["alu"] -= half / 2 / 32                    # half the 16-bit packing
        inst["xu"] += SILU_XU_OPS * half / 32
        inst["fma"] += SILU_FP32_OPS * half / 32
        l2 -= spec.pairs * spec.n / 2 * size
        dram -= spec.pairs * spec.n / 2 * size
        if spec.mma_dots == 2:
            smem += bm * k_padded * size               # the A tile read by a second dot
            if (spec.b_tma if spec.b_tma is not None else arch >= 90):
                inst["lsu"] += k_padded / bk            # gate and up: two TMA loads per K step
    if spec.accumulate:
        elems = bm * bn
        inst["lsu"] += elems / 32 - elems / vec / 32    # one atomic per element for a vector store
        inst["alu"] -= elems / 2 / 32                   # float32 out: no packing
        l2 += spec.pairs * spec.n * (ATOMIC_BYTES - size)
        dram += 2 * spec.m * spec.n * ATOMIC_BYTES - spec.pairs * spec.n * size
        notes.append("fused top-k sum: one 4-byte float32 atomic per element (scalar red.global.add assumed), "
                     "the zeroed [M, N] output read and written once in DRAM")
    ctas = base.ctas
    if spec.persistent:
        ctas = spec.programs(config)
        notes.append(f"persistent: {ctas} programs ({spec.num_sms} SMs x the CTAs one holds, "
                     "kernels.fused_moe_fused.ctas_per_sm) loop over the real tiles; active CTAs count tiles")
    return dataclasses.replace(base, kernel="fused_moe_fused_kernel", ctas=ctas, instructions_per_cta=inst,
                               smem_bytes_per_cta=smem, l2_bytes=l2, dram_bytes=dram,
                               source="semantic (kernels.moe_fused_demand)", notes=notes)
