"""A kernel's Triton IR as a tree of control regions, evaluated per CTA on a launch's arguments.

The final TTGIR of the public kernel function is read as a tree of regions: the function, the
bodies of `scf.for` / `scf.while` loops, the two sides of an `scf.if`, and the blocks that follow
an early `return` (`cf.cond_br`). Each region keeps the source lines of its operations (the
outermost frame of each location, so an inlined `tl.sum` counts at the kernel line that called it):
that is how `ceilings.sass` maps SASS blocks, which carry the same lines, onto regions.

Scalar integer arithmetic is evaluated for all CTAs of the grid at once, as numpy vectors indexed
by CTA (`tt.get_program_id` and `tt.get_num_programs` come from the grid): `arith` constants,
+ - * / %, min/max, bit operations, casts, compares, selects, and a scalar `tt.load` from a tensor
whose contents the launch carries (`TensorArg.values`, e.g. a routing table); 1-D integer tensors and
their reductions to a scalar go through `ceilings.ttir_lanes` (a count of a tile's routing ids). So
every `if` side and early-exit block gets, per CTA, whether it runs, and every loop its trip count per
entry. A value is unknown (None) when it depends on memory the launch does not carry, on a
loop-carried value or an induction variable, or on anything else not evaluated here (floats, 2-D
tensors).

Every global memory access (loads, stores, atomics, async and descriptor copies) is recorded with
the pointer argument its address derives from and its elements per execution, for the DRAM bytes
of `ceilings.demand`; where the launch determines it, the share of those elements that move: a scalar
predicate (a software-pipelined loop predicates off its copies for the iterations past the end, and
its prologue's when the loop is shorter than the pipeline) and the part of a TMA box inside the tensor
(outside parts are zero-filled, not read). Masks of tensor values are not evaluated.

The body of a loop with known bounds and at most MAX_ITERATIONS trips (not nested in another such
loop) is evaluated for every iteration at once (iterations x CTAs), so a condition on the induction
variable (`if pid * ROWS + r < rows`) becomes the share of iterations it holds in, per CTA, and the
bound of an inner loop its mean trip count: exact for the total work of each region, though nested
conditions are combined as if independent.

Grids of more than MAX_CTAS CTAs are evaluated on an evenly spaced sample, each sampled CTA
standing for an equal share of the grid.

The module is longer than most (about 670 lines) because reading the regions, resolving locations
and evaluating values are one walk over the IR; split them and each would re-parse the text.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ceilings import ttir_lanes
from ceilings.ttir_ops import BINARY, CASTS, CMP, DIVIDING, LOGICAL, Pointer, parse_op
from ceilings.ttir_ops import ITER_ARGS as _ITER_ARGS
from ceilings.ttir_ops import VALUE as _VALUE

MAX_CTAS = 1 << 17
MAX_ITERATIONS = 256        # loops up to this many trips are evaluated once per iteration...
MAX_ITERATION_CELLS = 1 << 22  # ... while iterations x CTAs stays below this

_ARG = re.compile(r"%(?P<name>[\w$.-]+)\s*:\s*(?P<type>[^,()]+?)(?:\s+loc\(|,|$)")
_FOR = re.compile(r"scf\.for\s+%(?P<iv>[\w$.-]+)\s*=\s*(?P<lb>%[\w$.#-]+)\s+to\s+(?P<ub>%[\w$.#-]+)\s+step\s+"
                  r"(?P<step>%[\w$.#-]+)")
_LOC_ALIAS = re.compile(r"^#(?P<name>loc\d*)\s*=\s*loc\((?P<body>.*)\)\s*$")
_LOC_TAIL = re.compile(r"loc\((?P<body>#loc\d*|\".*)\)\s*$")
_BLOCK_LABEL = re.compile(r"^\s*\^(?P<label>bb\d+)")
_BRANCH_TARGET = re.compile(r"\^(bb\d+)")
_ELEMENT_BYTES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8}
_MEMORY_OPS = {"tt.load": "load", "tt.store": "store", "tt.atomic_rmw": "atomic", "tt.atomic_cas": "atomic",
               "ttg.async_copy_global_to_local": "load", "tt.descriptor_load": "load",
               "tt.descriptor_store": "store", "ttng.async_tma_copy_global_to_local": "load",
               "ttng.async_tma_copy_local_to_global": "store", "tt.descriptor_gather": "load"}




@dataclass
class Region:
    index: int
    kind: str                       # "function", "for", "while", "then", "else", "block"
    parent: int | None
    line: int | None = None         # source line of the statement that opens it (the loop, the if)
    lines: Counter = field(default_factory=Counter)  # source line -> ops directly in this region
    # ops inlined from a called function: the callee's own line (innermost frame) -> ops, for a SASS
    # listing whose line table names only the callee's lines (Triton 3.6 emits no "inlined at")
    inlined: Counter = field(default_factory=Counter)
    condition: np.ndarray | None = None  # then/else/block: share of its parent's runs it runs in, per CTA
    trips: np.ndarray | None = None      # for: iterations per entry, per CTA (None: unknown)
    step: int | None = None         # for: the induction variable's step, when one constant for every CTA
    if_op: int | None = None        # then/else: the scf.if both sides belong to


@dataclass
class Access:
    """One global memory access of the IR: executed once per run of its region."""

    region: int
    kind: str                 # "load", "store", "atomic"
    argument: str | None      # the pointer argument its address derives from (None: not traced)
    elements: int             # elements per execution (masked lanes included)
    element_bytes: int
    # Per CTA, the mean share of its elements an execution moves, where the launch determines it: a scalar
    # predicate (a software-pipelined loop's loads for the iterations past the end are predicated off)
    # times, for a TMA copy, the share of its box inside the tensor (out-of-bounds parts are filled with
    # zeros, not read). None: every element (a mask of tensor values is not evaluated).
    share: np.ndarray | None = None
    # Per evaluated CTA, which data its executions address: CTAs with equal ids address the same elements
    # (their pointers differ by nothing that varies between CTAs). Ids come from the per-CTA scalars the
    # pointer derives from (program ids and what is computed from them); None where the address depends
    # on memory (a gathered index) or on a scalar not evaluated. For `ceilings.dram`'s L2 reuse.
    stream: np.ndarray | None = None
    at: int = -1              # the index of its line in the IR text (`ceilings.tile_lines` keys accesses by it)
    # Its mask derives from values loaded from memory (a padding mask, a token's validity) and `share` is not
    # known: how many of its elements move depends on data the launch does not carry, possibly none.
    mask_from_memory: bool = False


@dataclass
class KernelIR:
    arguments: list[str]
    regions: list[Region]
    accesses: list[Access]
    ctas: int                 # CTAs of the grid (0 when evaluated without a grid)
    evaluated: int            # CTAs evaluated: the length of per-CTA vectors
    share: float              # CTAs of the grid each evaluated CTA stands for

    def ancestors(self, index: int) -> list[Region]:
        """The region and its enclosing regions, innermost first."""
        out = []
        current: int | None = index
        while current is not None:
            out.append(self.regions[current])
            current = self.regions[current].parent
        return out

    def loops(self) -> list[Region]:
        return [r for r in self.regions if r.kind in ("for", "while")]


def function_arguments(ir: str) -> list[str]:
    """Names of the kernel function's arguments, in order (constexpr-folded ones are absent)."""
    for line in ir.splitlines():
        if "tt.func" in line and "public" in line:
            inside = line[line.index("(") + 1: line.rindex(")")]
            return [m.group("name") for m in _ARG.finditer(inside)]
    return []


