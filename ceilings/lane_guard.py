"""Which warps of a CTA run a block: guards on the thread index evaluated per lane.

A scalar store, atomic or final reduction step in Triton runs in one thread: ptxas guards it with a
predicate computed from `SR_TID.X` (`@!P1 EXIT`, `@!P1 BRA` around a `REDG`), so the blocks behind the
guard run in one warp of the CTA, not in all of them. Counting them once per warp over-counted every
pipeline they use (FlagGems' scalar reductions: LSU 1.10-1.22x Nsight Compute's, RESULTS 26).

The values the kernel computes from the thread index alone (`S2R SR_TID.X`, immediates, RZ/PT and the
integer and logic instructions below) are evaluated for every thread of the CTA, walking the blocks in
address order; a register defined in a loop, under a predicate, or in a block that does not dominate the
reader is unknown, as is anything computed from another source. At a conditional branch or EXIT whose
predicate is known, the side reached only through it runs in the warps that have a lane taking it.
Where nothing is known, every warp runs the block (as before). The evaluation is exact where it applies,
so it lowers the floor only to what runs.

Predicates are three-valued per lane (held as "must be true" and "may be true"): a compare of a value
not evaluated here (a scalar argument in a uniform register, `ISETP.LT.AND P0, PT, R5, UR10, !P0`) is
unknown, and ANDed with a known false it is false. A side of a branch runs in the warps that have a
lane that may take it, so an unknown lane never removes a warp (FlagGems' row scans guard their
store with `tid < 32 && lane < N`: one warp of 8 may store, 7 cannot).
"""

from __future__ import annotations

import re

import numpy as np

from ceilings.sass import CFG, Function, Instruction, dominators

_MASK = 0xFFFFFFFF
_REG = re.compile(r"^(?P<neg>[!\-~]?)(?P<name>U?R\d+|U?RZ|U?P\d+|U?PT)(?:\.reuse)?$")
_IMM = re.compile(r"^-?(0x[0-9a-fA-F]+|\d+)$")
_WIDE_LOADS = ("LDSM", "HMMA", "IMMA", "LDS", "LDG")
_CMP = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
        "GE": np.greater_equal}


def warp_shares(fn: Function, cfg: CFG, warps: int | None) -> np.ndarray:
    """Per block, the share of a CTA's `warps` that execute it (1 where not determined)."""
    shares = np.ones(len(cfg.blocks))
    if not warps:
        return shares
    lanes = warps * 32
    dom = dominators(cfg)
    in_loop = set().union(*(lp.blocks for lp in cfg.loops)) if cfg.loops else set()
    preds: dict[int, set[int]] = {b: set() for b in range(len(cfg.blocks))}
    for a, succ in cfg.succ.items():
        for b in succ:
            preds[b].add(a)
    values: dict[str, tuple[np.ndarray, int]] = {}  # register -> (per-thread value, defining block)
    active = [np.ones(warps, dtype=bool) for _ in cfg.blocks]
    for b, (s, e) in enumerate(cfg.blocks):
        if b not in cfg.reachable:
            continue
        for ins in fn.instructions[s:e]:
            operands = _operands(ins)
            if ins.opcode in ("BRA", "EXIT") and ins.predicated and ins is fn.instructions[e - 1]:
                taken = _guard(ins, values, dom[b], lanes)
                if taken is None:
                    continue
                must, may = (side.reshape(warps, 32) for side in taken)
                sides = [(b + 1, ~must)]  # lanes that may fall through
                if ins.opcode == "BRA" and ins.target in fn.labels:
                    target = next(j for j, (s2, _) in enumerate(cfg.blocks) if s2 == fn.labels[ins.target])
                    sides.append((target, may))
                for head, lane_mask in sides:
                    if head >= len(cfg.blocks) or preds[head] != {b}:
                        continue  # reached another way too
                    runs = lane_mask.any(axis=1)
                    for x in range(len(cfg.blocks)):
                        if head in dom[x]:
                            active[x] = active[x] & runs
                continue
            if ins.opcode.endswith("GMMA"):
                values = {k: v for k, v in values.items() if not k.startswith("R")}  # writes a register range
            dests = _destinations(ins, operands)
            known = b not in in_loop and not ins.predicated
            result = _evaluate(ins, operands, values, dom[b], lanes) if known else None
            for d, v in zip(dests, result if result is not None else [None] * len(dests), strict=False):
                if v is None:
                    values.pop(d, None)
                else:
                    values[d] = (v, b)
    for b in range(len(cfg.blocks)):
        shares[b] = active[b].mean()
    return shares


