"""Sweep the shipped row softmax over widths, row counts and configs on a GPU (a DRAM/XU-bound family).

    python benchmarks/softmax_sweep.py --out OUT [--deadline 300] [--workers 15]

Widths 128..32768 at 256..65536 rows, every config of kernels.softmax.CONFIG_SPACE that passes the
register precheck, random bf16 data; checked against torch's float32 softmax (relative error < 1e-2)
before timing (CUDA graph of 10 launches, median of 20 replays, no L2 flush). Appends to
OUT/softmax_sweep.csv.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.sweep import SweepPlan, sweep_cli  # noqa: E402
from ceilings.launch import Config  # noqa: E402
from kernels import softmax as sm  # noqa: E402
from kernels.softmax_bench import SoftmaxCase, SoftmaxSpec, compile_config, resource_precheck  # noqa: E402

COLS = (128, 512, 2048, 4096, 8192, 32768)
ROWS = (256, 4096, 65536)


def space() -> list[Config]:
    out = [Config({"BLOCK_N": b, "ROWS_PER_PROGRAM": r}, w, s) for b in sm.CONFIG_SPACE["BLOCK_N"]
           for r in sm.CONFIG_SPACE["ROWS_PER_PROGRAM"] for w in sm.CONFIG_SPACE["num_warps"]
           for s in sm.CONFIG_SPACE["num_stages"]]
    return [c for c in out if resource_precheck(c) is None]


def plan() -> SweepPlan:
    specs = [SoftmaxSpec(cols, rows) for cols in COLS for rows in ROWS if cols * rows <= 1 << 30]
    return SweepPlan(kernel="softmax_kernel", specs=specs, configs=space(),
                     make_case=lambda spec: SoftmaxCase(spec, seed=3000 + spec.m), compile_fn=compile_config,
                     prefilter=resource_precheck, abort_ratio=1.5)


def main(argv=None) -> int:
    return sweep_cli(lambda args: plan(), "softmax_sweep.csv", __doc__, argv)


if __name__ == "__main__":
    raise SystemExit(main())
