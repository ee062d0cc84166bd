"""Sweep the shipped dense GEMM over shapes and configs on a GPU (the GEMM family of the dataset).

    python benchmarks/gemm_sweep.py --out OUT [--sample 40] [--deadline 450] [--workers 15]

Shapes (N, K) from LLM layers and square ones, each at M in {16, 64, 256, 1024, 4096, 16384} (skinny to large);
a seeded random sample of the configs of kernels.gemm.CONFIG_SPACE that pass the resource precheck, plus
the default rule's. Random bf16 data; each config checked against the float32 reference (relative error
< 1e-2) before it is timed (CUDA graph of 10 launches, median of 20 replays, no L2 flush; configs over
1.5x the case's fastest single launch are screened as "slow"). Appends to OUT/gemm_sweep.csv.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.measure.collect import build_plan  # noqa: E402
from advisor.measure.sweep import sweep_cli  # noqa: E402


def _options(parser) -> None:
    parser.add_argument("--sample", type=int, default=40, help="random configs drawn from the feasible space")
    parser.add_argument("--seed", type=int, default=0)


def main(argv=None) -> int:
    return sweep_cli(lambda args: build_plan("gemm", sample=args.sample, seed=args.seed), "gemm_sweep.csv", __doc__,
                     argv, _options)


if __name__ == "__main__":
    raise SystemExit(main())
