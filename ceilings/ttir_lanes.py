"""One-dimensional integer tensors of a CTA, evaluated per CTA, so a branch decided by a reduction over a
block of a carried integer tensor is known.

`ceilings.ttir_eval` evaluates scalars. Kernels also decide work from a block of a routing table:
a per-token LoRA kernel loads its tile's adapter ids, counts those equal to its own adapter
(`tl.sum(ids == pid)`) and does its loop only `if n_mine > 0`. With the ids carried by the launch
(`TensorArg.values`), that count is known per CTA; the generic path counted the loop in no CTA (the
floor) or half of them (expected), 50x under the truth on such a launch (RESULTS 55).

A `Lanes` value holds a 1-D tensor's elements after the shape of the per-CTA scalars it derives
from: (N,) when uniform, (CTAs, N) per CTA, (iterations, CTAs, N) inside a loop whose iterations are
evaluated. What is evaluated: dense integer constants, `tt.make_range`, `tt.splat` of an evaluated
scalar or pointer, pointer arithmetic, a load from a carried tensor (masked lanes take `other`),
integer arithmetic, compares, casts, selects, layout conversions, and a one-operand `tt.reduce` whose
combine region is one integer add, max, min, and, or, or xor. Anything else (floats, 2-D tensors,
data not carried) stays unknown, as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ceilings.ttir_ops import BINARY, CASTS, CMP, DIVIDING, LOGICAL, Pointer

# Elements x CTAs (x iterations) of one tensor: past it a tensor is unknown. Every 1-D integer op of a
# kernel is evaluated at this size, so it also bounds the time a ceiling spends here.
MAX_CELLS = 1 << 21

_RANGE = re.compile(r"start\s*=\s*(?P<start>-?\d+)\s*:\s*i32\s*,?.*?end\s*=\s*(?P<end>-?\d+)|"
                    r"end\s*=\s*(?P<end2>-?\d+)\s*:\s*i32\s*,\s*start\s*=\s*(?P<start2>-?\d+)")
_ONE_D = re.compile(r"tensor<(?P<n>\d+)x(?P<elem>!tt\.ptr<\w+>|[a-z]\w*)")
_DENSE = re.compile(r"dense<(?P<body>[^>]*)>")
_VALUE = re.compile(r"%[\w$.#-]+")


@dataclass(frozen=True)
class Lanes:
    data: np.ndarray  # scalar shape + (elements,)


@dataclass(frozen=True)
class LanePointer:
    argument: str
    offset: Lanes  # elements from the argument's data pointer, per lane


def _one_d(result_type: str) -> int | None:
    """Elements of a result type that is a 1-D tensor, else None."""
    m = _ONE_D.search(result_type)
    if m is None or re.search(r"tensor<\d+x\d+", result_type):
        return None
    return int(m.group("n"))


def _lanes(value, n: int | None = None) -> np.ndarray | None:
    if isinstance(value, Lanes):
        return value.data
    if isinstance(value, np.ndarray) and n is not None:
        return np.repeat(value[..., None], n, axis=-1) if value.ndim == 0 else value[..., None]
    return None


def _fits(data: np.ndarray) -> Lanes | None:
    return Lanes(data) if data.size <= MAX_CELLS else None


def _small(*arrays: np.ndarray) -> bool:
    """Whether the arrays broadcast together, to at most MAX_CELLS elements (checked before computing)."""
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        return False
    return int(np.prod(shape, dtype=np.int64)) <= MAX_CELLS


def evaluate(op: str, body: str, env: Mapping[str, object], values: Mapping[str, Sequence[int]]):
    """The value of an op whose result is a 1-D tensor (a Lanes or LanePointer), or None."""
    head, _, types = body.partition(" : ")
    result_type = types.split("->")[-1]
    n = _one_d(result_type)
    if n is None:
        return None
    operands = [env.get(v[1:]) for v in _VALUE.findall(head)]
    if op == "arith.constant":
        return _constant(head, n)
    if op == "tt.make_range":
        m = _RANGE.search(body)
        if m is None:
            return None
        start = int(m.group("start") if m.group("start") is not None else m.group("start2"))
        return Lanes(np.arange(start, start + n, dtype=np.int64))
    if op == "tt.splat" and len(operands) == 1:
        value = operands[0]
        if isinstance(value, Pointer) and isinstance(value.offset, np.ndarray):
            return LanePointer(value.argument, _fits(_lanes(value.offset, n)))
        data = _lanes(value, n)
        if data is None or int(np.prod(data.shape[:-1], dtype=np.int64)) * n > MAX_CELLS:
            return None
        return Lanes(np.broadcast_to(data, data.shape[:-1] + (n,)).copy())
    if op == "ttg.convert_layout" and len(operands) == 1:
        return operands[0] if isinstance(operands[0], Lanes | LanePointer) else None
    if op == "tt.addptr" and len(operands) == 2 and isinstance(operands[0], LanePointer):
        a, b = operands[0].offset, _lanes(operands[1], n)
        if a is None or b is None or not _small(a.data, b):
            return None
        return LanePointer(operands[0].argument, _fits(np.add(*np.broadcast_arrays(a.data, b))))
    if op == "tt.load":
        return _load(operands, values, n)
    data = [_lanes(o, n) for o in operands]
    if not data or any(d is None for d in data) or not _small(*data):
        return None
    if op in BINARY and len(data) == 2:
        a, b = np.broadcast_arrays(*data)
        if a.dtype == bool and b.dtype == bool and op in LOGICAL:
            return _fits(LOGICAL[op](a, b))
        a, b = a.astype(np.int64), b.astype(np.int64)
        if op in DIVIDING and np.any(b == 0):
            return None
        with np.errstate(all="ignore"):
            return _fits(BINARY[op](a, b))
    if op in CASTS and len(data) == 1:
        return Lanes(data[0].astype(np.int64) if data[0].dtype == bool else data[0])
    if op == "arith.cmpi" and len(data) == 2:
        predicate = head.split(",")[0].strip()
        return _fits(CMP[predicate](*np.broadcast_arrays(*data))) if predicate in CMP else None
    if op == "arith.select" and len(data) == 3:
        return _fits(np.where(*np.broadcast_arrays(data[0].astype(bool), data[1], data[2])))
    return None


def _constant(head: str, n: int) -> Lanes | None:
    m = _DENSE.search(head)
    if m is None:
        return None
    body = m.group("body").strip()
    items = [t.strip() for t in body.strip("[]").split(",")]
    try:
        if all(t in ("true", "false") for t in items):
            parsed = np.asarray([t == "true" for t in items])
        else:
            parsed = np.asarray([int(t) for t in items], dtype=np.int64)
    except ValueError:
        return None  # a float constant
    if parsed.size == 1:
        return Lanes(np.repeat(parsed, n))
    return Lanes(parsed) if parsed.size == n else None


def _load(operands: list, values: Mapping[str, Sequence[int]], n: int) -> Lanes | None:
    """A load from a carried tensor at offsets known per lane; masked lanes take `other` (or 0 where they
    cannot matter: none is given only when no lane is masked off)."""
    if not operands or not isinstance(operands[0], LanePointer) or operands[0].offset is None:
        return None
    pointer = operands[0]
    if pointer.argument not in values or len(operands) > 3:
        return None
    offset = pointer.offset.data
    mask = _lanes(operands[1], n) if len(operands) >= 2 else np.ones_like(offset, dtype=bool)
    other = _lanes(operands[2], n) if len(operands) == 3 else None
    if mask is None or not _small(offset, mask):
        return None
    offset, on = np.broadcast_arrays(offset, mask.astype(bool))
    if not np.all(on) and other is None:
        return None
    contents = np.asarray(values[pointer.argument], dtype=np.int64)
    read = offset[on]
    if read.size and (read.min() < 0 or read.max() >= len(contents)):
        return None
    loaded = contents[np.clip(offset, 0, max(len(contents) - 1, 0))] if len(contents) else np.zeros_like(offset)
    return _fits(np.where(on, loaded, 0 if other is None else np.broadcast_to(other, on.shape)).astype(np.int64))


_COMBINE = {"arith.addi": np.sum, "arith.maxsi": np.max, "arith.maxui": np.max, "arith.minsi": np.min,
            "arith.minui": np.min, "arith.andi": np.bitwise_and.reduce, "arith.ori": np.bitwise_or.reduce,
            "arith.xori": np.bitwise_xor.reduce}


@dataclass
class PendingReduce:
    """A `tt.reduce` whose combine region is being read: its result is set when the region returns."""

    result: str
    operand: object
    depth: int                       # scopes open at the reduce, its region one deeper
    combine: list[str]               # the ops of the combine region

    def value(self) -> np.ndarray | None:
        if not isinstance(self.operand, Lanes) or len(self.combine) != 1 or self.combine[0] not in _COMBINE:
            return None
        data = self.operand.data
        if data.dtype == bool:
            data = data.astype(np.int64)
        return np.asarray(_COMBINE[self.combine[0]](data, axis=-1))


def pending_reduce(result: str | None, rest: str, env: Mapping[str, object], depth: int) -> PendingReduce | None:
    """A one-operand reduce over axis 0 of a 1-D tensor, to be finished by its combine region."""
    operands = _VALUE.findall(rest.split(")")[0])
    if result is None or len(operands) != 1 or "axis = 0" not in rest:
        return None
    return PendingReduce(result, env.get(operands[0][1:]), depth, [])