def _operands(ins: Instruction) -> list[str]:
    body = ins.text.split(ins.opcode + ins.mods, 1)[-1].rstrip(" ;")
    return [o.strip() for o in body.split(",") if o.strip()]


def _destinations(ins: Instruction, operands: list[str]) -> list[str]:
    """Registers an instruction may write: its first operand, and the second where the first is a
    predicate (ISETP's second predicate, LOP3's register beside its predicate, SHFL's value) or the second
    is a predicate (a carry out); a wide result also its next registers: 2 for `.64` and `.WIDE`, 4 for
    `.128` and for matrix and memory loads without a width (taking more than are written only loses
    knowledge; fewer would keep a stale value: `LDC.64 R4` once cleared R6 and R7 as well)."""
    regs = [_REG.match(o) for o in operands[:2]]
    if not regs or regs[0] is None:
        return []
    names = [regs[0].group("name")]
    second = regs[1].group("name") if len(regs) > 1 and regs[1] is not None else None
    if second is not None and (_is_predicate(names[0]) or _is_predicate(second)):
        names.append(second)
    mods = set(ins.mods.split("."))
    width = 4 if "128" in mods else 2 if mods & {"64", "WIDE"} else 4 if ins.opcode in _WIDE_LOADS else 1
    if width > 1 and re.fullmatch(r"R\d+", names[0]):
        first = int(names[0][1:])
        names += [f"R{first + k}" for k in range(1, width)]
    return names


def _is_predicate(name: str) -> bool:
    return name.lstrip("U").startswith("P")


def _read(token: str, values: dict, dominating: set[int], lanes: int):
    """A source operand's per-thread value (int64 for registers and immediates, bool for predicates)."""
    if _IMM.match(token):
        return np.full(lanes, int(token, 0) & _MASK, dtype=np.int64)
    m = _REG.match(token)
    if not m:
        return None
    name, neg = m.group("name"), m.group("neg")
    if name in ("RZ", "URZ"):
        return np.zeros(lanes, dtype=np.int64)
    if name in ("PT", "UPT"):
        value = np.ones((2, lanes), dtype=bool)
    else:
        held = values.get(name)
        if held is None or held[1] not in dominating:
            return _UNKNOWN_PREDICATE(lanes) if _is_predicate(name) else None
        value = held[0]
    if neg == "!":
        return _not(value) if value.dtype == bool else None
    return value


def _UNKNOWN_PREDICATE(lanes: int) -> np.ndarray:
    """A predicate nothing is known of: must be true nowhere, may be true everywhere."""
    return np.stack([np.zeros(lanes, dtype=bool), np.ones(lanes, dtype=bool)])


def _known(value: np.ndarray) -> np.ndarray:
    """A predicate known per lane, as (must, may)."""
    return np.stack([value, value])


def _not(p: np.ndarray) -> np.ndarray:
    return np.stack([~p[1], ~p[0]])


