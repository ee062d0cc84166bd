"""Grid axes explained by the values of a recorded launch, where names alone do not explain them.

`advisor.advice.launch_rule` first explains a grid axis by names: cdiv(X, BLOCK_X) for a size argument
spelled after the tile's letter. Real kernels often name them otherwise: a layer-norm backward grids over
cdiv(M, BLOCK_ROW_SIZE), a linear-attention kernel over cdiv(V, BV) * heads. What is left of an axis after
the names (its whole size, or the factor the names left) is explained here by a product of terms
cdiv(S, T) times a factor that does not depend on the config, where

- T is any meta-parameter of the config whose value is a power of two (BLOCK_ROW_SIZE, BS, BV, SPLIT_K,
  ...), not already used by the names;
- S is, for a tile whose word (BLOCK_<X>_SIZE, B<X>, <X>BLOCK: X) names an integer argument (X, n_x,
  num_xs, ...), that argument and nothing else (a tile named after a size it does not divide is a loop
  tile, not a grid tile by coincidence); for any other tile, a **tensor dimension** (evidence that the
  value is a size, where an integer argument may be a flag, a stride or a dtype id), never one a name
  already explained (a sequence length a named tile divides on one axis is no grid size of another tile
  on the next axis because their numbers agree), and where an integer argument has the tile's value
  (group_size 128 beside BLOCK 128), the same numbers with that argument, which no config changes, tie
  with it;
- or the term is T itself, where T alone is the whole axis and T is no BLOCK/TILE size (split-K:
  SPLIT_K programs per output tile).

A term explains something only if cdiv(S, T) >= 2: a tile as large as its size, a tile of 1 without a
name, or an axis of 1 tell nothing. Candidates are ranked: first those whose factor is 1 or a tensor
dimension (batch, heads) other than another axis's size (that batch has its own axis), then by a score:
two per named term and one for an exact product (factor 1); a factor that is no size of the launch is
accepted only with named terms. The axis's own size, where it is a tensor dimension, competes as the
explanation "no tile" (rows of a softmax grid, one per row) with a score of 1: it ties with an exact
product of value-only terms, each as likely a coincidence as the other, and loses to a named term. When
the best rank holds two explanations that predict differently (two tiles, or two sizes of different
values), or a tile is the best explanation of two axes, the axes are **kept as recorded** and a note
says why, so no config is ranked on a grid that was guessed. Two sizes of the same value are one
explanation (they predict the same grid for every config).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

from ceilings.launch import Config, Launch

TILE_WORDS = (re.compile(r"^(?:BLOCK|TILE)(?:_SIZE)?_([A-Z0-9]+)$"), re.compile(r"^(?:BLOCK|TILE)_([A-Z0-9]+)_SIZE$"),
              re.compile(r"^B([A-Z][A-Z0-9]?)$"), re.compile(r"^([A-Z])_?BLOCK$"))
NAME_SPELLINGS = ("{x}", "n_{x}", "size_{x}", "{x}_size", "n{x}", "num_{x}", "{x}s", "n_{x}s", "num_{x}s")
MAX_TERMS = 3

Axis = tuple[list[tuple[str, Callable[[Config], int]]], int]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def tile_word(name: str) -> str | None:
    """X of BLOCK_X, BLOCK_SIZE_X, TILE_X, BLOCK_X_SIZE, BX, X_BLOCK (lower case), else None."""
    for pattern in TILE_WORDS:
        m = pattern.match(name)
        if m:
            return m.group(1).lower()
    return None


def tile_dim(name: str) -> str | None:
    """The dimension a config parameter is named as a tile of, upper case: 'M' for BLOCK_SIZE_M, BLOCK_M, TILE_M,
    BM and M_BLOCK; 'SIZE' for a 1-D block named for no dimension (BLOCK_SIZE, TILE_SIZE, a bare BLOCK); None for a
    parameter not named as a tile. What a search may halve or double (`advisor.advice.config_space`) and what
    `advisor.advice.tile_roles` asks the role of; the grid's rule reads names on its own terms."""
    if name == "BLOCK":
        return "SIZE"
    word = tile_word(name)
    return word.upper() if word else None


def one_d_tile(name: str) -> bool:
    """A tile named for no dimension: a 1-D block, a row norm's step."""
    return name in ("BLOCK", "BLOCK_SIZE", "TILE_SIZE")


# A matmul's program-order group (GROUP_SIZE_M, GROUP_M: Triton's tutorial swizzle) reorders the programs and never
# sets how many there are; by value it "explained" xformers' tiled-matmul grid as cdiv(K1, GROUP_M) = 4096 / 8.
SWIZZLE_GROUP = re.compile(r"^GROUP(_SIZE)?_[A-Z]$")


