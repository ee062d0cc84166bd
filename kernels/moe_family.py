"""The fused-MoE GEMM family (kernels/fused_moe.py, demand in kernels/moe_demand.py, measured through
kernels/moe_bench.py), declared for the advisor.

A shape is a `MoEGemmSpec`: GEMM 1 or 2 of one rank's expert layer at M tokens. The kernel's launches
come from model presets (kernels/moe_presets.py), not a --shape text, and its current config from the
serving engines' config files (kernels/moe_configs.py); a traced launch does not record the routing,
so it is left to the generic path.

The config set of a collection or a tuning run is stratified: every (BLOCK_SIZE_M, _N, _K, num_warps,
num_stages) of the 1,920-config space that passes `fused_moe.resource_precheck` once, with GROUP_SIZE_M
drawn at random (seeded), plus the default rule's config of every case.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

from ceilings.errors import AdvisorError
from ceilings.hardware import GPUSpec
from ceilings.launch import Config
from kernels import family as fam
from kernels import fused_moe as fm
from kernels import moe_bench as bench
from kernels import moe_configs
from kernels.moe_bench import MoEGemmSpec
from kernels.moe_demand import moe_gemm_demand
from kernels.moe_fused_demand import FusedMoEGemmSpec, fused_gemm_demand

# Hopper: 227 KB of shared memory per block (ANCHORS section 4). The plans' limit when no GPU is asked.
HOPPER_MAX_SHARED = 227 * 1024
# Default collect cases: ANCHORS section 3's shapes (preset, TP size) at these token counts.
CASES = (("mixtral-8x7b", 2), ("qwen2-57b-a14b", 2), ("qwen3-30b-a3b", 4))
MS = (1, 16, 64, 256, 1024, 4096)
SAMPLE = 64  # random configs per collection when --sample is not given


def precheck(config: Config, gpu: GPUSpec, spec: MoEGemmSpec) -> str | None:
    if set(config.params) != set(fm.CONFIG_SPACE) - {"num_warps", "num_stages"}:
        return f"config {config.label()} does not set the kernel's tile parameters"
    if isinstance(spec, FusedMoEGemmSpec) and spec.gated and config["BLOCK_SIZE_N"] < 32:
        return f"BLOCK_SIZE_N={config['BLOCK_SIZE_N']} splits into gate and up halves under 16 columns"
    return fm.resource_precheck(config, gpu.smem_per_block, max_regs_per_thread=255)


def demand(spec: MoEGemmSpec, config: Config, arch: int, shared: int | None = None, registers: int | None = None):
    """The exact model at the expected routing of uniform random top-k (rows carry their own routing); a
    `FusedMoEGemmSpec` is a variant of kernels/fused_moe_fused.py (kernels/moe_fused_demand.py)."""
    if isinstance(spec, FusedMoEGemmSpec):
        return fused_gemm_demand(spec, config, arch, None, shared, registers)
    return moe_gemm_demand(spec, config, arch, None, shared, registers)


def describe_launch(spec: MoEGemmSpec, config: Config, arch: int = 90):
    """The launch of the previous kernel, or of the fused kernel's variant for a `FusedMoEGemmSpec`."""
    if isinstance(spec, FusedMoEGemmSpec) and spec.variant != "previous":
        return bench.describe_fused_launch(spec, config, spec.variant, spec.num_sms)
    return bench.describe_launch(spec, config, arch)


def read_row(row: dict, arch: int):
    e, top, k, n = row["shape"].split("_")
    kernel = row["kernel"]
    b_tma = True if kernel.endswith("[tma]") else False if kernel.endswith("[ptr]") else None
    spec = MoEGemmSpec(int(e[1:]), int(top[3:]), int(k[1:]), int(n[1:]), int(row["M"]), gemm=int(row["gemm"]),
                       b_tma=b_tma)
    counts = json.loads(row["case_info"]).get("expert_counts") if row.get("case_info") else None
    config = bench.row_config(row)
    return spec, config, moe_gemm_demand(spec, config, arch, counts, *fam.row_compiled(row))


def specs(cases=CASES, ms=MS, gemms=(1,), b_tma: bool | None = None) -> list[MoEGemmSpec]:
    """The GEMMs of (preset, TP) cases at each token count."""
    from kernels.moe_presets import get_preset

    out = []
    for name, tp in cases:
        shape = get_preset(name).shape(tp)
        for gemm in gemms:
            e, top_k, k, n = shape.gemm1() if gemm == 1 else shape.gemm2()
            out += [MoEGemmSpec(e, top_k, k, n, m, gemm=gemm, b_tma=b_tma) for m in ms]
    return out


