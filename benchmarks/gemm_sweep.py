"""Sweep the shipped dense GEMM over shapes and configs on a GPU (the GEMM family of the dataset).

    python benchmarks/gemm_sweep.py --out OUT [--sample 40] [--deadline 450] [--workers 15]

Shapes (N, K) from LLM layers and square ones, each at M in {16, 64, 256, 1024, 4096, 16384} (skinny to large);
a seeded random sample of the configs of kernels.gemm.CONFIG_SPACE that pass the resource precheck, plus
the default rule's. Random bf16 data; each config checked against the float32 reference (relative error
< 1e-2) before it is timed (CUDA graph of 10 launches, median of 20 replays, no L2 flush; configs over
1.5x the case's fastest single launch are screened as "slow"). Appends to OUT/gemm_sweep.csv.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor import measure  # noqa: E402
from advisor.sweep import SweepPlan, run_sweep  # noqa: E402
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    parser.add_argument("--sample", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--deadline", type=float)
    parser.add_argument("--workers", type=int)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    specs = [GemmSpec(n, k, m) for n, k in SHAPES for m in MS]
    configs = random.Random(args.seed).sample(space(), args.sample)
    defaults = list(dict.fromkeys(g.default_config(s.m, s.n, s.k) for s in specs))
    plan = SweepPlan(kernel="gemm_kernel", specs=specs, configs=list(dict.fromkeys(defaults + configs)),
                     make_case=make_case, compile_fn=compile_config,
                     prefilter=lambda c: resource_precheck(c, MAX_SHARED), tol=1e-2, abort_ratio=1.5,
                     timing={"mode": measure.GRAPH, "launches_per_graph": 10, "replays": 20})
    summary = run_sweep(plan, out / "gemm_sweep.csv", workers=args.workers, deadline_s=args.deadline,
                        show_progress=sys.stderr.isatty())
    print("sweep:", json.dumps(summary), f"configs={len(plan.configs)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