def loop_trip_counts(ir: str, scalars: Mapping[str, object]) -> list[int | None]:
    """Trip count of every loop of the public kernel function, in textual order (the pre-order of the
    loop nest), evaluated on the scalars alone (None: unknown, e.g. a bound from a program id)."""
    kernel = read_kernel_ir(ir, scalars)
    return [None if r.trips is None else int(r.trips) for r in kernel.loops()]


# ----------------------------------------------------------------------------------------------
# Locations.
# ----------------------------------------------------------------------------------------------
def _location_aliases(ir: str) -> dict[str, str]:
    aliases = {}
    for line in ir.splitlines():
        m = _LOC_ALIAS.match(line.strip())
        if m:
            aliases["#" + m.group("name")] = m.group("body")
    return aliases


def _outer_line(body: str, aliases: Mapping[str, str], depth: int = 0) -> int | None:
    """The source line of a location's outermost frame (the caller of inlined code)."""
    body = body.strip()
    if depth > 64 or not body or body == "unknown":
        return None
    if body.startswith("#loc"):
        return _outer_line(aliases.get(body, ""), aliases, depth + 1)
    if body.startswith("callsite("):
        inner = body[len("callsite("):-1]
        at = _split_top(inner, " at ")
        return _outer_line(at[-1], aliases, depth + 1)
    if body.startswith("fused"):
        inside = body[body.index("[") + 1: body.rindex("]")]
        return _outer_line(_split_top(inside, ",")[0], aliases, depth + 1)
    if body.startswith('"'):
        end = body.index('"', 1)
        rest = body[end + 1:]
        if rest.startswith("("):  # a named location: "name"(#loc3)
            return _outer_line(rest[1:-1], aliases, depth + 1)
        m = re.match(r":(\d+)", rest)
        return int(m.group(1)) if m else None
    return None


