"""How ptxas unrolled a kernel's loops, read from the SASS, so that each copy of a loop body counts once.

A SASS loop matched to an IR loop of T iterations runs T times only if ptxas kept one body copy per
iteration. Two shapes of unrolling are recognised:

1. **A main loop and a remainder loop** (sibling SASS loops matched to one IR loop): the main loop holds
   u copies and runs T // u times, the remainder T % u times, u being the median ratio of their body
   work instructions (memory, floating point, MUFU, MMA), whose loop control does not grow with u.
2. **One loop whose induction variable steps by u times the IR's step** (the remainder, if any, peeled
   into straight-line code after it, or none needed): the register that the back edge's compare reads
   is incremented by an immediate; that immediate over the IR loop's constant step is u. Accepted only
   when every body work opcode's count in the loop is a multiple of u (u copies of the body), so a
   counter kept in other units (a byte offset where the IR counts elements) is not mistaken for an
   unroll. The loop then runs T // u times.

Straight-line remainder copies peeled out of the loop count once per entry of the loop's region (a few
iterations' worth on top; their guards are not evaluated).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict

from ceilings.sass import CFG, Function, Instruction, Loop
from ceilings.ttir_eval import KernelIR

BODY_WORK = frozenset(("LDG", "STG", "LDS", "STS", "LDSM", "LDGSTS", "ATOMG", "REDG", "FFMA", "FADD", "FMUL",
                       "HFMA2", "HADD2", "HMUL2", "MUFU", "DFMA", "DADD", "DMUL", "HMMA", "HGMMA", "IMMA", "QGMMA"))
MAX_UNROLL = 16
_PREDICATE = re.compile(r"@(!?)(U?P\d)\s")
_REGISTER = re.compile(r"\bR(\d+)\b")
_IMMEDIATE = re.compile(r"^-?0x[0-9a-f]+$|^-?\d+$")


def unroll_shares(fn: Function, cfg: CFG, loops: list[Loop], loop_region: list[int | None], ir: KernelIR,
                  parent_of, notes: list[str]) -> list[tuple[str, int]]:
    """Per SASS loop: ("all", 1) runs every iteration, ("main", u) T // u times, ("rest", u) T % u times,
    ("none", u) not at all (a middle copy of an unrolled group), ("unrolled", u) T // u times with the
    remainder, if any, peeled out of it."""
    shares: list[tuple[str, int]] = [("all", 1)] * len(loops)
    groups: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, (loop, region) in enumerate(zip(loops, loop_region, strict=True)):
        if region is not None:
            groups[(id(parent_of(loop)), region)].append(i)
    for (_, region), members in groups.items():
        line = ir.regions[region].line
        if len(members) == 1:
            step = ir.regions[region].step
            unroll = induction_unroll(fn, cfg, loops[members[0]], step) if step else 1
            if unroll > 1:
                shares[members[0]] = ("unrolled", unroll)
                notes.append(f"loop at line {line}: unrolled {unroll}x without a remainder loop (its induction "
                             f"variable steps {unroll} x {step}): counted trips // {unroll} times")
            continue
        size = {i: sum(e - s for s, e in (cfg.blocks[b] for b in loops[i].blocks)) for i in members}
        ordered = sorted(members, key=lambda i: -size[i])
        main, rest = ordered[0], ordered[-1]
        unroll = pair_unroll(fn, cfg, loops[main], loops[rest])
        shares[main], shares[rest] = ("main", unroll), ("rest", unroll)
        for i in ordered[1:-1]:
            shares[i] = ("none", unroll)
        notes.append(f"loop at line {line}: unrolled {unroll}x with a remainder loop: the main loop counted "
                     f"trips // {unroll} times, the remainder trips % {unroll}")
    return shares


def _instructions(fn: Function, cfg: CFG, loop: Loop) -> list[Instruction]:
    return [i for b in sorted(loop.blocks) for i in fn.instructions[slice(*cfg.blocks[b])]]


def _work(fn: Function, cfg: CFG, loop: Loop) -> Counter:
    # HFMA2.MMA with a zero product is ptxas's way to move a constant into a register, not body work.
    return Counter(i.opcode for i in _instructions(fn, cfg, loop)
                   if i.opcode in BODY_WORK and not (i.opcode == "HFMA2" and ".MMA" in i.mods))


def pair_unroll(fn: Function, cfg: CFG, main: Loop, rest: Loop) -> int:
    """Copies of the loop body in the main loop: the median ratio of the body's work instructions
    between the main and the remainder loop, whose loop control (increment, test, branch) does not grow
    with unrolling."""
    ours, theirs = _work(fn, cfg, main), _work(fn, cfg, rest)
    ratios = sorted(ours[op] / theirs[op] for op in theirs if theirs[op])
    if ratios:
        return int(min(MAX_UNROLL, max(1, round(ratios[len(ratios) // 2]))))
    sizes = [sum(e - s for s, e in (cfg.blocks[b] for b in lp.blocks)) for lp in (main, rest)]
    return int(min(MAX_UNROLL, max(1, round(sizes[0] / max(sizes[1], 1)))))


def _operands(ins: Instruction) -> list[str]:
    body = ins.text.split("*/", 1)[-1]
    body = _PREDICATE.sub("", body, count=1).strip().rstrip(";").strip()
    parts = body.split(None, 1)
    return [o.strip() for o in parts[1].split(",")] if len(parts) > 1 else []


def _immediate(text: str) -> int | None:
    return int(text, 0) if _IMMEDIATE.match(text) else None


def _increment(ins: Instruction, register: str) -> int | None:
    """The immediate `ins` adds to `register` in place (R = R + imm), or None."""
    ops = [o for o in _operands(ins) if o not in ("PT", "RZ", "!PT")]
    if ins.opcode not in ("VIADD", "IADD3", "IADD", "IADD32I") or not ops or ops[0] != register:
        return None
    if "X" in ins.mods.upper().split("."):
        return None  # the high half of a 64-bit add
    sources = ops[1:]
    if register not in sources:
        return None
    values = [_immediate(o) for o in sources if o != register]
    values = [v for v in values if v is not None]
    return values[0] if len(values) == 1 and len(sources) == 2 else None


def induction_unroll(fn: Function, cfg: CFG, loop: Loop, step: int) -> int:
    """u when the loop's back-edge compare reads a register incremented by u x `step` in the loop and
    every body work opcode's count is a multiple of u; 1 otherwise."""
    body = _instructions(fn, cfg, loop)
    latches = [b for b in loop.blocks if loop.header in cfg.succ.get(b, set())]
    predicates = set()
    for b in latches:
        last = fn.instructions[cfg.blocks[b][1] - 1]
        guard = _PREDICATE.search(last.text.split("*/", 1)[-1])
        if last.opcode == "BRA" and guard:
            predicates.add(guard.group(2))
    registers = set()
    for ins in body:
        ops = _operands(ins)
        if ins.opcode in ("ISETP", "UISETP") and ops and ops[0] in predicates:
            registers |= {o.split(".")[0] for o in ops[2:] if _REGISTER.fullmatch(o.split(".")[0])}
    factors = set()
    for register in registers:
        for ins in body:
            c = _increment(ins, register)
            if c is not None and c % step == 0 and 2 <= abs(c) // abs(step) <= MAX_UNROLL:
                factors.add(abs(c) // abs(step))
    if len(factors) != 1:
        return 1
    unroll = factors.pop()
    work = _work(fn, cfg, loop)
    copies = math.gcd(*work.values()) if work else 0
    return unroll if copies and copies % unroll == 0 else 1
