"""Placing SASS blocks on the kernel's regions when no region holds a quarter of a block's source lines."""

from __future__ import annotations

from pathlib import Path

from advisor.advice.suggest import subjects_for
from ceilings.hardware import resolve_gpu

ROOT = Path(__file__).resolve().parents[1]
MAXPOOL = str(ROOT / "benchmarks" / "user_kernels" / "maxpool2d_nhwc.py")


def test_a_block_whose_lines_spread_over_many_regions_is_placed_where_they_meet():
    """A 3 x 3 max-pool window unrolled with `static_range`, each tap behind its own `if` (a user's kernel, set 10):
    one SASS block holds a few ops of many taps, none of whose regions gets a quarter of the votes. The launch
    failed with an IndexError (`advisor: internal error`); it now has a ceiling, bound by DRAM as a pool's is."""
    (subject,) = subjects_for(MAXPOOL, call="maxpool2d_nhwc(randn(64, 112, 112, 256, bf16))", gpu=resolve_gpu("h200"))
    (ceiling,) = subject.ceilings([subject.current])
    moved = (64 * 112 * 112 * 256 + 64 * 56 * 56 * 256) * 2  # read once, write the quarter-size output: bytes
    assert ceiling.binding == "dram"
    # a floor: no more than the compulsory bytes at the H200's 4.8 TB/s peak, plus the launch
    assert moved / 4.8e6 * 0.9 <= ceiling.ceiling_us <= moved / 4.8e6 * 3