def _combine(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """Three-valued AND/OR/XOR of two predicates held as (must, may)."""
    if op == "AND":
        return np.stack([a[0] & b[0], a[1] & b[1]])
    if op == "OR":
        return np.stack([a[0] | b[0], a[1] | b[1]])
    if op == "XOR":
        known = (a[0] == a[1]) & (b[0] == b[1])
        value = a[0] ^ b[0]
        return np.stack([known & value, ~known | value])
    return None


def _guard(ins: Instruction, values: dict, dominating: set[int], lanes: int) -> np.ndarray | None:
    """Per thread, whether the guarded branch or EXIT must be taken and whether it may be (2 x lanes),
    or None where nothing is known of the predicate."""
    m = re.search(r"@(?P<neg>!?)(?P<p>U?P\d+)\s", ins.text)
    if not m:
        return None
    held = values.get(m.group("p"))
    if held is None or held[1] not in dominating:
        return None
    return _not(held[0]) if m.group("neg") else held[0]


def _lut(lut: int, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    out = np.zeros_like(a)
    for i in range(8):
        if lut >> i & 1:
            out |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
    return out & _MASK


def _evaluate(ins: Instruction, operands: list[str], values: dict, dominating: set[int], lanes: int):
    """The values an instruction writes (per its destinations), or None where not evaluated."""
    op, mods = ins.opcode, ins.mods.split(".")[1:]

    def src(i: int):
        return _read(operands[i], values, dominating, lanes) if i < len(operands) else None

    if op == "S2R":
        if operands[1:] == ["SR_TID.X"]:
            return [np.arange(lanes, dtype=np.int64)]
        return None
    if op == "MOV" and len(operands) == 2:
        v = src(1)
        return None if v is None or v.dtype == bool else [v]
    if op == "LOP3" and "LUT" in mods:
        pred_out = operands[0].lstrip("!").lstrip("U").startswith("P")
        first = 2 if pred_out else 1
        a, b, c = (src(first + k) for k in range(3))
        lut = int(operands[first + 3], 0) if first + 3 < len(operands) else None
        if any(v is None or v.dtype == bool for v in (a, b, c)) or lut is None:
            return None
        r = _lut(lut, a, b, c)
        return [_known(r != 0), r] if pred_out else [r]
    if op == "ISETP" and len(operands) >= 5 and not {"EX", "X"} & set(mods):
        cmp = next((m for m in mods if m in _CMP), None)
        a, b, p = src(2), src(3), src(4)
        if cmp is None or p is None or p.dtype != bool or any(v is not None and v.dtype == bool for v in (a, b)):
            return None
        if a is None or b is None:  # a value not evaluated here: the compare is unknown in every lane
            r = _UNKNOWN_PREDICATE(lanes)
        else:
            if "U32" not in mods:
                a, b = _signed(a), _signed(b)
            r = _known(_CMP[cmp](a, b))
        combined = _combine(next((m for m in mods if m in ("AND", "OR", "XOR")), ""), r, p)
        return None if combined is None else [combined, None]
    numbers = None
    if op in ("IADD3", "IMAD", "VIADD", "LEA", "SHF"):
        numbers = [src(i) for i in range(1, len(operands))]
        if any(v is not None and v.dtype == bool for v in numbers):
            return None
    if op == "IADD3" and len(operands) == 4 and all(v is not None for v in numbers):
        return [(numbers[0] + numbers[1] + numbers[2]) & _MASK]
    if op == "VIADD" and len(operands) == 3 and all(v is not None for v in numbers):
        return [(numbers[0] + numbers[1]) & _MASK]
    if op == "IMAD" and len(operands) == 4 and all(v is not None for v in numbers) and "WIDE" not in mods \
            and "HI" not in mods and "X" not in mods:
        if "SHL" in mods:
            return [(numbers[0] << (numbers[1] & 31)) & _MASK]
        return [(numbers[0] * numbers[1] + numbers[2]) & _MASK]
    if op == "LEA" and len(operands) == 4 and all(v is not None for v in numbers) and "HI" not in mods:
        return [((numbers[0] << numbers[2]) + numbers[1]) & _MASK]
    if op == "SHF" and len(operands) == 4 and all(v is not None for v in numbers) and "U32" in mods:
        low, shift, high = numbers
        if "R" in mods and "HI" in mods and not low.any():
            return [(high >> (shift & 31)) & _MASK]
        if "L" in mods and not high.any() and "HI" not in mods:
            return [(low << (shift & 31)) & _MASK]
    return None


def _signed(v: np.ndarray) -> np.ndarray:
    return np.where(v >= 1 << 31, v - (1 << 32), v)
