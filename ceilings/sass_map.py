"""SASS blocks placed on the IR's control regions, and how often each runs in each class of CTAs.

`nvdisasm -gi` gives every SASS instruction the kernel source line it came from, and the TTGIR
gives every op its line (`ceilings.ttir_eval`), so:

1. Each SASS loop (a natural loop of the CFG, spin-waits left out), parents first, is matched to the
   IR loop that most of its own instructions' lines belong to, among the loops nested in its SASS
   parent's IR loop. A SASS loop with no such IR loop (a compiler-made loop) runs once per entry.
2. Loops ptxas unrolled (`ceilings.unroll`): a main loop and its remainder loop run T // u and T % u
   times; a single loop whose induction variable steps u times the IR's step runs T // u times.
   Weighting them by T counted the work of the loop u (or u+1) times.
3. Each block is placed on the region most of its instructions' lines belong to (the common enclosing
   region when several hold a quarter of its votes: a block with unconditional instructions runs
   unconditionally), among the regions its loops allow; a block without line information inherits
   its immediate dominator's region.
4. Blocks that call a ptxas slow-path subroutine (`__cuda_sm20_rem_s64`: a 64-bit remainder whose
   operands exceed 32 bits; the special-input paths of division and square root) are cold: counted
   in neither the floor nor the expected work.

A block's count per CTA class is the product of its SASS loops' trips and of the conditions of the
`if` sides and early-exit blocks around its region. Where the launch does not determine a value the
floor takes the least work (an unknown trip count 0, an unknown condition false) and the expected
work an estimate (a loop runs once, each side of an unknown `if` half the time, the code after an
unknown early exit runs). Without line information (a listing from an older cache), SASS loops are
matched to IR loops in pre-order and every block counts as unconditional, as before.

The u - 1 copies of a single unrolled loop's body that ptxas peeled out after it (straight-line
remainder code) count (T % u) / (u - 1) times each (the floor: not at all when T is unknown). Copies
peeled out around a main loop and its remainder loop (Liger's sparsemax backward with 8 warps: one
copy before, 4 a pass, 2 after, then 1 a pass) count nothing: the pair's T // u passes of u copies and
T % u of one already make T.

SASS loops no kernel line matches (a listing without "inlined at" frames, as Triton 3.6 prints a helper
inlined at several call sites) are matched by the callee's lines and the call sites' program order
(`_match_inlined`).

The module runs past 400 lines (about 460) because placing blocks, matching loops and weighting them per
CTA class share the line-to-region maps and the loop nest; the unroll and lane-guard readers are apart.

Known limits: an unrolled loop whose counter is neither the IR's induction variable nor counted to a
constant is still weighted by the IR's trip count; copies peeled before a loop unrolled without a
remainder loop, and copies peeled out of a loop nested in another SASS loop, count once per entry on
top of the trip count; a copy whose instructions ptxas gave other source lines is not recognised.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ceilings.lane_guard import warp_shares
from ceilings.sass import (
    CFG,
    COLD_CALLEE,
    MMA_OPCODES,
    Function,
    Instruction,
    Loop,
    build_cfg,
    dominators,
    is_spin_wait,
    parse_sass,
)
from ceilings.ttir_eval import KernelIR
from ceilings.unroll import BODY_WORK, unroll_shares

PIPES = ("tensor", "fma", "alu", "xu", "lsu", "uniform", "cbu", "adu", "tma", "fp64", "other")
# "local": warp instructions that access local memory (LDL/STL: register spills), also counted in "lsu".
# "issued": every warp instruction the kernel function issues (BRA, NOP and DEPBAR too, which count in no
# pipeline); "issue_cycles": the least cycles between each and the warp's next (`Instruction.issue_cycles`);
# "local_cycles": those of the spill code. A subroutine's body is in none of the three (a floor: which of
# its instructions run is not known), only the CALL.
QUANTITIES = PIPES + ("tensor_flops", "global_bytes", "shared_bytes", "tma_loads", "local", "issued",
                      "issue_cycles", "local_cycles")
_GLOBAL = ("LDG", "STG", "REDG", "ATOMG", "RED", "ATOM")
_LOCAL = ("LDL", "STL")
_VOTE_SHARE = 0.25


@dataclass
class Placement:
    fn: Function
    cfg: CFG
    block_region: list[int]
    loops: list[Loop]                       # SASS loops that iterate (spin-waits left out)
    loop_region: list[int | None]           # the IR loop each SASS loop runs (None: none)
    loop_share: list[tuple[str, int]]       # ("all", 1), ("main", u), ("rest", u), ("none", u), ("unrolled", u)
    cold: set[int]
    table: np.ndarray                       # blocks x QUANTITIES, one execution by one warp
    line_info: bool
    notes: list[str] = field(default_factory=list)
    peeled: dict[int, int] = field(default_factory=dict)  # block -> the unrolled loop whose copies it holds
    warp_share: np.ndarray | None = None  # per block, the share of a CTA's warps that run it (None: all)


@dataclass
class CTAClasses:
    """CTAs grouped by the values that decide their work: per class, how many CTAs, and per region its
    condition and trip count (float vectors over classes, NaN where unknown)."""

    counts: np.ndarray
    condition: dict[int, np.ndarray]
    trips: dict[int, np.ndarray]
    access_share: dict[int, np.ndarray] = field(default_factory=dict)  # per IR access (index), NaN: all moves
    member: np.ndarray | None = None  # per evaluated CTA (ttir_eval's order): the index of its class


_WIDTH = re.compile(r"(?:BF|F|U|S)?(8|16|32|64|128)(?:x(\d+))?")


def lane_bytes(mods: str) -> int:
    """Bytes one lane moves, from an instruction's modifiers: its width (`.128`, `.U8`, `.64`), a vector
    operand counted whole (`REDG.E.ADD.F32x4`, `ATOMG.E.ADD.F16x8`: 16 bytes), 4 where none is written."""
    widths = [w for w in (_WIDTH.fullmatch(m) for m in mods.split(".")) if w]
    if not widths:
        return 4
    return int(widths[-1].group(1)) * int(widths[-1].group(2) or 1) // 8


def access_bytes(ins: Instruction) -> int:
    """Bytes one warp moves with a load, store or global reduction: 32 lanes x the lane's width."""
    return 32 * lane_bytes(ins.mods)


