"""Sweep the shipped row softmax over widths, row counts and configs on a GPU (a DRAM/XU-bound family).

    python benchmarks/softmax_sweep.py --out OUT [--deadline 300] [--workers 15]

The same plan as `advisor collect softmax` (kernels/softmax_family.py): widths 128..32768 at
256..65536 rows, every config of kernels.softmax.CONFIG_SPACE that passes the register precheck,
random bf16 data; checked against torch's float32 softmax (relative error < 1e-2) before timing
(CUDA graph of 10 launches, median of 20 replays, no L2 flush). Appends to OUT/softmax_sweep.csv.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.measure.collect import build_plan  # noqa: E402
from advisor.measure.sweep import sweep_cli  # noqa: E402


def main(argv=None) -> int:
    return sweep_cli(lambda args: build_plan("softmax"), "softmax_sweep.csv", __doc__, argv)


if __name__ == "__main__":
    raise SystemExit(main())
