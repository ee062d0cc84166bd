"""`ceilings.unroll` on hand-written SASS loops whose unrolling is known by construction."""

from __future__ import annotations

import pytest

from ceilings.sass import build_cfg, parse_sass
from ceilings.unroll import induction_unroll


def listing(increment: str, loads: int) -> str:
    """A kernel with one loop: `loads` loads and FADDs per pass, the counter R0 stepped by `increment`
    and compared with the bound R7 for the back edge."""
    body = []
    for k in range(loads):
        body += [f"LDG.E R{10 + k}, desc[UR4][R2.64+{hex(4 * k)}] ;", f"FADD R20, R20, R{10 + k} ;"]
    body += [increment, "ISETP.GE.AND P2, PT, R0, R7, PT ;"]
    lines = ["kernel:", "        /*0000*/                   MOV R0, RZ ;", ".L_x_1:"]
    lines += [f"        /*{16 * (i + 1):04x}*/                   {text}" for i, text in enumerate(body)]
    n = len(body) + 1
    lines += [f"        /*{16 * n:04x}*/              @!P2 BRA `(.L_x_1) ;",
              f"        /*{16 * (n + 1):04x}*/                   EXIT ;"]
    return "\n".join(lines)


def loop_unroll(text: str, step: int) -> int:
    fn = parse_sass(text)["kernel"]
    cfg = build_cfg(fn)
    (loop,) = cfg.loops
    return induction_unroll(fn, cfg, loop, step)


@pytest.mark.parametrize("copies, increment, step, expected", [
    (4, "VIADD R0, R0, 0x200 ;", 128, 4),          # 4 body copies, the counter steps 4 x the IR's step
    (2, "IADD3 R0, R0, 0x100, RZ ;", 128, 2),
    (1, "VIADD R0, R0, 0x80 ;", 128, 1),           # not unrolled
    (1, "VIADD R0, R0, 0x4 ;", 1, 1),              # a byte offset for a step of one element: one copy only
    (3, "VIADD R0, R0, 0x200 ;", 128, 1),          # 3 copies cannot be 4x
    (4, "VIADD R9, R9, 0x200 ;", 128, 1),          # the stepped register is not the one the back edge tests
])
def test_the_induction_step_over_the_ir_step_is_the_unroll_factor(copies, increment, step, expected):
    assert loop_unroll(listing(increment, copies), step) == expected