def _quantities(ins: Instruction) -> dict[str, float]:
    out: Counter = Counter()
    if ins.pipe != "none":
        out[ins.pipe if ins.pipe in PIPES else "other"] += 1
    if ins.opcode in MMA_OPCODES:
        out["tensor_flops"] += ins.mma_flops_per_warp()
        # A warpgroup MMA's operand tiles go from shared memory to the tensor cores, not through the
        # load/store path whose rate the smem roof is: they are not counted there (counted, they made a
        # plain fp16 matmul smem-bound, which measured Hopper GEMMs contradict).
    if ins.opcode in _GLOBAL:
        out["global_bytes"] += access_bytes(ins)
    elif ins.opcode == "LDGSTS":  # global -> shared copy: counts on both sides
        out["global_bytes"] += access_bytes(ins)
        out["shared_bytes"] += access_bytes(ins)
    elif ins.opcode in ("LDS", "STS"):
        out["shared_bytes"] += access_bytes(ins)
    elif ins.opcode in ("LDSM", "STSM"):  # 8x8 matrices of 16-bit values: 128 B each; the last of
        # `.16.M88.4` (nvdisasm) or `.x4` (PTX ldmatrix) says how many
        counts = [int(m.lstrip("X")) for m in ins.mods.upper().split(".") if m.lstrip("X") in ("1", "2", "4")]
        out["shared_bytes"] += 128 * (counts[-1] if counts else 1)
    elif ins.opcode == "UTMALDG":
        out["tma_loads"] += 1
    elif ins.opcode in _LOCAL:
        out["local"] += 1
    return out


