"""`ceilings.unroll` on hand-written SASS loops whose unrolling is known by construction."""

from __future__ import annotations

import pytest

from ceilings.sass import build_cfg, parse_sass
from ceilings.unroll import induction_unroll


def one_loop(entry: str, loads: int, control: list[str], branch: str) -> str:
    """A kernel of one loop: `entry` before it, `loads` loads and FADDs per pass, then the loop's `control`
    instructions and the back edge `branch` to its head."""
    body = []
    for k in range(loads):
        body += [f"LDG.E R{10 + k}, desc[UR6][R2.64+{hex(4 * k)}] ;", f"FADD R20, R20, R{10 + k} ;"]
    body += control
    lines = ["kernel:", f"        /*0000*/                   {entry}", ".L_x_1:"]
    lines += [f"        /*{16 * (i + 1):04x}*/                   {text}" for i, text in enumerate(body)]
    n = len(body) + 1
    lines += [f"        /*{16 * n:04x}*/              {branch} `(.L_x_1) ;",
              f"        /*{16 * (n + 1):04x}*/                   EXIT ;"]
    return "\n".join(lines)


def listing(increment: str, loads: int) -> str:
    """`loads` loads and FADDs per pass, the counter R0 stepped by `increment` and compared with the bound R7
    for the back edge."""
    return one_loop("MOV R0, RZ ;", loads, [increment, "ISETP.GE.AND P2, PT, R0, R7, PT ;"], "@!P2 BRA")


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


def copied_predicate_listing(copies: int, plop: str) -> str:
    """A loop of `copies` body copies whose counter UR4 steps by `copies` and is compared in a uniform predicate
    UP0, which the back edge reads through a copy into P1 (`plop`), as Triton 3.6's ptxas laid out GemLite's
    8x unrolled GEMV loop."""
    return one_loop("UMOV UR4, URZ ;", copies, [f"UIADD3 UR4, UR4, {hex(copies)}, URZ ;",
                                                "UISETP.NE.U32.AND UP0, UPT, UR4, 0x38, UPT ;", plop], "@P1 BRA")


@pytest.mark.parametrize("copies, plop, expected", [
    (8, "PLOP3.LUT P1, PT, PT, PT, UP0, 0x80, 0x0 ;", 8),   # P1 is a copy of the compare's UP0
    (4, "PLOP3.LUT P1, PT, PT, PT, UP0, 0x80, 0x0 ;", 4),
    (8, "PLOP3.LUT P1, PT, P3, PT, UP0, 0x80, 0x0 ;", 1),   # P1 also depends on P3: not a copy of the compare
])
def test_a_back_edge_on_a_copied_uniform_predicate_gives_the_unroll(copies, plop, expected):
    assert loop_unroll(copied_predicate_listing(copies, plop), 1) == expected
