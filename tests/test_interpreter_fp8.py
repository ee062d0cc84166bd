"""Casts to float8 in Triton's CPU interpreter as the GPU computes them (advisor/capture/interpreter_fixes.py): the
interpreter's own conversion dropped the carry of a mantissa that rounds up (set 12's NVFP4 scales: 1.97 -> 1.0)."""

from __future__ import annotations

import textwrap

import torch

from advisor.capture.nogpu import bind, interpret
from ceilings.compile import load_kernel

CASTS = '''
import triton
import triton.language as tl


@triton.jit
def _to_fp8_kernel(X, E4, E5, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < N)
    tl.store(E4 + offs, x.to(tl.float8e4nv), mask=offs < N)
    tl.store(E5 + offs, x.to(tl.float8e5), mask=offs < N)
'''

# a mantissa that rounds up into the next power of two, halves between two fp8 values (to even), values past the
# e4m3 range (saturated to 448, as cvt.rn.satfinite), zeros, a subnormal, negatives
VALUES = [1.97, 3.9, 2.25, 1.0625, 1.1875, 500.0, -500.0, 448.0, 0.0, -0.0, 0.0078125 * 1.1, -1.0625, 0.09375, 300.0]


def test_casts_to_fp8_round_to_nearest_even_with_carry_and_saturate_as_torch(tmp_path):
    path = tmp_path / "casts.py"
    path.write_text(textwrap.dedent(CASTS))
    fn = load_kernel(str(path), "_to_fp8_kernel")
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        x = torch.tensor(VALUES).to(dtype)
        e4 = torch.empty(len(VALUES), dtype=torch.float8_e4m3fn)
        e5 = torch.empty(len(VALUES), dtype=torch.float8_e5m2)
        interpret(fn, (1,), bind(fn, (x, e4, e5, len(VALUES)), {"BLOCK": 16}))
        exact = x.float()
        assert torch.equal(e4.view(torch.uint8), exact.to(torch.float8_e4m3fn).view(torch.uint8)), dtype
        assert torch.equal(e5.view(torch.uint8), exact.to(torch.float8_e5m2).view(torch.uint8)), dtype
    assert e4.float()[0] == 2.0  # 1.97: the carry into the exponent