def _table(fn: Function, cfg: CFG, functions: Mapping[str, Function], cold_callees: set[str]) -> np.ndarray:
    table = np.zeros((len(cfg.blocks), len(QUANTITIES)))
    column = {q: i for i, q in enumerate(QUANTITIES)}
    for j, (s, e) in enumerate(cfg.blocks):
        if j not in cfg.reachable:
            continue
        for ins in fn.instructions[s:e]:
            table[j, column["issued"]] += 1
            table[j, column["issue_cycles"]] += ins.issue_cycles
            if ins.opcode in _LOCAL:
                table[j, column["local_cycles"]] += ins.issue_cycles
            body = [ins]
            if ins.opcode == "CALL" and ins.target in functions and ins.target not in cold_callees:
                body += functions[ins.target].instructions  # a subroutine's body, once per call
            for one in body:
                for q, v in _quantities(one).items():
                    table[j, column[q]] += v
    return table


def place(sass: str, kernel: str, ir: KernelIR, warps: int | None = None) -> Placement:
    """SASS blocks placed on the IR's regions (module docstring); with the CTA's `warps`, blocks behind a
    guard on the thread index count in the warps that run them (`ceilings.lane_guard`)."""
    functions = parse_sass(sass)
    if kernel not in functions:
        raise ValueError(f"no function {kernel} in the SASS listing")
    fn = functions[kernel]
    cfg = build_cfg(fn)
    loops = [lp for lp in cfg.loops if not is_spin_wait(fn, cfg, lp)]
    notes = []
    if len(loops) < len(cfg.loops):
        notes.append(f"{len(cfg.loops) - len(loops)} spin-wait loop(s) counted once per entry")
    cold_callees = {name for name in functions if COLD_CALLEE.search(name)}
    cold = {j for j, (s, e) in enumerate(cfg.blocks)
            if any(i.opcode == "CALL" and i.target in cold_callees for i in fn.instructions[s:e])}
    if cold & cfg.reachable:
        names = sorted({i.target for j in cold for i in fn.instructions[slice(*cfg.blocks[j])] if i.opcode == "CALL"})
        notes.append(f"{len(cold & cfg.reachable)} block(s) calling the slow path {', '.join(names)} (taken only for "
                     "operands past 32 bits or special values) not counted")
    line_info = any(i.line is not None for i in fn.instructions)
    if line_info:
        loop_region = _match_loops(fn, cfg, loops, ir)
        block_region = _place_blocks(fn, cfg, loops, loop_region, ir)
    else:
        ir_loops = [r.index for r in ir.loops()]
        loop_region = [ir_loops[i] if i < len(ir_loops) else None for i in range(len(loops))]
        block_region = [0] * len(cfg.blocks)
        notes.append("SASS without line information: loops matched to the IR's in order, branches not evaluated")
    unmatched = sum(1 for r in loop_region if r is None)
    if unmatched:
        notes.append(f"{unmatched} SASS loop(s) match no loop of the kernel's IR: counted once per entry")
    share = unroll_shares(fn, cfg, loops, loop_region, ir, lambda loop: _parent(loop, loops), notes)
    warp_share = warp_shares(fn, cfg, warps)
    if (warp_share < 1).any():
        notes.append(f"{int((warp_share < 1).sum())} block(s) behind a guard on the thread index: counted in the "
                     "warps that run them")
    return Placement(fn, cfg, block_region, loops, loop_region, share, cold,
                     _table(fn, cfg, functions, cold_callees), line_info, notes,
                     peeled_remainders(fn, cfg, loops, loop_region, share, ir), warp_share)


def peeled_remainders(fn: Function, cfg: CFG, loops: list[Loop], loop_region: list[int | None],
                      share: list[tuple[str, int]], ir: KernelIR) -> dict[int, int]:
    """Blocks in no SASS loop whose body work comes mostly from the source lines of an IR loop that
    ptxas unrolled: after a loop unrolled without a remainder loop, the copies of the body peeled out to
    run the last trips % u iterations; around a main loop that has a remainder loop, the copies ptxas
    peeled before, between and after them (a first iteration, chunks of 2^k), whose iterations the
    pair's T // u passes of u copies and T % u of one already count. (Loop-invariant code hoisted out
    of such a loop carries its lines too and is counted out with them: a few instructions, and never
    more work than runs.)"""
    owners, chains = _owners(ir, inlined=True), _chains(ir)
    out = {}
    for i, (loop, region, (kind, _)) in enumerate(zip(loops, loop_region, share, strict=True)):
        if kind not in ("unrolled", "main"):
            continue
        end = max(cfg.blocks[b][1] for b in loop.blocks) if kind == "unrolled" else 0
        for b in cfg.reachable:
            s, e = cfg.blocks[b]
            if s < end or any(b in lp.blocks for lp in loops):
                continue
            work = [ins for ins in fn.instructions[s:e] if ins.opcode in BODY_WORK]
            inside = [ins for ins in work if any(region in chains[r] for r in owners.get(ins.line, ()))]
            if work and 2 * len(inside) > len(work):
                out[b] = i
    return out


