"""Latency floors: what a warp must wait for and what a grid costs to run, beyond the per-pipe and issue floors.

1. **A warp's dependency path** (`block_path_cycles`). Each SASS instruction's control bits name a write
   scoreboard (the variable-latency result it produces: a load, a shuffle, MUFU) and a wait mask (the
   scoreboards it must see released before it issues; Jia et al., "Dissecting the NVIDIA Volta GPU
   Architecture via Microbenchmarking", 2018, section 2.1). So within a basic block, an instruction that waits
   on scoreboard k issues no sooner than the latest earlier instruction that set k, plus that operation's least
   latency; and each instruction no sooner than its predecessor plus its stall count (at least 1), as the chain
   floor already counts. The longest such path through a block is a floor on the block's time for one warp;
   edges into later blocks are dropped (a floor: a load issued before a loop's back edge and waited on after it
   adds nothing). A CTA barrier (BAR.SYNC) holds the warp at least the time the slowest barrier of a CTA of that
   many warps takes. Least latencies (`MIN_LATENCY_CYCLES`) are measured: dependent chains timed with clock64 in
   one warp (`benchmarks/latency_probe.cu`, benchmarks/RESULTS.md section 25), less one cycle for the loop
   around them. What was not measured, or may not wait at all, counts 0: a predicated producer (all its lanes
   may be off), spill code (LDL/STL: register allocation is the assembler's choice, as the chain floor's rule),
   constant and generic loads, LDSM, LDGSTS and the DEPBAR / WARPGROUP waits, S2R.
2. **A grid's dispatch** (`empty_kernel_floor`): the GPU starts and retires CTAs at a bounded rate; an empty
   kernel with the same grid and warps per CTA, timed as the product times a launch (a CUDA graph of launches
   back to back, `benchmarks/latency_probe.py`), is the fastest any kernel of that shape can run: a kernel that
   works only holds each CTA longer. Stored per GPU with its calibration (`ceilings/calibration/`).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ceilings.sass import CFG, Function, Instruction

# Least cycles from a producer's issue to the issue of an instruction waiting on its scoreboard, by opcode, on
# sm_90 (H100 and H200: the same SM). Measured 2026-11-23 (RESULTS 25) as chains of 32 dependent instructions
# in one warp, the smallest of 8 runs, minus one cycle for the loop: LDG through L1 (L1 hit, the fastest any
# global load completes) 34.1 H100 / 34.1 H200, LDS 23.1 / 23.1, SHFL.BFLY 24.1 / 24.1, MUFU.EX2/RSQ/LG2
# 18.2-19.1 / 18.2-19.1 (the least of the three for every MUFU).
MIN_LATENCY_CYCLES: dict[int, dict[str, int]] = {90: {"LDG": 33, "LDS": 22, "SHFL": 23, "MUFU": 17}}
# Cycles between back-to-back BAR.SYNC of a CTA of (at least) that many warps, minus one: 1 warp 14.2,
# 4 warps 20.2, 32 warps 76.2 (H100; H200 RESULTS 25).
BARRIER_CYCLES: dict[int, dict[int, int]] = {90: {1: 13, 4: 19, 32: 75}}
_NO_BARRIER = 7
_SPILL = ("LDL", "STL")


@dataclass(frozen=True)
class Control:
    """The scheduling fields of a Volta-and-later instruction's control bits (bits 105-125 of 128)."""

    stall: int
    yield_flag: bool
    write_barrier: int | None  # scoreboard set when the result is written (None: none)
    read_barrier: int | None   # scoreboard set when the source registers may be reused
    wait_mask: int             # scoreboards waited on before issue, bit k = scoreboard k


