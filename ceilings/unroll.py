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
   unroll. The loop then runs T // u times. The counter may count down the iterations left, and may be
   a uniform register (UR, stepped by UIADD3): FlagGems' rotary kernel with 2 warps keeps its 8-copy
   loop over 32 heads in UR11, stepped by -8.
3. **One loop run a constant number of times** whose counter is in other units than the IR's (a byte
   offset where the IR counts iterations): the back edge compares a register stepped by an immediate c
   with an immediate bound B, and the register holds an immediate r0 on entry, so the SASS loop runs
   exactly N = (B - r0) / c times; when the IR loop runs T times for every CTA and N divides T, the loop
   holds u = T / N copies of the body (again only when every body work count is a multiple of u).

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
_REGISTER = re.compile(r"\bU?R(\d+)\b")  # a register, or a uniform one (a counter every thread shares)
_PREDICATE_OPERAND = re.compile(r"!?U?P\d")
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
            unroll = induction_unroll(fn, cfg, loops[members[0]], step, constant_trips(ir.regions[region].trips)) \
                if step else 1
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
    # Predicates are a 64-bit add's carry out (IADD3 R, P0, R, imm, RZ): the low half steps all the same.
    ops = [o for o in _operands(ins) if o not in ("PT", "RZ", "!PT", "UPT", "URZ", "!UPT")
           and not _PREDICATE_OPERAND.fullmatch(o)]
    if ins.opcode not in ("VIADD", "IADD3", "IADD", "IADD32I", "UIADD3", "UVIADD") or not ops or ops[0] != register:
        return None
    if "X" in ins.mods.upper().split("."):
        return None  # the high half of a 64-bit add
    sources = ops[1:]
    if register not in sources:
        return None
    values = [_immediate(o) for o in sources if o != register]
    values = [v for v in values if v is not None]
    return values[0] if len(values) == 1 and len(sources) == 2 else None


def constant_trips(trips) -> int | None:
    """The IR loop's trip count when it is one integer for every CTA, else None."""
    if trips is None:
        return None
    values = {float(v) for v in (trips.ravel() if hasattr(trips, "ravel") else [trips])}
    if len(values) != 1:
        return None
    value = values.pop()
    return int(value) if value == value and value.is_integer() and value > 0 else None


def _initial_value(fn: Function, cfg: CFG, loop: Loop, register: str) -> int | None:
    """The immediate `register` holds when the loop is entered: its last write before the loop's header
    in the straight-line code that falls into it (no branch and no branch target in between), when that
    write moves a constant unconditionally; None otherwise."""
    start = cfg.blocks[loop.header][0]
    targets = set(fn.labels.values()) - {start}
    prefix, number = register.rstrip("0123456789"), int(register.lstrip("UR"))
    for index in range(start - 1, -1, -1):
        ins = fn.instructions[index]
        if ins.opcode in ("BRA", "BRX", "JMP", "CALL", "RET", "EXIT"):
            return None
        ops = _operands(ins)
        written = ops[0] if ops else ""
        if written == f"{prefix}{number - 1}" and (ins.opcode == "CS2R" or ".64" in ins.mods or "WIDE" in ins.mods):
            # A pair written at once: the register is its high half.
            return 0 if ins.opcode == "CS2R" and ops[1:] == ["SRZ"] and not ins.predicated else None
        if written == register:
            return None if ins.predicated else _constant_move(ins, ops[1:])
        if index in targets:
            return None  # another path joins here
    return None


def _constant_move(ins: Instruction, sources: list[str]) -> int | None:
    """The constant an instruction moves into its destination (MOV, IMAD.MOV, CS2R of zero, HFMA2.MMA of
    zeros), or None."""
    if ins.opcode in ("MOV", "MOV32I") or (ins.opcode == "IMAD" and ins.mods.startswith(".MOV")):
        value = sources[-1] if sources else ""
        return 0 if value == "RZ" else _immediate(value)
    if ins.opcode == "CS2R" and sources == ["SRZ"]:
        return 0
    if ins.opcode == "HFMA2" and ".MMA" in ins.mods and sources[:2] == ["-RZ", "RZ"] and len(sources) == 4:
        return 0 if _immediate(sources[2]) == 0 and _immediate(sources[3]) == 0 else None
    return None


def induction_unroll(fn: Function, cfg: CFG, loop: Loop, step: int, trips: int | None = None) -> int:
    """u when every body work opcode's count is a multiple of u and either the loop's back-edge compare
    reads a register incremented by u x `step` in the loop, or (`trips`: the IR loop's constant trip
    count) the SASS loop runs a constant N = trips / u times by its counter's immediate start, step and
    bound; 1 otherwise."""
    body = _instructions(fn, cfg, loop)
    latches = [b for b in loop.blocks if loop.header in cfg.succ.get(b, set())]
    predicates = set()
    for b in latches:
        last = fn.instructions[cfg.blocks[b][1] - 1]
        guard = _PREDICATE.search(last.text.split("*/", 1)[-1])
        if last.opcode == "BRA" and guard:
            predicates.add(guard.group(2))
    # The branch may read a copy of the compare's predicate: Triton 3.6's ptxas sets a uniform predicate
    # (UISETP UP0) and copies it with PLOP3.LUT P1, PT, PT, PT, UP0 before the back edge (GemLite's 8x unrolled
    # GEMV loop, whose copies then counted 8 times each: a ceiling 5x over the measured time, RESULTS 60).
    for ins in body:
        ops = _operands(ins)
        if ins.opcode in ("PLOP3", "UPLOP3") and ops and ops[0] in predicates:
            sources = [o.lstrip("!") for o in ops[2:] if _PREDICATE_OPERAND.fullmatch(o)
                       and o.lstrip("!") not in ("PT", "UPT")]
            if len(sources) == 1:
                predicates.add(sources[0])
    registers, bounds = set(), {}
    for ins in body:
        ops = _operands(ins)
        if ins.opcode in ("ISETP", "UISETP") and ops and ops[0] in predicates:
            compared = [o.split(".")[0] for o in ops[2:4]]
            registers |= {o for o in compared if _REGISTER.fullmatch(o)}
            if len(compared) == 2 and _REGISTER.fullmatch(compared[0]) and _immediate(compared[1]) is not None:
                bounds[compared[0]] = _immediate(compared[1])
    factors = set()
    for register in registers:
        for ins in body:
            c = _increment(ins, register)
            if c is not None and c % step == 0 and 2 <= abs(c) // abs(step) <= MAX_UNROLL:
                factors.add(abs(c) // abs(step))
            elif c and trips and register in bounds:
                start = _initial_value(fn, cfg, loop, register)
                span = None if start is None else bounds[register] - start
                if span and span % c == 0 and span // c >= 1 and trips % (span // c) == 0 \
                        and 2 <= trips // (span // c) <= MAX_UNROLL:
                    factors.add(trips // (span // c))
    if len(factors) != 1:
        return 1
    unroll = factors.pop()
    work = _work(fn, cfg, loop)
    copies = math.gcd(*work.values()) if work else 0
    return unroll if copies and copies % unroll == 0 else 1