def _owners(ir: KernelIR, inlined: bool = False) -> dict[int, list[int]]:
    """Source line -> the regions holding ops of it; with `inlined`, also a line of inlined code that is
    no kernel line (a listing without "inlined at" frames names the callee's lines) -> the regions holding
    its inlined ops (loops are matched without them first: `_match_inlined`)."""
    owners: dict[int, list[int]] = defaultdict(list)
    for r in ir.regions:
        for line in r.lines:
            owners[line].append(r.index)
    callee: dict[int, list[int]] = defaultdict(list)
    for r in ir.regions if inlined else ():
        for line in r.inlined:
            if line not in owners:
                callee[line].append(r.index)
    owners.update(callee)
    return owners


def _chains(ir: KernelIR) -> dict[int, list[int]]:
    return {r.index: [a.index for a in ir.ancestors(r.index)] for r in ir.regions}


def _own_blocks(loop: Loop, loops: list[Loop]) -> set[int]:
    inner = [c for c in loops if c is not loop and c.blocks < loop.blocks]
    return loop.blocks - set().union(*(c.blocks for c in inner)) if inner else set(loop.blocks)


def _parent(loop: Loop, loops: list[Loop]) -> Loop | None:
    p = loop.parent
    while p is not None and not any(p is lp for lp in loops):
        p = p.parent
    return p


def _match_loops(fn: Function, cfg: CFG, loops: list[Loop], ir: KernelIR) -> list[int | None]:
    owners, chains = _owners(ir), _chains(ir)
    kinds = {r.index: r.kind for r in ir.regions}

    def ir_loop(region: int) -> int | None:
        return next((a for a in chains[region] if kinds[a] in ("for", "while")), None)

    matched: list[int | None] = []
    for loop in loops:  # pre-order: a parent is matched before its children
        parent = _parent(loop, loops)
        parent_ir = matched[next(i for i, lp in enumerate(loops) if lp is parent)] if parent is not None else None
        votes: Counter = Counter()
        for b in _own_blocks(loop, loops):
            for ins in fn.instructions[slice(*cfg.blocks[b])]:
                candidates = [ir_loop(r) for r in owners.get(ins.line, ())]
                candidates = [c for c in candidates if c is not None and c != parent_ir
                              and (parent_ir is None or parent_ir in chains[c])]
                for c in candidates:
                    votes[c] += 1 / len(candidates)
        matched.append(max(votes, key=lambda c: (votes[c], len(chains[c]))) if votes else None)
    return _match_inlined(fn, cfg, loops, ir, matched)