def _power_of_two(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1 and v & (v - 1) == 0


@dataclass(frozen=True)
class Term:
    """cdiv(value, tile) on a grid axis; `size` says where the value comes from."""

    tile: str
    tile_value: int
    size: str
    value: int
    named: bool
    counts_itself: bool = False  # the axis counts the parameter's value (split-K: SPLIT_K programs per tile)
    fixed_by: str | None = None  # the same numbers with an argument of the tile's value: no tile at all

    def count(self) -> int:
        return self.tile_value if self.counts_itself else _cdiv(self.value, self.tile_value)

    def describe(self) -> str:
        divisor = self.fixed_by or self.tile
        return divisor if self.counts_itself else f"cdiv({self.size}, {divisor})"

    def twin(self, arg: str) -> Term:
        return dataclasses.replace(self, fixed_by=arg)

    def dim(self) -> Callable[[Config], int]:
        """The size the launch rule divides by the tile: cdiv(T * T, T) = T for an axis counting T itself."""
        if self.counts_itself:
            return lambda c, name=self.tile: int(c[name]) ** 2
        return lambda c, v=self.value: v


@dataclass(frozen=True)
class Explanation:
    terms: tuple[Term, ...]
    factor: int
    rank: tuple[int, int]

    def prediction(self) -> tuple:
        """What the explanation predicts for every config: equal for two sizes of one value."""
        return tuple(sorted((t.tile, t.value, t.fixed_by or "") for t in self.terms)), self.factor

    def describe(self) -> str:
        if not self.terms:
            return f"{self.factor} (a size of the launch: no tile)"
        return " * ".join([t.describe() for t in self.terms] + ([str(self.factor)] if self.factor > 1 else []))


def _int_args(launch: Launch) -> dict[str, int]:
    return {k: v for k, v in (*launch.constexprs, *launch.scalars)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0}


def _terms(launch: Launch, free: dict[str, int], taken_values: set[int]) -> dict[str, list[Term]]:
    """The terms each free tile can make (see the module docstring)."""
    args = {k.lower(): (k, v) for k, v in _int_args(launch).items()}
    dims: dict[int, str] = {}
    for t in launch.tensors:
        for i, d in enumerate(t.shape):
            dims.setdefault(d, f"{t.name}.shape[{i}]")
    for name, v in _int_args(launch).items():  # a dimension that is also an argument reads as the argument
        if v in dims and not name.lower().startswith("stride"):
            dims[v] = name
    out: dict[str, list[Term]] = {}
    for tile, t in free.items():
        word = tile_word(tile)
        named = [args[s.format(x=word)] for s in NAME_SPELLINGS if word and s.format(x=word) in args]
        if named:
            out[tile] = [Term(tile, t, n, v, True) for n, v in dict(named).items() if _cdiv(v, t) >= 2]
        elif t >= 2:
            out[tile] = [Term(tile, t, label, d, False) for d, label in dims.items()
                         if d not in taken_values and _cdiv(d, t) >= 2]
            if not re.search(r"BLOCK|TILE", tile, re.I):  # a tile is a size; a count (SPLIT_K) may be an axis
                out[tile].append(Term(tile, t, tile, 0, False, True))
            # an argument of the tile's value (group_size 128 beside BLOCK 128) makes the same numbers without
            # the tile: each cdiv term gets a twin over it, so the two tie and the axis is kept (an axis that
            # is an argument's value, against one counting the tile, is "no tile": a dimension, not any int)
            twin = next((k for k, v in _int_args(launch).items() if v == t and not k.lower().startswith("stride")
                         and k not in launch.config.params), None)
            if twin is not None:
                out[tile] += [term.twin(twin) for term in out[tile] if not term.counts_itself]
    return out


def _candidates(size: int, terms: dict[str, list[Term]], dims: set[int], sizes: set[int],
                others: set[int]) -> list[Explanation]:
    """Every explanation of `size` from the terms (distinct tiles and sizes, at most MAX_TERMS), and "no
    tile" where `size` is a size of the launch. `others`: the other grid axes' sizes (a factor equal to one
    is the batch the other axis already counts)."""
    def factor_ok(f: int) -> int:
        return int(f == 1 or (f in dims and f not in others))

    out = []
    if size in dims:
        out.append(Explanation((), size, (factor_ok(size), 1)))
    pool = [t for ts in terms.values() for t in ts]
    for r in range(1, MAX_TERMS + 1):
        for combo in combinations(pool, r):
            # one size tiled twice on one axis (cdiv(N, A) * cdiv(N, B)) is no layout of work
            if len({t.tile for t in combo}) < r or len({t.size for t in combo}) < r:
                continue
            product = math.prod(t.count() for t in combo)
            if size % product:
                continue
            factor = size // product
            if any(t.counts_itself for t in combo) and (r > 1 or factor > 1):
                continue  # a power of two divides most axes: only one that is the whole axis tells
            n_named = sum(t.named for t in combo)
            if factor > 1 and n_named < r and factor not in sizes:
                continue
            out.append(Explanation(combo, factor, (factor_ok(factor), 2 * n_named + int(factor == 1))))
    return out


def explain_by_value(launch: Launch, axes: list[Axis], used_values: set[int],
                     fixed: set[int] = frozenset(), scaled_axes: dict[str, set] | None = None,
                     loop_tiles: set[str] = frozenset()) -> tuple[list[Axis], list[str], set[str]]:
    """`axes` (the names' explanation, one per grid axis) with what is left of each explained by values
    where one explanation is best; the notes (each inference, each axis kept for want of one); and the
    tiles an axis was kept for (a config that changes one has a grid the recorded launch does not tell).
    `fixed`: axes the host sizes whatever the config (a grid-stride loop's), left as they are.
    `scaled_axes`: tile -> the axes whose program id the kernel multiplies it by (`launch_rule.pid_scaled_axes`):
    explanations with a tile the kernel scales only other axes' program ids by are dropped while another remains
    (the fp8 GEMV: 8 pairs on axis 1 tie with cdiv(128 experts, BLOCK_ROWS = 16), but the kernel multiplies
    only program_id(0) by BLOCK_ROWS). `loop_tiles`: tiles a program walks a loop by, which count no programs."""
    def elsewhere(e: Explanation, axis: int) -> bool:
        known = [(scaled_axes or {}).get(t.tile, set()) for t in e.terms]
        return any(k and None not in k and axis not in k for k in known)

    used = {name for combo, _ in axes for name, _ in combo}
    free = {k: v for k, v in launch.config.params.items()
            if k not in used and k not in loop_tiles and _power_of_two(v) and not SWIZZLE_GROUP.match(k)}
    terms = _terms(launch, free, used_values)
    dims = {d for t in launch.tensors for d in t.shape if d >= 2}
    sizes = dims | {v for k, v in _int_args(launch).items() if v >= 2 and not k.lower().startswith("stride")}
    best: dict[int, list[Explanation]] = {}
    for i, (_, left) in enumerate(axes):
        if left < 2 or i in fixed:
            continue
        others = {g for j, (_, g) in enumerate(axes) if j != i and g >= 2}
        found = _candidates(left, terms, dims, sizes, others)
        # An explanation through a tile the kernel multiplies only other axes' program ids by contradicts the
        # source: dropped while another remains (a bmm's batch axis of 64 is no cdiv(256, BM) x 8 when BM
        # scales program_id(0) only).
        found = [e for e in found if not elsewhere(e, i)] or found
        if not found:
            continue
        top = max(e.rank for e in found)
        distinct = {e.prediction(): e for e in found if e.rank == top}
        best[i] = list(distinct.values())
    notes: list[str] = []
    unsure: set[str] = set()
    out = list(axes)
    tiles_of = {i: {t.tile for e in es for t in e.terms} for i, es in best.items()}
    for i, es in sorted(best.items()):
        if len(es) > 1:
            if any(e.terms for e in es):
                unsure |= tiles_of[i]
                notes.append(f"grid axis {i} ({axes[i][1]} left by the names) kept as recorded: "
                             + " and ".join(e.describe() for e in es[:3])
                             + " explain it equally, so configs that change "
                             + ", ".join(sorted(tiles_of[i])) + " are not ranked unless the host code is re-run")
            continue
        (e,) = es
        if not e.terms or any(t.fixed_by for t in e.terms):  # a twin never stands alone: kept
            continue
        shared = sorted(t for j, ts in tiles_of.items() if j != i for t in ts & tiles_of[i])
        if shared:
            unsure |= set(shared)
            notes.append(f"grid axis {i} kept as recorded: {', '.join(shared)} explains it and another axis "
                         "equally, so configs that change it are not ranked unless the host code is re-run")
            continue
        combo, _ = out[i]
        out[i] = ([*combo, *((t.tile, t.dim()) for t in e.terms)], e.factor)
        how = "names" if all(t.named for t in e.terms) else "values"
        notes.append(f"for other configs, grid axis {i} = {('(names) * ' if combo else '') + e.describe()} "
                     f"(inferred from the recorded launch's {how})")
    return out, notes, unsure
