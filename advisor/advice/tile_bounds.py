"""The dimension a grid tile runs over, as the kernel's own bounds check says it.

`launch_rule.named_tiles` pairs a tile with a size by its name (BLOCK_N with an argument `N`). Names
mislead: a convolution written as an implicit GEMM takes the batch as `N` and the output channels as `K`,
and tiles the channels by BLOCK_N (`offs_k = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)`, masked by
`offs_k < K`). Read by its name, BLOCK_N tiled the batch of 4 (one tile long), so every other BLOCK_N kept
the grid's 4 channel programs and computed an eighth of the output (RESULTS 55). A kernel states the
dimension itself wherever it masks a tile's offsets: `offs < DIM`, DIM an integer argument or a name the
kernel computes from integer arguments (`M = N * P * Q`).

Read from the kernel's source: a name is a tile's offsets when it is `tl.arange(0, TILE)` plus or minus a start
(directly or through names; never through a load, whose values are data, nor through / or %, which index
another dimension: a pixel's row `offs_m // Q`); a comparison `offsets < DIM` (or `DIM >
offsets`, `<=`, with broadcasting subscripts) gives the tile DIM's value in the launch. A tile compared
against two different values (or an expression, `K - k * BLOCK_K`) gets none.
"""

from __future__ import annotations

import ast

from advisor.advice.operands import call_name, names_in
from ceilings.launch import Launch

_LESS = (ast.Lt, ast.LtE)
_GREATER = (ast.Gt, ast.GtE)


def _int_arguments(launch: Launch) -> dict[str, int]:
    return {k: v for k, v in (*launch.scalars, *launch.constexprs)
            if isinstance(v, int) and not isinstance(v, bool)}


def _value(node: ast.AST, known: dict[str, int]) -> int | None:
    """An integer expression of known names: + - * // %, cdiv; None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.BinOp):
        a, b = _value(node.left, known), _value(node.right, known)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, ast.FloorDiv | ast.Mod) and b:
            return a // b if isinstance(node.op, ast.FloorDiv) else a % b
        return None
    if isinstance(node, ast.Call) and call_name(node) == "cdiv" and len(node.args) == 2:
        a, b = (_value(x, known) for x in node.args)
        return -(-a // b) if a is not None and b else None
    return None


def _loads(node: ast.AST) -> bool:
    return any(isinstance(c, ast.Call) and call_name(c) == "load" for c in ast.walk(node))


def _positions(node: ast.AST, tiles: set[str], offsets: dict[str, tuple[set[str], bool]],
               pids: set[str]) -> tuple[set[str], bool]:
    """(tiles, from a program id) of an expression of positions: `tl.arange(0, T)` or a name of positions, plus or
    minus a start, cast or broadcast; whether a start derives from a program id (`pid_n * BLOCK_N +
    tl.arange(0, BLOCK_N)`: a grid tile) rather than a loop (`k0 + tl.arange(0, BLOCK_K)`). An index derived
    from positions by / or % (a pixel's row `offs_m // Q`) runs over another dimension: no positions."""
    if isinstance(node, ast.Call) and call_name(node) == "arange" and len(node.args) == 2:
        start, end = node.args
        ok = isinstance(start, ast.Constant) and start.value == 0 and isinstance(end, ast.Name) and end.id in tiles
        return ({end.id} if ok else set()), False
    if isinstance(node, ast.Call) and call_name(node) == "to" and isinstance(node.func, ast.Attribute):
        return _positions(node.func.value, tiles, offsets, pids)
    if isinstance(node, ast.Name):
        return offsets.get(node.id, (set(), False))
    if isinstance(node, ast.Subscript):
        return _positions(node.value, tiles, offsets, pids)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        sides = [node.left] if isinstance(node.op, ast.Sub) else [node.left, node.right]
        found, from_pid = set(), False
        for side in sides:
            t, p = _positions(side, tiles, offsets, pids)
            found |= t
            from_pid |= p or (not t and bool(names_in(side) & pids))
        if isinstance(node.op, ast.Sub):
            from_pid |= bool(names_in(node.right) & pids)
        return found, from_pid
    return set(), False


def _programnames_in(kernel: ast.FunctionDef, pairs: list[tuple[ast.expr, ast.expr]]) -> set[str]:
    """Names a program id sets (through names; not through loads, nor loop variables)."""
    loops = {n.id for f in ast.walk(kernel) if isinstance(f, ast.For) for n in ast.walk(f.target)
             if isinstance(n, ast.Name)}
    pids: set[str] = set()
    for _ in range(4):
        for target, value in pairs:
            if _loads(value):
                continue
            if any(isinstance(c, ast.Call) and call_name(c) == "program_id" for c in ast.walk(value)) \
                    or names_in(value) & pids:
                pids |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)} - loops
    return pids


def masked_bounds(kernel: ast.FunctionDef | None, launch: Launch) -> dict[str, int]:
    """Tile parameter -> the size the kernel masks its offsets against, in this launch (module docstring)."""
    if kernel is None:
        return {}
    tiles = {name for name, v in launch.config.params.items() if isinstance(v, int) and v > 0}
    known = _int_arguments(launch)
    pairs = [(t, n.value) for n in ast.walk(kernel) if isinstance(n, ast.Assign) for t in n.targets]
    assigned: dict[str, int] = {}
    for target, _ in pairs:
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                assigned[n.id] = assigned.get(n.id, 0) + 1
    # Integer names computed once from the launch's integers (a local assigned twice is not one value).
    for target, value in pairs:
        if isinstance(target, ast.Name) and assigned[target.id] == 1 and target.id not in known:
            v = _value(value, known)
            if v is not None:
                known[target.id] = v
    pids = _programnames_in(kernel, pairs)
    offsets: dict[str, tuple[set[str], bool]] = {}
    for _ in range(3):  # names built from names
        for target, value in pairs:
            if not isinstance(target, ast.Name) or _loads(value):
                continue
            found, from_pid = _positions(value, tiles, offsets, pids)
            if found:
                before = offsets.get(target.id, (set(), False))
                offsets[target.id] = (before[0] | found, before[1] or from_pid)
    bounds: dict[str, set[int | None]] = {}
    for node in ast.walk(kernel):
        if not isinstance(node, ast.Compare) or len(node.ops) != 1:
            continue
        left, op, right = node.left, node.ops[0], node.comparators[0]
        if isinstance(op, _GREATER):
            left, right = right, left
        elif not isinstance(op, _LESS):
            continue
        owners, from_pid = _positions(left, tiles, offsets, pids)
        if len(owners) != 1 or not from_pid:
            continue
        (tile,) = owners
        bounds.setdefault(tile, set()).add(_value(right, known) if isinstance(right, ast.Name) else None)
    return {t: next(iter(v)) for t, v in bounds.items() if len(v) == 1 and None not in v and next(iter(v)) > 0}
