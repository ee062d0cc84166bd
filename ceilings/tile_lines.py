"""The L1 data-pipe wavefronts of a kernel's tile loads and stores: per warp request, the 128-byte lines its lanes
touch, from each lane's address under the compiled layout.

The L1's data stage passes one wavefront a cycle per SM, and a global load or store request costs one wavefront
per distinct 128-byte line its 32 lanes touch (measured on an H200 with Nsight Compute and timed, RESULTS 62: lanes
4 B apart cost 1 a request, 8 B apart 2, 32 B 8, 128 B or more 32; the same for stores and for vector loads up to
16 B a lane). Shared-memory wavefronts pass through the same stage. A kernel whose tile spreads a warp over many
lines (a pixel shuffle reading channels-last input with lanes along pixels: 16 lines for 64 bytes) binds there, far
from DRAM's pace (RESULTS 61), and the ceiling that counted a load as one LSU instruction and its bytes said
nothing of it.

What is evaluated: the TTGIR of the public function, per sampled CTA, for pointer tensors built from the pointer
arguments by `tt.splat`, `tt.make_range`, `tt.expand_dims`, `tt.broadcast`, layout conversions and integer
arithmetic on program ids, known scalar arguments and constants; masks from the same. A value the launch does not
determine but that is one number for every lane (a loop's induction variable, a scalar loaded from memory, a
loop-carried scalar) only moves every address of a request by the same amount; each access is counted at the
alignment that touches the fewest lines (a base pointer lies at a multiple of 16 bytes where Triton specialised it
as divisible by 16 and nothing unknown moves the addresses, else at a multiple of its element). What else is not
known (a gathered index, a mask from data, a tensor carried around a loop other than advanced by one amount for all
lanes, a layout other than `#ttg.blocked`) makes the access count nothing.

Every choice errs to fewer wavefronts: each element counted once per CTA (lanes holding copies of it do not load
it again), each thread's contiguous elements taken as one vector of up to 16 bytes (the compiler may split it,
which costs more: a 16-byte vector split into four 4-byte loads took four times the cycles, RESULTS 62), masked-off
lanes touching nothing. Async copies, TMA and atomics are left out (their path through the L1 is not this one).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ceilings.ttir_ops import BINARY, CASTS, CMP, DIVIDING, ITER_ARGS, LOGICAL, VALUE, parse_op

LINE_BYTES = 128
MAX_VECTOR_BYTES = 16
MAX_ELEMENTS = 1 << 16   # tiles past this many elements are not evaluated (time), the access counts nothing
SAMPLE_CTAS = 8          # CTAs evaluated, evenly spaced over the grid (first and last included)

_BLOCKED = re.compile(r"^#(?P<name>[\w.]+)\s*=\s*#ttg\.blocked<\{sizePerThread\s*=\s*\[(?P<spt>[\d,\s]+)\],\s*"
                      r"threadsPerWarp\s*=\s*\[(?P<tpw>[\d,\s]+)\],\s*warpsPerCTA\s*=\s*\[(?P<wpc>[\d,\s]+)\],\s*"
                      r"order\s*=\s*\[(?P<order>[\d,\s]+)\]")
_ARG = re.compile(r"%(?P<name>[\w$.-]+)\s*:\s*(?P<type>[^,()]+?)(?:\s+loc\(|,|\s*\{|$)")
_TENSOR = re.compile(r"tensor<(?P<dims>(?:\d+x)+)(?P<elem>!tt\.ptr<\w+>|\w+)(?:,\s*#(?P<layout>[\w.]+))?")
_PTR_ELEM = re.compile(r"!tt\.ptr<(?P<elem>\w+)>")
_ALIGNED = re.compile(r"%(?P<name>[\w$.-]+)\s*:\s*!tt\.ptr<\w+>\s*\{[^}]*tt\.divisibility\s*=\s*16\b")
ALIGNED_BYTES = 16  # a pointer argument with `tt.divisibility = 16`: its address is a multiple of 16 bytes
_FOR = re.compile(r"scf\.for\s+%(?P<iv>[\w$.-]+)\s*=")
_BYTES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8,
          "f8E4M3FN": 1, "f8E5M2": 1, "f8E4M3FNUZ": 1, "f8E5M2FNUZ": 1}
UNIFORM = "uniform"  # a scalar the launch does not determine: one value for every lane


@dataclass(frozen=True)
class Blocked:
    spt: tuple[int, ...]
    tpw: tuple[int, ...]
    wpc: tuple[int, ...]
    order: tuple[int, ...]


@dataclass(frozen=True)
class Tile:
    data: np.ndarray                 # the tensor's values (int64 or bool), full shape
    shifted: bool = False            # plus one unknown amount, the same for every element
    loops: frozenset = frozenset()   # loop-carried tensors it derives from (checked at the loop's yield)


@dataclass(frozen=True)
class Ptr:
    argument: str
    element_bytes: int
    offset: Tile | int | None        # elements from the argument: a tile, a scalar, or None (unknown, uniform)


def access_lines(ttgir: str, scalars: Mapping[str, object], grid: Sequence[int]) -> dict[int, float]:
    """Per global load or store of the TTGIR (keyed by its line's index in the text), the least L1 data-pipe
    wavefronts one execution costs a CTA: the mean over up to SAMPLE_CTAS evenly spaced CTAs. Accesses the launch
    does not determine are absent."""
    layouts = {m.group("name"): Blocked(*(tuple(int(x) for x in m.group(k).split(",")) for k in
                                          ("spt", "tpw", "wpc", "order")))
               for m in map(_BLOCKED.match, ttgir.splitlines()) if m}
    grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
    total = math.prod(grid)
    program = _read(ttgir)
    if total <= 0 or not layouts or program is None:
        return {}
    flat = np.unique(np.linspace(0, total - 1, min(SAMPLE_CTAS, total)).round().astype(np.int64))
    sums: dict[int, float] = {}
    for index in flat:
        pid = (int(index % grid[0]), int(index // grid[0] % grid[1]), int(index // (grid[0] * grid[1])))
        lines = _walk(program, scalars, pid, grid, layouts)
        for at, n in lines.items():
            if n is None or (at in sums and sums[at] is None):
                sums[at] = None
            else:
                sums[at] = sums.get(at, 0.0) + n
    return {at: n / len(flat) for at, n in sums.items() if n is not None}


@dataclass(frozen=True)
class _Line:
    """One line of the public function's body, parsed once for every sampled CTA's walk."""

    at: int                     # its index in the IR text
    text: str
    closes: bool                # starts with "}" (a region ends; "} else {" also opens one)
    opens: bool                 # ends with "{"
    op: str | None
    body: str                   # what follows the op, without its location
    operands: list[str]         # SSA names before the type
    result: str | None


@dataclass(frozen=True)
class _Program:
    arguments: list[tuple[str, str]]  # (name, type) of the public function's arguments
    aligned: frozenset[str]           # pointer arguments Triton specialised as 16-byte aligned
    lines: list[_Line]


def _read(ir: str) -> _Program | None:
    """The public function's arguments and body lines, parsed (None: no public function)."""
    texts = ir.splitlines()
    for i, text in enumerate(texts):
        stripped = text.strip()
        if "tt.func" in stripped and "public" in stripped:
            head = stripped[stripped.index("(") + 1:]
            lines = []
            for at, line in enumerate(texts[i + 1:], i + 1):
                stripped = line.strip()
                op, rest, result = (None, "", None) if stripped.startswith("}") else parse_op(line)
                body = rest.split(" loc(")[0]
                lines.append(_Line(at, line, stripped.startswith("}"), stripped.endswith("{"), op, body,
                                   [v[1:] for v in VALUE.findall(body.split(" : ")[0])], result))
            return _Program([(m.group("name"), m.group("type")) for m in _ARG.finditer(head)],
                            frozenset(a.group("name") for a in _ALIGNED.finditer(head)), lines)
    return None


def _walk(program: _Program, scalars: Mapping[str, object], pid: tuple[int, int, int], grid: tuple[int, int, int],
          layouts: Mapping[str, Blocked]) -> dict[int, float | None]:
    """One CTA's walk: per access, the wavefronts of one execution (None: not determined)."""
    env: dict[str, object] = {}
    defs: dict[str, tuple[str, list[str]]] = {}
    found: dict[int, tuple[float | None, frozenset]] = {}
    loops: list[dict[str, str]] = []   # per open scf.for: iter_arg -> its init
    broken: set[str] = set()           # loop-carried tensors not advanced by one amount for all lanes
    opened: list[str] = ["function"]
    for name, kind in program.arguments:
        ptr = _PTR_ELEM.search(kind)
        if ptr and "tensor" not in kind:
            env[name] = Ptr(name, _BYTES.get(ptr.group("elem"), 0), 0)
        elif isinstance(scalars.get(name), int | bool):
            env[name] = int(scalars[name])
        else:
            env[name] = UNIFORM
    for line in program.lines:
        if line.closes:
            if opened and opened.pop() == "for" and loops:
                loops.pop()
            if line.opens:
                opened.append("inline")
            elif not opened:
                break
            continue
        op, body, operands, result = line.op, line.body, line.operands, line.result
        if op is None:
            continue
        if op == "scf.for":
            carried = {}
            iters = body[body.find("iter_args(") + len("iter_args("):] if "iter_args(" in body else ""
            for a in ITER_ARGS.finditer(iters.split(")")[0]):
                init = env.get(a.group("init")[1:])
                carried[a.group("arg")] = a.group("init")[1:]
                env[a.group("arg")] = _carried(init, a.group("arg"))
            f = _FOR.search(body)
            if f:
                env[f.group("iv")] = UNIFORM
            loops.append(carried)
            opened.append("for")
            _results_unknown(result, line.text, env)
            continue
        if op == "scf.yield" and opened and opened[-1] == "for" and loops:
            for (arg, _), value in zip(loops[-1].items(), operands, strict=False):
                if not _advanced_uniformly(value, arg, defs, env):
                    broken.add(arg)
            continue
        if line.opens:
            opened.append("inline")
            if op.startswith("scf.") or op == "tt.reduce":
                _results_unknown(result, line.text, env)
                continue
        if op in ("tt.load", "tt.store"):
            found[line.at] = _access(op, body, operands, env, layouts, program.aligned)
        if result is None:
            continue
        defs[result] = (op, operands)
        env[result] = _evaluate(op, body, operands, env, pid, grid)
    return {at: (None if loops_of & broken else n) for at, (n, loops_of) in found.items()}


def _results_unknown(result: str | None, text: str, env: dict) -> None:
    """Results of a region op (a loop, an if): scalars one unknown value for all lanes, tensors unknown."""
    if result is None:
        return
    scalar = "tensor<" not in text.split("->")[-1] if "->" in text else False
    env[result] = UNIFORM if scalar else None


def _carried(init, arg: str):
    """A loop-carried value inside the body: a scalar is one value for every lane; a tensor is taken as its
    initial value moved by one amount, which the loop's yield must then show."""
    if isinstance(init, Tile):
        return Tile(init.data, True, init.loops | {arg})
    if isinstance(init, Ptr):
        if isinstance(init.offset, Tile):
            return Ptr(init.argument, init.element_bytes, Tile(init.offset.data, True, init.offset.loops | {arg}))
        return Ptr(init.argument, init.element_bytes, None)
    return None if init is None else UNIFORM


def _advanced_uniformly(value: str, arg: str, defs: Mapping, env: Mapping) -> bool:
    """Whether a yielded value is the loop-carried `arg` itself or it plus a scalar or splat amount."""
    carried = env.get(arg)
    tile = carried.offset if isinstance(carried, Ptr) else carried
    if value == arg or not isinstance(tile, Tile):  # a scalar is one value for every lane whatever the loop does
        return True
    op, operands = defs.get(value, (None, []))
    if op in ("tt.addptr", "arith.addi", "arith.subi") and len(operands) == 2 and operands[0] == arg:
        step = env.get(operands[1])
        return _is_uniform(step)
    return False


def _is_uniform(v) -> bool:
    if v is UNIFORM or isinstance(v, int | np.integer):
        return True
    return isinstance(v, Tile) and v.data.size > 0 and bool(np.all(v.data == v.data.flat[0]))


def _shape(body: str) -> tuple[int, ...] | None:
    types = body.split(" : ", 1)[-1]
    found = _TENSOR.findall(types.split("->")[-1])
    return tuple(int(d) for d in found[-1][0].rstrip("x").split("x")) if found else None


def _evaluate(op: str, body: str, operands: list[str], env: Mapping[str, object], pid, grid):
    args = [env.get(o) for o in operands]
    if op == "arith.constant":
        return _constant(body)
    if op == "tt.get_program_id":
        return pid["xyz".index(body.split(":")[0].strip())]
    if op == "tt.get_num_programs":
        return grid["xyz".index(body.split(":")[0].strip())]
    if op == "tt.make_range":
        start = re.search(r"start\s*=\s*(-?\d+)", body)
        end = re.search(r"end\s*=\s*(-?\d+)", body)
        return Tile(np.arange(int(start.group(1)), int(end.group(1)), dtype=np.int64)) if start and end else None
    if not args or any(a is None for a in args):
        return None
    if op == "tt.splat":
        shape = _shape(body)
        a = args[0]
        if shape is None:
            return None
        if isinstance(a, Ptr):
            off = a.offset
            if off is None or off is UNIFORM:
                return Ptr(a.argument, a.element_bytes, Tile(np.zeros(shape, dtype=np.int64), True))
            return Ptr(a.argument, a.element_bytes, Tile(np.full(shape, int(off), dtype=np.int64)))
        if a is UNIFORM:
            return Tile(np.zeros(shape, dtype=np.int64), True)
        return Tile(np.full(shape, a, dtype=bool if isinstance(a, bool | np.bool_) else np.int64))
    if op in ("tt.expand_dims", "tt.broadcast", "ttg.convert_layout", "tt.reshape"):
        shape = _shape(body)
        a = args[0]
        tile = a.offset if isinstance(a, Ptr) else a
        if not isinstance(tile, Tile) or shape is None:
            return None
        if op == "tt.expand_dims":
            axis = re.search(r"axis\s*=\s*(\d+)", body)
            data = np.expand_dims(tile.data, int(axis.group(1))) if axis else None
        elif op == "tt.broadcast":
            data = np.broadcast_to(tile.data, shape)
        elif op == "tt.reshape":
            data = tile.data.reshape(shape) if tile.data.size == math.prod(shape) else None
        else:
            data = tile.data
        if data is None or data.shape != shape:
            return None
        out = Tile(np.ascontiguousarray(data), tile.shifted, tile.loops)
        return Ptr(a.argument, a.element_bytes, out) if isinstance(a, Ptr) else out
    if op == "tt.addptr" and len(args) == 2 and isinstance(args[0], Ptr):
        p, off = args
        return Ptr(p.argument, p.element_bytes, _add(p.offset, off))
    if op in CASTS and len(args) == 1:
        a = args[0]
        if isinstance(a, Tile) and a.data.dtype == bool:
            return Tile(a.data.astype(np.int64), a.shifted, a.loops)
        return int(a) if isinstance(a, bool | np.bool_) else a
    if op == "arith.cmpi" and len(args) == 2:
        predicate = body.split(",")[0].strip()
        return _lanewise(CMP.get(predicate), args)
    if op == "arith.select" and len(args) == 3:
        c, a, b = args
        if isinstance(c, Tile | bool | np.bool_) and not _shifted(c):
            data = [x.data if isinstance(x, Tile) else x for x in (c, a, b)]
            if any(x is UNIFORM or isinstance(x, Ptr) or _shifted(x) for x in (a, b)):
                return None
            return _tile_or_scalar(np.where(*data), a, b)
        return None
    if op in BINARY and len(args) == 2:
        a, b = args
        if _is_bool(a) and _is_bool(b) and op in LOGICAL:
            return _lanewise(LOGICAL[op], args)
        if op in ("arith.addi", "arith.subi"):
            return _add(a, b, subtract=op == "arith.subi")
        if op == "arith.muli" and (_shifted(a) or _shifted(b) or UNIFORM in (a, b)):
            # (x + u) * c = x * c + u * c: a uniform shift times one value for all lanes stays uniform
            x, c = (a, b) if (_shifted(a) or a is UNIFORM) else (b, a)
            if x is UNIFORM and _is_uniform(c):
                return UNIFORM if not isinstance(c, Tile) else Tile(np.zeros_like(c.data), True, c.loops)
            if isinstance(x, Tile) and _is_uniform(c) and not _shifted(c) and c is not UNIFORM:
                k = c.data.flat[0] if isinstance(c, Tile) else c
                return Tile(x.data * int(k), True, x.loops | getattr(c, "loops", frozenset()))
            return None
        if op in DIVIDING and _any_zero(b):
            return None
        return _lanewise(BINARY[op], args)
    return None


def _constant(body: str):
    head = body.split(" : ")[0].strip()
    m = re.match(r"dense<(?P<v>[^>]*)>", head)
    if m:
        shape = _shape(body)
        v = m.group("v").strip()
        if shape is None or v.startswith("["):
            return None
        if v in ("true", "false"):
            return Tile(np.full(shape, v == "true"))
        try:
            return Tile(np.full(shape, int(v), dtype=np.int64))
        except ValueError:
            return None
    if head in ("true", "false"):
        return head == "true"
    try:
        return int(head)
    except ValueError:
        return None


def _shifted(v) -> bool:
    return isinstance(v, Tile) and v.shifted


def _is_bool(v) -> bool:
    return isinstance(v, bool | np.bool_) or (isinstance(v, Tile) and v.data.dtype == bool)


def _any_zero(v) -> bool:
    if v is UNIFORM:
        return True
    data = v.data if isinstance(v, Tile) else np.asarray(v)
    return bool(np.any(data == 0))


def _tile_or_scalar(data: np.ndarray, *like):
    loops = frozenset().union(*(x.loops for x in like if isinstance(x, Tile)))
    if any(isinstance(x, Tile) for x in like) or data.ndim:
        return Tile(np.asarray(data), False, loops)
    return data.item()


def _lanewise(fn, args):
    """fn over known values (a scalar, or a tile where any is one); where a value is unknown, UNIFORM for scalars
    (one value for every lane), None for tiles."""
    if fn is None or any(a is UNIFORM or isinstance(a, Ptr) or _shifted(a) for a in args):
        return None if any(isinstance(a, Tile) for a in args) or fn is None else UNIFORM
    data = [a.data if isinstance(a, Tile) else np.asarray(a) for a in args]
    with np.errstate(all="ignore"):
        out = fn(*data)
    return _tile_or_scalar(np.asarray(out), *args)


def _add(a, b, subtract: bool = False):
    """a + b (or a - b) where either may carry a uniform unknown part (a - (x + u) = (a - x) - u: still one unknown
    amount for every lane)."""
    if a is None or b is None or isinstance(b, Ptr):
        return None
    if a is UNIFORM and b is UNIFORM:
        return UNIFORM
    if a is UNIFORM or b is UNIFORM:
        other = b if a is UNIFORM else a
        if isinstance(other, Tile):
            return Tile(-other.data if a is UNIFORM and subtract else other.data, True, other.loops)
        return UNIFORM
    if isinstance(a, Tile) or isinstance(b, Tile):
        ad = a.data if isinstance(a, Tile) else a
        bd = b.data if isinstance(b, Tile) else b
        data = np.subtract(ad, bd) if subtract else np.add(ad, bd)
        loops = frozenset().union(*(x.loops for x in (a, b) if isinstance(x, Tile)))
        return Tile(np.asarray(data, dtype=np.int64), _shifted(a) or _shifted(b), loops)
    return int(a) - int(b) if subtract else int(a) + int(b)


def _access(op: str, body: str, operands: list[str], env: Mapping, layouts: Mapping[str, Blocked],
            aligned: set[str] = frozenset()):
    """(wavefronts of one execution or None, loop-carried tensors it depends on)."""
    types = body.split(" : ", 1)[-1]
    t = _TENSOR.search(types)
    pointer = env.get(operands[0]) if operands else None
    if t is None or not isinstance(pointer, Ptr) or not isinstance(pointer.offset, Tile):
        return None, frozenset()
    layout = layouts.get(t.group("layout") or "")
    mask_at = 1 if op == "tt.load" else 2
    mask = env.get(operands[mask_at]) if len(operands) > mask_at else True
    if layout is None or pointer.element_bytes == 0 or mask is None or mask is UNIFORM or _shifted(mask):
        return None, frozenset()
    offsets = pointer.offset
    on = mask.data if isinstance(mask, Tile) else np.full(offsets.data.shape, bool(mask))
    if on.shape != offsets.data.shape or offsets.data.size > MAX_ELEMENTS:
        return None, frozenset()
    loops = offsets.loops | (mask.loops if isinstance(mask, Tile) else frozenset())
    # the base's alignment: 16 bytes where Triton specialised the argument so and nothing unknown moves the addresses
    known = pointer.argument in aligned and not offsets.shifted
    alignment = max(pointer.element_bytes, ALIGNED_BYTES) if known else pointer.element_bytes
    return request_lines(offsets.data, on, pointer.element_bytes, layout, alignment), loops


def request_lines(offsets: np.ndarray, on: np.ndarray, element_bytes: int, layout: Blocked,
                  alignment: int | None = None) -> float | None:
    """The least 128-byte-line wavefronts a CTA's warps spend on one tile access: elements at `offsets` (from
    the base pointer, whose address is a multiple of `alignment` bytes: by default one element), lanes where `on`
    is false masked off, under the blocked `layout`; counted at the base's position in a line that touches fewest."""
    shape = offsets.shape
    rank = len(shape)
    if rank != len(layout.spt) or not rank:
        return None
    o0 = layout.order[0]
    warps, lanes = math.prod(layout.wpc), math.prod(layout.tpw)
    lane_c = _split(np.arange(lanes), layout.tpw, layout.order)
    warp_c = _split(np.arange(warps), layout.wpc, layout.order)
    # registers of one thread along each dimension: spt contiguous, repeated every layout tile
    regs = []
    for d in range(rank):
        tile = layout.spt[d] * layout.tpw[d] * layout.wpc[d]
        reps = max(1, -(-shape[d] // tile))
        regs.append((np.arange(reps)[:, None] * tile + np.arange(layout.spt[d])[None, :]).ravel())
    grids = np.meshgrid(*regs, indexing="ij")  # register multi-index per dimension
    coords = []
    for d in range(rank):
        c = (grids[d][None, None] + layout.spt[d] * (lane_c[d][None, :] + layout.tpw[d] * warp_c[d][:, None])
             .reshape(warps, lanes, *([1] * rank)))
        coords.append(c % shape[d])
    flat = np.ravel_multi_index(coords, shape)          # (warps, lanes, *registers)
    first = np.zeros(flat.size, dtype=bool)
    first[np.unique(flat.ravel(), return_index=True)[1]] = True
    live = first.reshape(flat.shape) & on.ravel()[flat]  # each element once, masked-off lanes touch nothing
    addr = offsets.ravel()[flat] * element_bytes
    # one vector: a thread's run of contiguous elements along the fastest dimension, up to 16 bytes
    run = layout.spt[o0]
    vec = max(1, min(run, MAX_VECTOR_BYTES // element_bytes))
    reg_axis = 2 + o0
    a = np.moveaxis(addr, reg_axis, -1)
    lv = np.moveaxis(live, reg_axis, -1)
    n = a.shape[-1]
    while vec > 1 and not (n % vec == 0 and np.all(np.diff(a.reshape(*a.shape[:-1], n // vec, vec), axis=-1)
                                                   == element_bytes)):
        vec //= 2
    # requests: (warp, other registers, chunk) -> lanes x vec addresses
    a = a.reshape(*a.shape[:-1], n // vec, vec)
    lv = lv.reshape(*lv.shape[:-1], n // vec, vec)
    a = np.moveaxis(a, 1, -2).reshape(-1, lanes * vec)
    lv = np.moveaxis(lv, 1, -2).reshape(-1, lanes * vec)
    keep = lv.any(axis=1)
    a, lv = a[keep], lv[keep]
    if not len(a):
        return 0.0
    best = None
    for shift in range(0, LINE_BYTES, alignment or element_bytes):
        line = np.where(lv, (a + shift) // LINE_BYTES, np.iinfo(np.int64).min)
        line.sort(axis=1)
        distinct = (np.diff(line, axis=1) != 0).sum(axis=1) + 1 - (~lv).any(axis=1)
        total = float(distinct.sum())
        best = total if best is None else min(best, total)
    return best


def _split(index: np.ndarray, sizes: Sequence[int], order: Sequence[int]) -> list[np.ndarray]:
    """Coordinates per dimension of a linear thread index, `order[0]` fastest."""
    out = [None] * len(sizes)
    rest = index
    for d in order:
        out[d] = rest % sizes[d]
        rest = rest // sizes[d]
    return out
