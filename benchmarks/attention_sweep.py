"""Sweep the shipped attention forward (non-causal) over sequence lengths, head sizes and configs on a GPU.

    python benchmarks/attention_sweep.py --out OUT [--deadline 300] [--workers 15]

The same plan as `advisor collect attention` (kernels/attention_family.py): sequences 256..8192
with head_dim 64 and 128, batch x heads chosen so each case moves about the same work; every config of
kernels.attention.CONFIG_SPACE that passes the register precheck; random bf16 data, checked against a
float32 reference (relative error < 1e-2) before timing (CUDA graph of 10 launches, median of 20
replays, no L2 flush). Appends to OUT/attention_sweep.csv.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.measure.collect import build_plan  # noqa: E402
from advisor.measure.sweep import sweep_cli  # noqa: E402


def main(argv=None) -> int:
    return sweep_cli(lambda args: build_plan("attention"), "attention_sweep.csv", __doc__, argv)


if __name__ == "__main__":
    raise SystemExit(main())