def _match_inlined(fn: Function, cfg: CFG, loops: list[Loop], ir: KernelIR,
                   matched: list[int | None]) -> list[int | None]:
    """SASS loops no kernel line matched, matched by the lines of inlined code as the callee has them
    (`Region.inlined`): a listing without "inlined at" frames (Triton 3.6's) names only those. A function
    inlined at k call sites gives k IR loops with the same callee lines, so they are told apart by order:
    when m x k unmatched SASS loops under the same SASS parent vote for exactly those k IR loops, the
    copies lie in program order, m loops each (m = 2: a main loop and its remainder loop), so the i-th
    run of m in address order runs the i-th IR loop in the IR's (program) order. Any other count stays
    unmatched (counted once per entry)."""
    owners: dict[int, list[int]] = defaultdict(list)
    for r in ir.regions:
        for line in r.inlined:
            owners[line].append(r.index)
    if not owners:
        return matched
    chains = _chains(ir)
    kinds = {r.index: r.kind for r in ir.regions}
    matched = list(matched)
    position = {id(lp): i for i, lp in enumerate(loops)}
    changed = True
    while changed:
        changed = False
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i, loop in enumerate(loops):
            parent = _parent(loop, loops)
            if matched[i] is not None or (parent is not None and matched[position[id(parent)]] is None):
                continue
            parent_ir = matched[position[id(parent)]] if parent is not None else None
            candidates = set()
            for b in _own_blocks(loop, loops):
                for ins in fn.instructions[slice(*cfg.blocks[b])]:
                    for r in owners.get(ins.line, ()):
                        c = next((a for a in chains[r] if kinds[a] in ("for", "while")), None)
                        if c is not None and c != parent_ir and c not in matched \
                                and (parent_ir is None or parent_ir in chains[c]):
                            candidates.add(c)
            if candidates:
                groups[(parent_ir, frozenset(candidates))].append(i)
        for (_, candidates), members in groups.items():
            if len(members) % len(candidates) == 0:
                per_copy = len(members) // len(candidates)
                for k, i in enumerate(sorted(members, key=lambda i: loops[i].first_addr)):
                    matched[i] = sorted(candidates)[k // per_copy]
                changed = True
    return matched


def _place_blocks(fn: Function, cfg: CFG, loops: list[Loop], loop_region: list[int | None],
                  ir: KernelIR) -> list[int]:
    owners, chains = _owners(ir, inlined=True), _chains(ir)
    mapped = {r for r in loop_region if r is not None}
    dom = dominators(cfg)
    placed = [0] * len(cfg.blocks)
    for b in sorted(cfg.reachable, key=lambda x: len(dom[x])):  # dominators first
        around = [(len(lp.blocks), r) for lp, r in zip(loops, loop_region, strict=True) if b in lp.blocks]
        active = {r for _, r in around if r is not None}
        innermost = min((x for x in around if x[1] is not None), default=(0, None))[1]

        def allowed(region: int, active=active, innermost=innermost) -> bool:
            chain = chains[region]
            return {a for a in chain if a in mapped} <= active and (innermost is None or innermost in chain)

        votes: Counter = Counter()
        for ins in fn.instructions[slice(*cfg.blocks[b])]:
            candidates = [r for r in owners.get(ins.line, ()) if allowed(r)]
            for r in candidates:
                votes[r] += 1 / len(candidates)
        if votes:
            total = sum(votes.values())
            strong = [r for r, v in votes.items() if v >= _VOTE_SHARE * total]
            # votes spread over more than 1 / _VOTE_SHARE regions (a block of an unrolled 3 x 3 window whose
            # lines each own a few ops) leave none strong: the block lies in what all of them share
            placed[b] = _common_region(strong or list(votes), chains)
        else:
            idom = max((d for d in dom[b] if d != b), key=lambda d: len(dom[d]), default=None)
            placed[b] = placed[idom] if idom is not None and allowed(placed[idom]) else (innermost or 0)
    return placed


def _common_region(regions: list[int], chains: Mapping[int, list[int]]) -> int:
    common = chains[regions[0]]
    for r in regions[1:]:
        common = [a for a in common if a in chains[r]]
    return common[0] if common else 0


# ----------------------------------------------------------------------------------------------
# CTA classes and per-class counts.
# ----------------------------------------------------------------------------------------------
def cta_classes(ir: KernelIR) -> CTAClasses:
    columns: list[tuple[str, int, np.ndarray]] = []
    scalars: list[tuple[str, int, float]] = []
    decided = [(kind, r.index, value) for r in ir.regions for kind, value in (("condition", r.condition),
                                                                               ("trips", r.trips))]
    decided += [("access_share", i, a.share) for i, a in enumerate(ir.accesses)]
    for kind, index, value in decided:
        if value is None:
            continue
        if value.ndim == 0 or len(value) != ir.evaluated:
            scalars.append((kind, index, float(np.ravel(value)[0])))
        else:
            columns.append((kind, index, value.astype(float)))
    if columns:
        matrix = np.stack([c for _, _, c in columns], axis=1)
        rows, member, counts = np.unique(matrix, axis=0, return_inverse=True, return_counts=True)
    else:
        rows, counts = np.zeros((1, 0)), np.asarray([ir.evaluated])
        member = np.zeros(ir.evaluated, dtype=np.int64)
    out = CTAClasses(counts.astype(float) * ir.share, {}, {}, member=np.ravel(member))
    n = len(counts)
    for r in ir.regions:
        out.condition[r.index] = np.full(n, np.nan)
        out.trips[r.index] = np.full(n, np.nan)
    for i in range(len(ir.accesses)):
        out.access_share[i] = np.full(n, np.nan)
    for kind, region, value in scalars:
        getattr(out, kind)[region][:] = value
    for j, (kind, region, _) in enumerate(columns):
        getattr(out, kind)[region][:] = rows[:, j]
    return out


def condition_factor(ir: KernelIR, region: int, classes: CTAClasses, floor: bool) -> np.ndarray:
    """The product of the conditions of the `if` sides and early-exit blocks around a region, per class
    (loops left out: their trips come from the SASS loops or `region_runs`)."""
    factor = np.ones(len(classes.counts))
    for a in ir.ancestors(region):
        if a.kind not in ("then", "else", "block"):
            continue
        known = classes.condition[a.index]
        guess = 0.0 if floor else (0.5 if a.kind in ("then", "else") else 1.0)
        factor = factor * np.where(np.isnan(known), guess, known)
    return factor


def trip_factor(trips: np.ndarray, share: tuple[str, int], floor: bool) -> np.ndarray:
    kind, unroll = share
    if kind == "none":
        return np.zeros_like(trips)
    known = {"all": trips, "main": np.floor(trips / unroll), "unrolled": np.floor(trips / unroll),
             "rest": np.mod(trips, unroll)}[kind]
    guess = 0.0 if floor else (1.0 if kind in ("all", "main", "unrolled") else 0.0)
    return np.where(np.isnan(trips), guess, known)


def block_weights(p: Placement, ir: KernelIR, classes: CTAClasses, floor: bool) -> np.ndarray:
    """Executions of each block by one warp of a CTA of each class: blocks x classes."""
    n = len(classes.counts)
    weights = np.zeros((len(p.cfg.blocks), n))
    loop_factors = [np.ones(n) if region is None else trip_factor(classes.trips[region], share, floor)
                    for region, share in zip(p.loop_region, p.loop_share, strict=True)]
    region_factor = {r.index: condition_factor(ir, r.index, classes, floor) for r in ir.regions}
    for b in p.cfg.reachable:
        if b in p.cold:
            continue
        w = region_factor[p.block_region[b]].copy()
        if p.warp_share is not None:
            w = w * p.warp_share[b]
        if b in p.peeled and p.loop_share[p.peeled[b]][0] == "main":
            w = w * 0.0  # the main and remainder loops already count every iteration
        elif b in p.peeled:
            # The u - 1 peeled copies of the body together run the last trips % u iterations (as chunks
            # of 2^k copies, each behind its own guard): each copy counts (trips % u) / (u - 1) times.
            loop = p.peeled[b]
            trips, unroll = classes.trips[p.loop_region[loop]], p.loop_share[loop][1]
            w = w * np.where(np.isnan(trips), 0.0 if floor else 0.5, np.mod(trips, unroll) / (unroll - 1))
        for loop, factor in zip(p.loops, loop_factors, strict=True):
            if b in loop.blocks:
                w = w * factor
        weights[b] = w
    return weights


def class_quantities(p: Placement, ir: KernelIR, classes: CTAClasses, floor: bool) -> np.ndarray:
    """QUANTITIES of one warp of one CTA of each class: classes x QUANTITIES."""
    return block_weights(p, ir, classes, floor).T @ p.table


def region_runs(ir: KernelIR, region: int, classes: CTAClasses, floor: bool) -> np.ndarray:
    """How often a region runs in a CTA of each class, by the IR's own loop trip counts."""
    runs = condition_factor(ir, region, classes, floor)
    for a in ir.ancestors(region):
        if a.kind in ("for", "while"):
            runs = runs * trip_factor(classes.trips[a.index], ("all", 1), floor)
    return runs
