"""The dense GEMM family (kernels/gemm.py, measured through kernels/gemm_bench.py), declared for the advisor.

A shape is a `GemmSpec` (N, K at M rows); `--shape` is M,N,K.
"""

from __future__ import annotations

import json
from pathlib import Path

from ceilings.hardware import GPUSpec
from ceilings.launch import Config, Launch, expand_space
from kernels import family as fam
from kernels import gemm as g
from kernels import gemm_bench as bench
from kernels.gemm_bench import GemmSpec

HOPPER_MAX_SHARED = 227 * 1024  # bytes per block on sm_90 (ANCHORS section 4): the plans' limit
# Default collect shapes (N, K): LLM layer shapes plus square and skinny ones, each at these M.
SHAPES = ((4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (1024, 8192), (512, 2048), (8192, 1024),
          (2048, 16384))
MS = (16, 64, 256, 1024, 4096, 16384)
SAMPLE = 40  # random configs per collection when --sample is not given


def read_shape(text: str) -> GemmSpec:
    m, n, k = fam.read_dims(text, "M,N,K")
    return GemmSpec(n, k, m)


def shape_text(spec: GemmSpec) -> str:
    return f"{spec.m},{spec.n},{spec.k}"


def read_launch(launch: Launch) -> tuple[GemmSpec, Config] | None:
    try:
        spec = GemmSpec(int(launch.scalar("N")), int(launch.scalar("K")), int(launch.scalar("M")))
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return spec, fam.launch_config(launch, g.CONFIG_SPACE)


def demand(spec: GemmSpec, config: Config, arch: int, shared: int | None = None, registers: int | None = None):
    return g.gemm_demand(spec.m, spec.n, spec.k, config, spec.dtype, arch, shared, registers)


def precheck(config: Config, gpu: GPUSpec, spec: GemmSpec) -> str | None:
    return bench.resource_precheck(config, gpu.smem_per_block)


def read_row(row: dict, arch: int):
    n, k = (int(part[1:]) for part in row["shape"].split("_"))
    if row.get("params"):
        params = json.loads(row["params"])
    else:  # early GEMM sweeps kept the config only in its label, e.g. "M128 N128 K64 G8 w8 s3"
        bm, bn, bk, gm = (int(t[1:]) for t in row["config"].split()[:4])
        params = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": gm}
    config = Config(params, int(row["num_warps"]), int(row["num_stages"]))
    spec = GemmSpec(n, k, int(row["M"]))
    return spec, config, demand(spec, config, arch, *fam.row_compiled(row))


def feasible_space(max_shared: int = HOPPER_MAX_SHARED) -> list[Config]:
    return [c for c in expand_space(g.CONFIG_SPACE) if bench.resource_precheck(c, max_shared) is None]


def plan(options: fam.CollectOptions) -> fam.CollectPlan:
    shapes = fam.int_tuples(options.shapes, SHAPES, "--shapes", 2, "4096:4096,11008:4096")
    ms = fam.ints(options.ms, MS, "--ms")
    specs = [GemmSpec(n, k, m) for n, k in shapes for m in ms]
    defaults = [g.default_config(s.m, s.n, s.k) for s in specs]
    sample = SAMPLE if options.sample is None else options.sample
    configs = list(dict.fromkeys(defaults + fam.sample_configs(feasible_space(), sample, options.seed)))
    return fam.CollectPlan(specs, configs, lambda c: bench.resource_precheck(c, HOPPER_MAX_SHARED))


FAMILY = fam.Family(
    name="gemm", kernel="gemm_kernel", source=Path(g.__file__).resolve(),
    description="shipped dense GEMM (--shapes N:K, --ms)",
    space=lambda: expand_space(g.CONFIG_SPACE), precheck=precheck, demand=demand,
    default_config=lambda spec: g.default_config(spec.m, spec.n, spec.k),
    default_rule=(Path(g.__file__).resolve(), r"^def default_config\("),
    reference=g.gemm_reference, case=lambda spec: bench.GemmCase(spec, seed=2000 + spec.m),
    compile_config=bench.compile_config, read_row=read_row, plan=plan,
    describe_launch=lambda spec, config, arch: g.describe_launch(spec.m, spec.n, spec.k, config, spec.dtype),
    shape_form="M,N,K", read_shape=read_shape, shape_text=shape_text, read_launch=read_launch,
    useful_flops=lambda spec: 2.0 * spec.m * spec.n * spec.k)
