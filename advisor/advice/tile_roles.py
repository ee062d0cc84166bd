"""Which tile sizes of a kernel without a declared space a search may change without changing its result.

A tile constexpr (BLOCK_SIZE, BLOCK_N, ...) plays one of three roles in a kernel:
- a **grid tile**: a grid axis is cdiv(size, tile), so the launch covers the problem for any value
  (`advisor.advice.launch_rule` finds these from the recorded launch);
- a **loop tile**: the kernel walks a dimension in steps of it (`for off in range(0, N, BLOCK)`, or a
  trip count computed from it), so any value covers the dimension;
- a **covering tile**: neither; each program covers that many elements at once (`tl.arange(0, BLOCK)`
  masked by `offs < n_cols`, as row-wise softmax and RMS-norm kernels are written), and its value was
  chosen by the host code from the shape (`next_power_of_2(n_cols)`). A smaller value computes a wrong
  result; a larger one only wastes lanes. The search keeps it as launched.

Read from the kernel's source (and the JIT helpers it passes the tile to): a tile is a loop tile when
it, or a name computed from it (`num_k = tl.cdiv(K, BLOCK_K)`), appears in the arguments of `range`,
`tl.range` or `tl.static_range`. Where the source cannot be read, every tile the grid does not follow is kept (a wrong
result is worse than a missed speed-up).
"""

from __future__ import annotations

import ast

from advisor.advice.grid_values import tile_dim
from advisor.advice.launch_rule import LaunchRule
from advisor.advice.operands import call_name, kernel_def, names_in

_LOOP_CALLS = {"range", "static_range"}
_MAX_DEPTH = 3  # helpers of helpers: far enough for the libraries' kernels, bounded for recursion


# Calls that make a tensor: a tensor shaped by the tile is data, not a trip count. A loop whose bound a
# tensor's shape sets (a bitonic sort's log2(x.shape) stages over a tile of candidates, FlagGems' topk)
# does not walk a dimension in steps of the tile, so names computed from such tensors are not followed.
_TENSOR_CALLS = {"arange", "load", "zeros", "full", "zeros_like", "full_like", "make_block_ptr", "reshape",
                 "broadcast_to", "expand_dims", "view"}


def _tainted(fn_def: ast.FunctionDef, name: str) -> set[str]:
    """`name` and every local name computed from it (to a fixed point), except through tensors."""
    tainted = {name}
    assigns = [n for n in ast.walk(fn_def) if isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign)
               and getattr(n, "value", None) is not None
               and not any(isinstance(c, ast.Call) and call_name(c) in _TENSOR_CALLS for c in ast.walk(n.value))]
    changed = True
    while changed:
        changed = False
        for node in assigns:
            if names_in(node.value) & tainted:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                new = set().union(*(names_in(t) for t in targets)) - tainted
                if new:
                    tainted |= new
                    changed = True
    return tainted


def _branch_taken(test: ast.AST, constants: dict) -> bool | None:
    """The value of an `if` test on a constexpr of the launch (`if ONE_TILE_PER_CTA:`, `if not EVEN_K:`);
    None when it is not one."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _branch_taken(test.operand, constants)
        return None if inner is None else not inner
    if isinstance(test, ast.Name) and isinstance(constants.get(test.id), bool | int):
        return bool(constants[test.id])
    return None


def _live_nodes(fn_def: ast.FunctionDef, constants: dict):
    """The nodes of a kernel, as ast.walk gives them, but only the side of an `if` on a launch constexpr
    that the launch takes: FlagGems' row sum walks the row in TILE_N steps only when ONE_TILE_PER_CTA is
    false, and covers it in one tile of TILE_N when it is true (as the host sets it for its TILE_N)."""
    todo = [fn_def]
    while todo:
        node = todo.pop()
        yield node
        taken = _branch_taken(node.test, constants) if isinstance(node, ast.If) else None
        if taken is None:
            todo.extend(ast.iter_child_nodes(node))
        else:
            todo.append(node.test)
            todo.extend(node.body if taken else node.orelse)


def _loops_over(fn, param: str, depth: int = 0, constants: dict | None = None) -> bool | None:
    """Whether the JIT function `fn` walks a dimension in steps of its parameter `param` (on the sides of
    constexpr branches the launch's `constants` take); None when its source cannot be read."""
    found = kernel_def(fn)
    if found is None:
        return None
    fn_def, module_globals = found
    tainted = _tainted(fn_def, param)
    for node in _live_nodes(fn_def, constants or {}):
        if not isinstance(node, ast.Call):
            continue
        args = list(node.args) + [k.value for k in node.keywords]
        if call_name(node) in _LOOP_CALLS and any(names_in(a) & tainted for a in args):
            return True
        if depth >= _MAX_DEPTH or not isinstance(node.func, ast.Name):
            continue
        helper = module_globals.get(node.func.id)
        if helper is None or not hasattr(helper, "fn"):  # not a JIT helper
            continue
        helper_def = kernel_def(helper)
        if helper_def is None:
            continue
        params = [a.arg for a in helper_def[0].args.args]
        passed = [(params[i], a) for i, a in enumerate(node.args) if i < len(params)]
        passed += [(k.arg, k.value) for k in node.keywords if k.arg]
        if any(names_in(a) & tainted and _loops_over(helper, p, depth + 1) for p, a in passed):
            return True
    return False


def covering_tiles(fn, params: dict, rule: LaunchRule) -> set[str]:
    """The tile constexprs of a launch that neither a grid axis nor a loop of the kernel follows."""
    grid_tiles = {name for combo, _ in rule.axes for name, _ in combo}
    out = set()
    for name, value in params.items():
        if not tile_dim(name) or name in grid_tiles or not isinstance(value, int) or isinstance(value, bool):
            continue
        if not _loops_over(fn, name, constants={**dict(rule.launch.constexprs), **params}):  # None: unreadable
            out.add(name)
    return out
