"""Sweep the shipped attention forward (non-causal) over sequence lengths, head sizes and configs on a GPU.

    python benchmarks/attention_sweep.py --out OUT [--deadline 300] [--workers 15]

Sequences 256..8192 with head_dim 64 and 128, batch x heads chosen so each case moves about the same
work; every config of kernels.attention.CONFIG_SPACE that passes the register precheck; random bf16
data, checked against a float32 reference (relative error < 1e-2) before timing (CUDA graph of 10
launches, median of 20 replays, no L2 flush). Appends to OUT/attention_sweep.csv.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.sweep import SweepPlan, sweep_cli  # noqa: E402
from ceilings.launch import Config  # noqa: E402
from kernels import attention as at  # noqa: E402
from kernels.attention_bench import AttentionCase, AttentionSpec, compile_config, resource_precheck  # noqa: E402

CASES = tuple((seq, dim, max(1, (1 << 24) // (seq * seq) * 8)) for seq in (256, 1024, 2048, 4096, 8192)
              for dim in (64, 128))


def plan() -> SweepPlan:
    specs = [AttentionSpec(seq, dim, bh) for seq, dim, bh in CASES]
    configs = [Config({"BLOCK_M": bm, "BLOCK_N": bn}, w, s) for bm in at.CONFIG_SPACE["BLOCK_M"]
               for bn in at.CONFIG_SPACE["BLOCK_N"] for w in at.CONFIG_SPACE["num_warps"]
               for s in at.CONFIG_SPACE["num_stages"]]
    return SweepPlan(kernel="attention_kernel", specs=specs, configs=configs,
                     make_case=lambda spec: AttentionCase(spec, seed=4000 + spec.seq), compile_fn=compile_config,
                     prefilter=resource_precheck, abort_ratio=1.5)


def main(argv=None) -> int:
    return sweep_cli(lambda args: plan(), "attention_sweep.csv", __doc__, argv)


if __name__ == "__main__":
    raise SystemExit(main())