def parse_cases(text: str | None) -> tuple[tuple[str, int], ...]:
    """`preset:tp,preset:tp` -> ((preset, tp), ...); checked against the preset list."""
    from kernels.moe_presets import get_preset

    if not text:
        return CASES
    out = []
    for item in text.split(","):
        name, _, tp = item.strip().partition(":")
        if tp and not tp.isdigit():
            raise AdvisorError(f"--cases item {item!r}: the TP size after ':' must be an integer; e.g. mixtral-8x7b:2")
        get_preset(name)  # raises AdvisorError naming the known presets
        out.append((name, int(tp or 1)))
    return tuple(out)


def feasible(config: Config, max_shared: int = HOPPER_MAX_SHARED) -> bool:
    return fm.resource_precheck(config, max_shared) is None


def default_configs(specs: Sequence[MoEGemmSpec]) -> list[Config]:
    return sorted({moe_configs.default_config(s.m, s.num_experts, s.top_k) for s in specs}, key=Config.label)


def stratified_configs(seed: int, max_shared: int = HOPPER_MAX_SHARED) -> list[Config]:
    """Every feasible (BLOCK_SIZE_M, _N, _K, num_warps, num_stages) once, GROUP_SIZE_M drawn at random."""
    rng = random.Random(seed)
    seen, out = set(), []
    for config in fm.config_space():
        if not feasible(config, max_shared):
            continue
        tile = (config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"], config.num_warps,
                config.num_stages)
        if tile not in seen:
            seen.add(tile)
            out.append(config.replace(GROUP_SIZE_M=rng.choice(fm.CONFIG_SPACE["GROUP_SIZE_M"])))
    return out


def sample_configs(sample: int | None, seed: int, specs: Sequence[MoEGemmSpec],
                   max_shared: int = HOPPER_MAX_SHARED) -> list[Config]:
    """Defaults first (they set each case's screening baseline), then the stratified or a random sample."""
    if sample is None:
        chosen = stratified_configs(seed, max_shared)
    else:
        space = [c for c in fm.config_space() if feasible(c, max_shared)]
        chosen = space if sample >= len(space) else random.Random(seed).sample(space, sample)
    return list(dict.fromkeys(default_configs(specs) + list(chosen)))


def plan(options: fam.CollectOptions) -> fam.CollectPlan:
    chosen = specs(parse_cases(options.shapes), fam.ints(options.ms, MS, "--ms"),
                   fam.ints(options.gemms, (1,), "--gemms"))
    bad = [g for g in {s.gemm for s in chosen} if g not in (1, 2)]
    if bad:
        raise AdvisorError(f"--gemms {options.gemms!r}: a fused-MoE layer has GEMM 1 and GEMM 2 only")
    configs = sample_configs(options.sample or SAMPLE, options.seed, chosen, HOPPER_MAX_SHARED)
    return fam.CollectPlan(chosen, configs, lambda c: fm.resource_precheck(c, HOPPER_MAX_SHARED))


def make_case(spec: MoEGemmSpec):
    case = bench.MoEGemmCase(spec, device="cuda", seed=1000 + spec.m)
    return _VariantCase(case, spec.variant) if isinstance(spec, FusedMoEGemmSpec) else case


class _VariantCase:
    """A case run by a kernel variant of kernels/fused_moe_fused.py: its runner, output and reference."""

    def __init__(self, case: bench.MoEGemmCase, variant: str):
        self.case, self.variant = case, variant
        self.out, self.reference = case.variant_output(variant)

    def runner(self, config: Config):
        return self.case.variant_runner(config, self.variant)


FAMILY = fam.Family(
    name="moe", kernel="fused_moe_kernel", source=Path(fm.__file__).resolve(),
    description="shipped fused-MoE GEMM1/GEMM2 (--cases preset:tp, --gemms, --ms)",
    space=fm.config_space, precheck=precheck, demand=demand,
    default_config=lambda spec: moe_configs.default_config(spec.m, spec.num_experts, spec.top_k),
    default_rule=(Path(moe_configs.__file__).resolve(), r"^def default_config\("),
    reference=fm.fused_moe_gemm_reference, case=make_case, compile_config=bench.compile_config,
    read_row=read_row, plan=plan, describe_launch=describe_launch,
    useful_flops=lambda spec: float(spec.flops()))
