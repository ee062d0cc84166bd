"""Sweep the shipped dense GEMM over shapes and configs on a GPU (the GEMM family of the dataset).

    python benchmarks/gemm_sweep.py --out OUT [--sample 40] [--deadline 450] [--workers 15]

Shapes (N, K) from LLM layers and square ones, each at M in {16, 64, 256, 1024, 4096, 16384} (skinny to large);
a seeded random sample of the configs of kernels.gemm.CONFIG_SPACE that pass the resource precheck, plus
the default rule's. Random bf16 data; each config checked against the float32 reference (relative error
< 1e-2) before it is timed (CUDA graph of 10 launches, median of 20 replays, no L2 flush; configs over
1.5x the case's fastest single launch are screened as "slow"). Appends to OUT/gemm_sweep.csv.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.sweep import SweepPlan, sweep_cli  # noqa: E402
from ceilings.launch import Config  # noqa: E402
from kernels import gemm as g  # noqa: E402
from kernels.gemm_bench import GemmCase, GemmSpec, compile_config, resource_precheck  # noqa: E402

SHAPES = ((4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (1024, 8192), (512, 2048), (8192, 1024),
          (2048, 16384))
MS = (16, 64, 256, 1024, 4096, 16384)
MAX_SHARED = 227 * 1024  # Hopper, per block (ANCHORS section 4)


def space() -> list[Config]:
    out = []
    for bm in g.CONFIG_SPACE["BLOCK_M"]:
        for bn in g.CONFIG_SPACE["BLOCK_N"]:
            for bk in g.CONFIG_SPACE["BLOCK_K"]:
                for gm in g.CONFIG_SPACE["GROUP_M"]:
                    for w in g.CONFIG_SPACE["num_warps"]:
                        for s in g.CONFIG_SPACE["num_stages"]:
                            out.append(Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": gm}, w, s))
    return [c for c in out if resource_precheck(c, MAX_SHARED) is None]


def make_case(spec: GemmSpec) -> GemmCase:
    return GemmCase(spec, seed=2000 + spec.m)


def plan(sample: int = 40, seed: int = 0) -> SweepPlan:
    specs = [GemmSpec(n, k, m) for n, k in SHAPES for m in MS]
    configs = random.Random(seed).sample(space(), sample)
    defaults = list(dict.fromkeys(g.default_config(s.m, s.n, s.k) for s in specs))
    return SweepPlan(kernel="gemm_kernel", specs=specs, configs=list(dict.fromkeys(defaults + configs)),
                     make_case=make_case, compile_fn=compile_config,
                     prefilter=lambda c: resource_precheck(c, MAX_SHARED), abort_ratio=1.5)


def _options(parser) -> None:
    parser.add_argument("--sample", type=int, default=40, help="random configs drawn from the feasible space")
    parser.add_argument("--seed", type=int, default=0)


def main(argv=None) -> int:
    return sweep_cli(lambda args: plan(args.sample, args.seed), "gemm_sweep.csv", __doc__, argv, _options)


if __name__ == "__main__":
    raise SystemExit(main())