def control_bits(high_word: int) -> Control:
    """Decode the high 64-bit word of an instruction (bits 41-44 stall, 45 yield, 46-48 write barrier, 49-51
    read barrier, 52-57 wait mask; Jia et al. 2018, section 2.1)."""
    write = (high_word >> 46) & 7
    read = (high_word >> 49) & 7
    return Control(stall=(high_word >> 41) & 0xF, yield_flag=bool((high_word >> 45) & 1),
                   write_barrier=None if write == _NO_BARRIER else write,
                   read_barrier=None if read == _NO_BARRIER else read, wait_mask=(high_word >> 52) & 0x3F)


def producer_latency(ins: Instruction, arch: int = 90) -> int:
    """The least cycles between `ins` and an instruction waiting on its write scoreboard (0: not known)."""
    if ins.predicated:  # every lane may be off: the result may come at once
        return 0
    table = MIN_LATENCY_CYCLES.get(arch, {})
    return table.get(ins.opcode, 0)


def barrier_cycles(warps: int, arch: int = 90) -> int:
    """The least cycles a BAR.SYNC holds a warp of a CTA of `warps` warps (the largest measured size <= it)."""
    table = BARRIER_CYCLES.get(arch, {})
    sizes = [w for w in sorted(table) if w <= max(warps, 1)]
    return table[sizes[-1]] if sizes else 0


def block_path_cycles(instructions: Sequence[Instruction], warps: int, arch: int = 90) -> int:
    """Least cycles from the issue of a block's first instruction to the issue of the instruction after its
    last, for one warp: stall counts in order, scoreboard waits on producers in the block, CTA barriers."""
    ready: dict[int, int] = {}  # scoreboard -> earliest cycle its producers in this block are all done
    bar = barrier_cycles(warps, arch)
    t = 0
    for ins in instructions:
        if ins.opcode in _SPILL:
            continue
        control = control_bits(ins.control) if ins.control is not None else None
        if control is not None:
            for k in range(6):
                if control.wait_mask >> k & 1 and k in ready:
                    t = max(t, ready[k])
            if control.write_barrier is not None:
                done = t + producer_latency(ins, arch)
                ready[control.write_barrier] = max(ready.get(control.write_barrier, 0), done)
        step = ins.issue_cycles
        if ins.opcode == "BAR" and ".SYNC" in ins.mods and not ins.predicated:
            step = max(step, bar)
        t += step
    return t


def block_path_table(fn: Function, cfg: CFG, warps: int, arch: int = 90) -> np.ndarray:
    """`block_path_cycles` of every block of a function's CFG (0 for blocks that cannot be reached)."""
    return np.array([block_path_cycles(fn.instructions[s:e], warps, arch) if j in cfg.reachable else 0.0
                     for j, (s, e) in enumerate(cfg.blocks)], dtype=float)


def empty_kernel_floor(table: dict[int, Sequence[Sequence[float]]], ctas: int, warps: int) -> float | None:
    """A floor, in us, on any launch of `ctas` CTAs of `warps` warps: the measured time of an empty kernel of
    that shape (`table`: warps -> [(grid, us), ...] ascending), None without a measurement.

    Between measured grids the time is taken from below: the larger of the last measured grid's time and the
    line through the two measured grids before it, extended (the time grows with the grid and, past the first
    wave, by a constant time per CTA, so a secant extended to the right stays under it). Warps per CTA: the
    least over the measured sizes <= warps (more warps never start faster; the smallest size has no bound
    below it and gives none)."""
    best: float | None = None
    for size, rows in table.items():
        if int(size) > max(warps, 1) or not rows:
            continue
        grids = [int(g) for g, _ in rows]
        times = [float(us) for _, us in rows]
        i = bisect.bisect_right(grids, ctas) - 1
        if i < 0:
            continue
        floor = times[i]
        if i >= 1 and grids[i] < ctas:
            slope = (times[i] - times[i - 1]) / (grids[i] - grids[i - 1])
            floor = max(floor, times[i] + max(slope, 0.0) * (ctas - grids[i]))
        best = floor if best is None else min(best, floor)
    return best