def _inner_line(body: str, aliases: Mapping[str, str], depth: int = 0) -> int | None:
    """The source line of an inlined location's innermost frame (the callee's own line); None for a
    location that is not inlined."""
    body = body.strip()
    if depth > 64 or not body:
        return None
    if body.startswith("#loc"):
        return _inner_line(aliases.get(body, ""), aliases, depth + 1)
    if body.startswith("callsite("):
        callee = _split_top(body[len("callsite("):-1], " at ")[0]
        nested = _inner_line(callee, aliases, depth + 1)
        return nested if nested is not None else _outer_line(callee, aliases, depth + 1)
    return None


def _split_top(text: str, sep: str) -> list[str]:
    """Split at `sep` outside parentheses, brackets and quotes."""
    parts, level, start, i, quoted = [], 0, 0, 0, False
    while i < len(text):
        ch = text[i]
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in "([":
            level += 1
        elif not quoted and ch in ")]":
            level -= 1
        elif not quoted and level == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i = i + len(sep)
            continue
        i += 1
    parts.append(text[start:])
    return parts


# ----------------------------------------------------------------------------------------------
# Reading and evaluating the IR.
# ----------------------------------------------------------------------------------------------
def _program_ids(grid: Sequence[int]) -> tuple[dict[str, np.ndarray], int, int, float]:
    grid = tuple(grid) + (1,) * (3 - len(grid))
    total = math.prod(grid)
    if total <= MAX_CTAS:
        index = np.arange(total, dtype=np.int64)
    else:
        index = np.unique(np.linspace(0, total - 1, MAX_CTAS).round().astype(np.int64))
    gx, gy = grid[0], grid[1]
    pids = {"x": index % gx, "y": (index // gx) % gy, "z": index // (gx * gy)}
    return pids, total, len(index), total / max(len(index), 1)


def read_kernel_ir(ir: str, scalars: Mapping[str, object], grid: Sequence[int] | None = None,
                   values: Mapping[str, Sequence[int]] | None = None,
                   shapes: Mapping[str, Sequence[int]] | None = None) -> KernelIR:
    """The public kernel function's regions and memory accesses, evaluated per CTA of `grid` (program
    ids unknown without one) on the launch's integer `scalars`, the `values` of small tensors and the
    `shapes` of tensor descriptors (for the part of a TMA box inside the tensor)."""
    aliases = _location_aliases(ir)
    values = values or {}
    shapes = shapes or {}
    predicate_of: dict[str, str] = {}  # i1 tensor -> the scalar predicate it is a splat of (or ands in)
    if grid is not None:
        pids, total, evaluated, share = _program_ids(grid)
        num_programs = dict(zip("xyz", (tuple(grid) + (1, 1))[:3], strict=True))
    else:
        pids, total, evaluated, share, num_programs = {}, 0, 1, 1.0, {}
    env: dict[str, object] = {}
    arguments: list[str] = []
    regions: list[Region] = []
    accesses: list[Access] = []
    base_of: dict[str, str] = {}  # SSA value -> the pointer argument it derives from
    feeds: dict[str, frozenset[str]] = {}  # SSA value -> per-CTA scalars it derives from ("?": memory)
    # SSA values not evaluated that derive from a load not evaluated either: data the launch does not carry (a
    # load of a small integer tensor whose contents it carries is evaluated, and what follows from it known).
    from_unknown_data: set[str] = set()
    scopes: list[tuple[str, int]] = []  # (kind, region) per open brace
    blocks: dict[str, int] = {}          # cf block label -> region
    edges: list[tuple[int, str, object]] = []  # (from region, to label, condition or True)
    current_block = 0
    if_ops = 0
    expanded: np.ndarray | None = None  # iterations x CTAs that run, of the loop whose iterations are evaluated
    expanded_at = 0
    reducing: list[ttir_lanes.PendingReduce] = []  # reduces whose combine region is being read

    def region_of_scope() -> int:
        return scopes[-1][1] if scopes else 0

    def new_region(kind: str, parent: int, line: int | None) -> int:
        regions.append(Region(len(regions), kind, parent, line))
        return len(regions) - 1

    in_kernel = False
    for at, text in enumerate(ir.splitlines()):
        stripped = text.strip()
        if not in_kernel:
            if "tt.func" in stripped and "public" in stripped:
                in_kernel = True
                inside = stripped[stripped.index("(") + 1: stripped.rindex(")")]
                for m in _ARG.finditer(inside):
                    name, kind = m.group("name"), m.group("type")
                    arguments.append(name)
                    if "!tt.ptr" in kind or "tensordesc" in kind:
                        env[name] = Pointer(name, np.asarray(0, dtype=np.int64))
                        base_of[name] = name
                    else:
                        value = scalars.get(name)
                        ok = isinstance(value, int | bool) and value is not None
                        env[name] = np.asarray(value, dtype=np.int64) if ok else None
                new_region("function", None, None)
                scopes.append(("function", 0))
            continue
        if not scopes:
            break
        loc = _LOC_TAIL.search(stripped)
        line = _outer_line(loc.group("body"), aliases) if loc else None
        if stripped.startswith("}"):
            kind, closed = scopes.pop()
            if not scopes:
                break
            if expanded is not None and len(scopes) < expanded_at:
                expanded = None
            if line is not None and kind in ("for", "while", "then", "else"):
                _close_statement(regions, closed, line, _inner_line(loc.group("body"), aliases))
            if stripped.startswith("} else {") and kind == "then":
                then = regions[closed]
                other = new_region("else", then.parent, then.line)
                regions[other].if_op = then.if_op
                cond = then.condition
                regions[other].condition = None if cond is None else 1.0 - cond
                scopes.append(("else", other))
            elif stripped.startswith("} do {"):
                scopes.append((kind, closed))
            elif stripped.rstrip().endswith("{"):
                scopes.append(("inline", region_of_scope()))
            continue
        label = _BLOCK_LABEL.match(stripped)
        if label and scopes[-1][0] == "function":
            current_block = new_region("block", 0, line)
            blocks[label.group("label")] = current_block
            scopes[-1] = ("function", current_block)
            continue
        here = region_of_scope()
        if line is not None:
            regions[here].lines[line] += 1
            inner = _inner_line(loc.group("body"), aliases)
            if inner is not None:
                regions[here].inlined[inner] += 1
        op, rest, result = parse_op(text)
        if op is None:
            continue
        opens = stripped.endswith("{")
        if op == "scf.for":
            loop = _FOR.search(text)
            body = new_region("for", here, line)
            if loop:
                lb, ub, step = (_get(env, loop.group(k)) for k in ("lb", "ub", "step"))
                # A grid-stride loop's induction variable differs between CTAs through its bounds.
                feeds[loop.group("iv")] = _fed([loop.group(k)[1:] for k in ("lb", "ub", "step")], feeds, env,
                                               evaluated)
                if isinstance(step, np.ndarray) and step.size and np.all(step == np.ravel(step)[0]):
                    regions[body].step = int(np.ravel(step)[0])  # SASS unrolling shows as a multiple of it
                if all(isinstance(v, np.ndarray) for v in (lb, ub, step)) and np.all(step > 0):
                    trips = np.maximum(0, -((lb - ub) // step))
                    regions[body].trips = _per_cta(trips, expanded, evaluated)
                    iterations = _iterations(lb, step, trips, evaluated) if expanded is None else None
                    if iterations is not None:
                        env[loop.group("iv")], expanded = iterations
                        expanded_at = len(scopes) + 1
                iters = text[text.find("iter_args(") + len("iter_args("):] if "iter_args(" in text else ""
                for a in _ITER_ARGS.finditer(iters.split(")")[0]):
                    if a.group("init")[1:] in base_of:
                        base_of[a.group("arg")] = base_of[a.group("init")[1:]]
                    feeds[a.group("arg")] = _fed([a.group("init")[1:]], feeds, env, evaluated)
            scopes.append(("for", body))
            continue
        if op == "scf.while":
            scopes.append(("while", new_region("while", here, line)))
            continue
        if op == "scf.if":
            cond = _get(env, _VALUE.search(rest).group(0)) if _VALUE.search(rest) else None
            then = new_region("then", here, line)
            regions[then].if_op = if_ops
            if_ops += 1
            known = isinstance(cond, np.ndarray)
            regions[then].condition = _per_cta(cond.astype(float), expanded, evaluated) if known else None
            scopes.append(("then", then))
            continue
        if op in ("cf.cond_br", "cf.br"):
            targets = _BRANCH_TARGET.findall(rest)
            if op == "cf.br" and targets:
                edges.append((current_block, targets[0], True))
            elif len(targets) == 2:
                cond = _get(env, _VALUE.search(rest).group(0))
                cond = cond.astype(bool) if isinstance(cond, np.ndarray) else None
                edges.append((current_block, targets[0], cond))
                edges.append((current_block, targets[1], None if cond is None else ~cond))
            continue
        if reducing and op == "tt.reduce.return" and len(scopes) == reducing[-1].depth + 1:
            done = reducing.pop()
            env[done.result] = done.value()
        elif reducing and len(scopes) == reducing[-1].depth + 1:
            reducing[-1].combine.append(op)
        if op == "tt.reduce":
            pending = ttir_lanes.pending_reduce(result, rest, env, len(scopes))
            if pending is not None:
                reducing.append(pending)
        if opens:
            scopes.append(("inline", here))
        if op in _MEMORY_OPS:
            access = _access(op, rest, here, base_of)
            access.at = at
            access.share = _access_share(op, rest, env, predicate_of, shapes, access.argument, expanded, evaluated)
            access.mask_from_memory = access.share is None and _mask_operand(op, rest) in from_unknown_data
            # The data it addresses: the pointer operand's scalars, and a descriptor copy's coordinates.
            addressed = [v[1:] for v in _VALUE.findall(rest.split(" : ")[0])]
            pointer = next((o for o in addressed if o in base_of), None)
            address = _fed([pointer], feeds, env, evaluated) if pointer is not None else frozenset({"?"})
            if "descriptor" in op or "tma" in op:
                address = address | _fed([o for o in addressed if o != pointer and not _is_mask(o, env)],
                                          feeds, env, evaluated)
            access.stream = _stream_ids(address, env, evaluated)
            accesses.append(access)
        if result is None:
            continue
        operands = [v[1:] for v in _VALUE.findall(rest.split(" : ")[0])]
        fed = _fed(operands, feeds, env, evaluated) | ({"?"} if op in _MEMORY_OPS else set())  # loads return data
        if fed:
            feeds[result] = fed
        if op in ("tt.splat", "tt.broadcast", "tt.expand_dims", "ttg.convert_layout", "arith.andi") and "i1" in rest:
            scalar = operands[0] if op == "tt.splat" else next((predicate_of[o] for o in operands
                                                                if o in predicate_of), None)
            if scalar is not None:
                predicate_of[result] = scalar
        traced = next((base_of[o] for o in operands if o in base_of), None)
        if traced is not None and ("!tt.ptr" in rest or "tensordesc" in rest):
            base_of[result] = traced
        value = _evaluate(op, rest, env, pids, num_programs, values)
        env[result] = np.asarray(value) if isinstance(value, np.generic) else value
        if value is None and (op in _MEMORY_OPS or any(o in from_unknown_data for o in operands)):
            from_unknown_data.add(result)
    _block_conditions(regions, blocks, edges)
    return KernelIR(arguments, regions, accesses, total, evaluated, share)


def _fed(operands: Sequence[str], feeds: Mapping[str, frozenset[str]], env: Mapping[str, object],
         evaluated: int) -> frozenset[str]:
    """The per-CTA scalars a value computed from `operands` derives from: an operand evaluated per CTA
    stands for itself (its value says all), another brings what it derives from."""
    out: set[str] = set()
    for o in operands:
        value = env.get(o)
        if isinstance(value, Pointer):
            value = value.offset
        if isinstance(value, np.ndarray) and value.ndim in (1, 2) and value.shape[-1] == evaluated > 1:
            out.add(o)  # per CTA (or per iteration and CTA, in a loop whose iterations are evaluated)
        elif isinstance(value, np.ndarray) and value.ndim == 0:
            continue
        else:
            out |= feeds.get(o, frozenset())
    return frozenset(out)


def _is_mask(name: str, env: Mapping[str, object]) -> bool:
    value = env.get(name)
    return isinstance(value, np.ndarray) and value.dtype == bool


def _stream_ids(address: frozenset[str], env: Mapping[str, object], evaluated: int) -> np.ndarray | None:
    """Per CTA, an id of the data an access addresses (module docstring of `Access.stream`)."""
    if "?" in address:
        return None
    columns = []
    for name in sorted(address):
        value = env.get(name)
        value = value.offset if isinstance(value, Pointer) else value
        if not isinstance(value, np.ndarray) or value.ndim not in (1, 2) or value.shape[-1] != evaluated:
            return None
        columns += list(np.atleast_2d(value).astype(np.int64))
    if not columns:
        return np.zeros(evaluated, dtype=np.int64)
    return np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)[1].ravel()


def _close_statement(regions: list[Region], closed: int, line: int, inner: int | None = None) -> None:
    """MLIR prints a structured op's location after its closing brace: the loop or `if` statement's
    line belongs to the enclosing region (bound computation, guard) and, for a loop, to its body too
    (the increment and the test run every iteration)."""
    region = regions[closed]
    sides = [r for r in regions if r.if_op is not None and r.if_op == region.if_op] if region.if_op is not None \
        else [region]
    for side in sides:
        side.line = line
    regions[region.parent].lines[line] += 1
    if region.kind in ("for", "while"):
        region.lines[line] += 1
    if inner is not None:
        regions[region.parent].inlined[inner] += 1
        if region.kind in ("for", "while"):
            region.inlined[inner] += 1


def _iterations(lb: np.ndarray, step: np.ndarray, trips: np.ndarray, evaluated: int):
    """The induction variable of a loop over all its iterations (iterations x CTAs) and which of them
    run, when the loop is short enough to evaluate its body once per iteration."""
    most = int(trips.max()) if trips.size else 0
    if lb.ndim > 1 or trips.ndim > 1 or not 0 < most <= MAX_ITERATIONS or most * evaluated > MAX_ITERATION_CELLS:
        return None
    j = np.arange(most, dtype=np.int64)[:, None]
    return lb + step * j, j < trips


def _per_cta(value: np.ndarray, expanded: np.ndarray | None, evaluated: int) -> np.ndarray:
    """A value inside a loop whose iterations are evaluated, as its mean per CTA over the iterations
    that run (the share of iterations a branch is taken in, the mean trip count of an inner loop)."""
    if expanded is None or value.ndim < 2:
        return value
    v, runs = np.broadcast_arrays(value.astype(float), expanded)
    count = runs.sum(axis=0)
    mean = np.where(count > 0, (v * runs).sum(axis=0) / np.maximum(count, 1), 0.0)
    return np.asarray(mean[0]) if mean.shape == (1,) and evaluated != 1 else mean


def _get(env: Mapping[str, object], token: str):
    return env.get(token[1:]) if token.startswith("%") else None


def _block_conditions(regions: list[Region], blocks: Mapping[str, int], edges) -> None:
    """A block after an early exit runs when some edge into it is taken from a block that runs."""
    runs: dict[int, object] = {0: True}
    for r in regions:
        if r.kind == "block":
            runs[r.index] = False
    for source, label, cond in edges:  # blocks are listed in dominance order in Triton's IR
        target = blocks.get(label)
        if target is None:
            continue
        src = runs.get(source, True)
        taken = None if src is None or cond is None else (src if cond is True else (cond & src))
        before = runs.get(target, False)
        runs[target] = None if taken is None or before is None else (taken if before is False else before | taken)
    for r in regions:
        if r.kind == "block":
            value = runs.get(r.index)
            r.condition = None if value is None else np.asarray(value, dtype=float)


def _tensor_type(text: str) -> tuple[int, int]:
    """(elements, bytes per element) of the first tensor, tensor descriptor or pointer type of an op."""
    types = text.split(" : ", 1)[-1]
    m = re.search(r"(?:tensor|tensordesc)<(?P<dims>(?:\d+x)*)(?:!tt\.ptr<)?(?P<elem>[a-zA-Z0-9]+)", types)
    if m:
        dims = [int(d) for d in m.group("dims").split("x") if d]
        return math.prod(dims) if dims else 1, _element_bytes(m.group("elem"))
    m = re.search(r"!tt\.ptr<(?P<elem>[a-zA-Z0-9]+)", types)
    return 1, _element_bytes(m.group("elem") if m else "")


def _element_bytes(name: str) -> int:
    if name.startswith("f8") or name.startswith("F8"):
        return 1
    return _ELEMENT_BYTES.get(name, 4)


_TMA_COORDINATES = re.compile(r"%[\w$.#]+\[(?P<coords>[^\]]*)\]")
_DESCRIPTOR_BLOCK = re.compile(r"tensordesc<(?P<dims>(?:\d+x)+)")


def _access_share(op: str, rest: str, env: Mapping[str, object], predicate_of: Mapping[str, str],
                  shapes: Mapping[str, Sequence[int]], argument: str | None, expanded: np.ndarray | None,
                  evaluated: int) -> np.ndarray | None:
    """The share of an access's elements that move, per CTA (None where the launch does not say)."""
    body = rest.split(" : ")[0]
    operands = [v[1:] for v in _VALUE.findall(body)]
    predicate = None
    if op == "ttng.async_tma_copy_global_to_local" and operands:
        predicate = operands[-1]  # copy %desc[coords] %buffer, %barrier, %predicate
    elif " mask " in body or op == "tt.load":  # a store's or an atomic's mask is not evaluated here
        mask = _mask_operand(op, rest)
        predicate = predicate_of.get(mask) if mask is not None else None
    share = env.get(predicate) if predicate is not None else None
    share = share.astype(float) if isinstance(share, np.ndarray) and share.dtype == bool else None
    if op in ("ttng.async_tma_copy_global_to_local", "tt.descriptor_load") and argument in shapes:
        inside = _inside_box(body, rest, env, shapes[argument])
        if inside is not None:
            share = inside if share is None else share * inside
    if share is None:
        return None
    return np.asarray(_per_cta(share, expanded, evaluated), dtype=float)


def _mask_operand(op: str, rest: str) -> str | None:
    """The name of a memory op's element mask, None where it has none: `... mask %m` (an asynchronous copy),
    `tt.load %ptr, %mask[, %other]`, `tt.store %ptr, %value, %mask`, `tt.atomic_rmw kind, sem, scope, %ptr, %value,
    %mask`."""
    body = rest.split(" : ")[0]
    if " mask " in body:
        found = _VALUE.search(body.split(" mask ", 1)[1])
        return found.group(0)[1:] if found else None
    operands = [v[1:] for v in _VALUE.findall(body)]
    position = {"tt.load": 1, "tt.store": 2, "tt.atomic_rmw": 2}.get(op)
    return operands[position] if position is not None and len(operands) > position else None


def _inside_box(body: str, rest: str, env: Mapping[str, object], shape: Sequence[int]) -> np.ndarray | None:
    """The share of a TMA box at evaluated coordinates that lies inside a tensor of `shape`."""
    coords, block = _TMA_COORDINATES.search(body), _DESCRIPTOR_BLOCK.search(rest)
    if coords is None or block is None:
        return None
    dims = [int(d) for d in block.group("dims").split("x") if d]
    starts = [env.get(v.strip()[1:]) for v in coords.group("coords").split(",")]
    if len(starts) != len(dims) or len(shape) != len(dims) or not all(isinstance(v, np.ndarray) for v in starts):
        return None
    share = np.asarray(1.0)
    for start, size, extent in zip(starts, dims, shape, strict=True):
        inside = np.clip(np.minimum(extent, start + size) - np.maximum(0, start), 0, size)
        share = share * inside / size
    return share


def _access(op: str, rest: str, region: int, base_of: Mapping[str, str]) -> Access:
    operands = [v[1:] for v in _VALUE.findall(rest.split(" : ")[0])]
    argument = next((base_of[o] for o in operands if o in base_of), None)
    elements, width = _tensor_type(rest)
    return Access(region, _MEMORY_OPS[op], argument, elements, width)


def _evaluate(op: str, rest: str, env: Mapping[str, object], pids, num_programs, values):
    body = rest.split(" loc(")[0]
    if "tensor<" in body.split(" : ", 1)[-1] and op != "tt.reduce":
        # a 1-D integer tensor of a CTA (a block of a routing table, its mask): ceilings.ttir_lanes
        return ttir_lanes.evaluate(op, body, env, values)
    if op == "arith.constant":
        if "dense<" in body or "tensor<" in body:
            return None
        token = body.split(":")[0].strip()
        if token in ("true", "false"):
            return np.asarray(token == "true")
        try:
            return np.asarray(int(token), dtype=np.int64)
        except ValueError:
            return None
    if op == "tt.get_program_id":
        return pids.get(body.split(":")[0].strip())
    if op == "tt.get_num_programs":
        axis = num_programs.get(body.split(":")[0].strip())
        return None if axis is None else np.asarray(axis, dtype=np.int64)
    if op == "tt.addptr":
        operands = [env.get(v[1:]) for v in _VALUE.findall(body.split(" : ")[0])]
        if len(operands) == 2 and isinstance(operands[0], Pointer):
            base, offset = operands
            total = None if base.offset is None or not isinstance(offset, np.ndarray) else base.offset + offset
            return Pointer(base.argument, total)
        return None
    if ":" in body and "tensor<" in body.split(":", 1)[1]:
        return None
    if op == "tt.load":
        return _load_scalar(body, env, values)
    operands = [env.get(v[1:]) for v in _VALUE.findall(body.split(" : ")[0])]
    if any(not isinstance(o, np.ndarray) for o in operands):
        return None
    if op in BINARY and len(operands) == 2:
        a, b = operands
        if a.dtype == bool and b.dtype == bool and op in LOGICAL:
            return LOGICAL[op](a, b)
        a, b = a.astype(np.int64), b.astype(np.int64)
        if op in DIVIDING and np.any(b == 0):
            return None
        with np.errstate(all="ignore"):
            return BINARY[op](a, b)
    if op in CASTS and len(operands) == 1:
        return operands[0].astype(np.int64) if operands[0].dtype == bool else operands[0]
    if op == "arith.cmpi" and len(operands) == 2:
        predicate = body.split(",")[0].strip()
        return CMP[predicate](operands[0], operands[1]) if predicate in CMP else None
    if op == "arith.select" and len(operands) == 3:
        return np.where(operands[0], operands[1], operands[2])
    return None


def _load_scalar(body: str, env: Mapping[str, object], values: Mapping[str, Sequence[int]]):
    """A scalar load from a tensor whose contents the launch carries, at offsets known per CTA; a masked one
    (`tl.load(offsets + pid - 1, mask=pid > 0, other=0)`: a group's start, read from its predecessor's end)
    takes `other` where its known mask is off, and reads only where it is on."""
    operands = _VALUE.findall(body.split(" : ")[0])
    pointer = env.get(operands[0][1:]) if operands else None
    if not isinstance(pointer, Pointer) or pointer.offset is None or pointer.argument not in values:
        return None
    mask = env.get(operands[1][1:]) if len(operands) >= 2 else np.asarray(True)
    other = env.get(operands[2][1:]) if len(operands) == 3 else None
    if len(operands) > 3 or not isinstance(mask, np.ndarray):
        return None
    contents = np.asarray(values[pointer.argument], dtype=np.int64)
    offset, on = np.broadcast_arrays(pointer.offset, mask.astype(bool))
    if offset.size == 0 or (not np.all(on) and not isinstance(other, np.ndarray)):
        return None  # a masked load without `other` leaves the lanes it skips undefined
    read = offset[on]
    if np.any(read < 0) or np.any(read >= len(contents)):
        return None
    out = np.where(on, contents[np.clip(offset, 0, len(contents) - 1)], 0 if other is None else other)
    return out.astype(np.int64)
