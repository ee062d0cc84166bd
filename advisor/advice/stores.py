"""What a kernel's stores follow, read from its source: the grid tiles that are group sizes, and the
tensors it accumulates into with atomics.

**Group tiles.** A grid tile T (a grid axis is cdiv(size, T)) usually only sets how many elements each
program covers: its stores are addressed by offsets `pid * T + tl.arange(0, T)`, so any T writes the same
outputs. A block quantiser spells its group size the same way (`BLOCK_SIZE`), but each program also writes
a value per group, addressed by the program id alone (`tl.store(s_ptr + pid, amax / 448.0)`, torchao's fp8
blockwise quantisers): the host sized that output by the group (`s = x.new_empty(K // block_size)`), so
another T writes another number of scales, a different result, not a faster one. Such a tile is kept as
launched, as the covering tiles of `advisor.advice.tile_roles` are. A grid tile T of axis a is a group
tile when some store's pointer (tl.store, tl.atomic_*, a descriptor's store) follows `tl.program_id(a)`
and neither has a dimension sized by T nor adds a program id times T. Names are followed through
assignments (and into the JIT helpers a pointer is passed to); a name has a T-sized dimension when it
comes from `tl.arange`, `tl.zeros`, `tl.full`, a block pointer or a descriptor whose arguments carry T,
or from anything computed from such a name (a load through a T-shaped pointer is T-shaped: a fused-MoE
kernel's token ids); `pid * T` is an offset a descriptor's block of T starts at; a count of tiles
(`cdiv(N, T)`, `N // T`) carries no T as a factor, so `s_ptr + pid_m * cdiv(N, T) + pid_n` is one value
per program. A per-program partial sum that a second kernel reduces is caught the same way, and kept:
the second kernel was launched for the recorded count.

**Accumulated outputs.** A split-K GEMM adds each program's partial product into its output with
`tl.atomic_add`, after the host (or an autotune config's pre-hook) zeroed it; run from random contents,
its result is wrong though the config is right (torchao's HQQ GEMM, GemLite's split-K kernels: RESULTS
36). `accumulated_outputs` names the pointer arguments a kernel's atomics write through, so that the
runs that check a config's result start those tensors at zero, as the library does.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from advisor.advice.operands import axis_arg, call_name, kernel_def

_SHAPING = {"arange", "zeros", "full", "make_block_ptr", "make_tensor_descriptor", "reshape", "view",
            "broadcast_to", "zeros_like", "full_like"}
_REDUCING = {"max", "min", "sum", "argmax", "argmin", "reduce", "xor_sum"}
_MAX_DEPTH = 3  # helpers of helpers, as tile_roles reads them

# ("arg", p): computed from the pointer argument p; ("pid", axis or None): follows a program id;
# ("T", t): carries tile t as a factor; ("per", t): divided by it (a count of tiles); ("shape", t): has a
# dimension sized by it; ("scaled", t): a program id times t (where a descriptor's block of t starts)
Label = tuple[str, object]


def _inverted(labels: set[Label]) -> set[Label]:
    """The labels of 1 / x: a count of tiles carries no T as a factor (cdiv(N, T) * pid is no offset
    scaled by T)."""
    return {("per", t) if kind == "T" else (kind, t) for kind, t in labels if kind not in ("shape", "scaled")}


class _Labels:
    """Flow-insensitive labels of a JIT function's names, from seeds on its parameters."""

    def __init__(self, fn_def: ast.FunctionDef, seeds: dict[str, set[Label]]):
        self.env: dict[str, set[Label]] = {k: set(v) for k, v in seeds.items()}
        flows: list[tuple[list[ast.AST], ast.AST]] = []
        for node in ast.walk(fn_def):
            if isinstance(node, ast.Assign):
                flows.append((node.targets, node.value))
            elif isinstance(node, ast.AugAssign | ast.AnnAssign) and node.value is not None:
                flows.append(([node.target], node.value))
            elif isinstance(node, ast.For):
                flows.append(([node.target], node.iter))
        changed = True
        while changed:  # to the fixed point: every name carries what any of its assignments carries
            changed = False
            for targets, value in flows:
                got = self.of(value)
                for target in targets:
                    for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
                        if not got <= self.env.get(name, set()):
                            self.env[name] = self.env.get(name, set()) | got
                            changed = True

    def of(self, node: ast.AST) -> set[Label]:
        if isinstance(node, ast.Name):
            return set(self.env.get(node.id, ()))
        if isinstance(node, ast.Call):
            name = call_name(node)
            inner = set().union(set(), *(self.of(a) for a in [*node.args, *(k.value for k in node.keywords)]))
            if name == "program_id":
                return {("pid", axis_arg(node))}
            if name == "load":  # the value read carries where its address came from, not the pointer read
                inner = {lab for lab in inner if lab[0] != "arg"}
            if name == "cdiv" and len(node.args) == 2:  # a count of tiles: divided by T, not scaled by it
                return self.of(node.args[0]) | _inverted(self.of(node.args[1]))
            if name in _SHAPING:
                inner |= {("shape", t) for kind, t in inner if kind == "T"}
            if name in _REDUCING and len(node.args) < 2 and not any(k.arg == "axis" for k in node.keywords):
                inner = {lab for lab in inner if lab[0] != "shape"}  # reduced to a scalar
            if isinstance(node.func, ast.Attribute):  # x.to(...), desc.load(...): the object's labels
                inner |= self.of(node.func.value)
            return inner
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div | ast.FloorDiv):
            return self.of(node.left) | _inverted(self.of(node.right))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            left, right = self.of(node.left), self.of(node.right)
            scaled = {("scaled", t) for a, b in ((left, right), (right, left)) if any(k == "pid" for k, _ in a)
                      for k, t in b if k == "T"}
            return left | right | scaled
        return set().union(set(), *(self.of(c) for c in ast.iter_child_nodes(node)))


def _store_pointer(call: ast.Call) -> list[ast.AST] | None:
    """The expressions a store's address is made of; None when the call stores nothing."""
    name = call_name(call) or ""
    pointer = next((k.value for k in call.keywords if k.arg == "pointer"), None)
    if name == "store" and isinstance(call.func, ast.Attribute) and not (
            isinstance(call.func.value, ast.Name) and call.func.value.id in ("tl", "triton")):
        return [call.func.value, *call.args[:1]]  # a tensor descriptor's store(offsets, value)
    if name == "store" or name.startswith("atomic_"):
        return [pointer] if pointer is not None else call.args[:1]
    if name.endswith("descriptor_store"):  # (desc, value, offsets)
        return [a for i, a in enumerate(call.args) if i != 1]
    return None


def _store_labels(fn, seeds: dict[str, set[Label]], depth: int = 0,
                  atomics_only: bool = False) -> list[set[Label]] | None:
    """The labels of every store's address (or only the atomics') in the JIT function `fn` and the helpers
    it calls; None when its source cannot be read."""
    found = kernel_def(fn)
    if found is None:
        return None
    fn_def, module_globals = found
    labels = _Labels(fn_def, seeds)
    out: list[set[Label]] = []
    for node in ast.walk(fn_def):
        if not isinstance(node, ast.Call):
            continue
        parts = _store_pointer(node)
        if parts is not None and atomics_only and call_name(node) != "atomic_add":
            continue
        if parts is not None:
            out.append(set().union(set(), *(labels.of(p) for p in parts)))
            continue
        helper = module_globals.get(node.func.id) if isinstance(node.func, ast.Name) else None
        if depth >= _MAX_DEPTH or helper is None or not hasattr(helper, "fn"):
            continue
        helper_def = kernel_def(helper)
        if helper_def is None:
            continue
        params = [a.arg for a in helper_def[0].args.args]
        passed = {params[i]: labels.of(a) for i, a in enumerate(node.args) if i < len(params)}
        passed.update({k.arg: labels.of(k.value) for k in node.keywords if k.arg})
        inner = _store_labels(helper, passed, depth + 1, atomics_only)
        out.extend(inner or [])
    return out


def accumulated_outputs(fn) -> set[str] | None:
    """The arguments a JIT kernel's `tl.atomic_add`s write through (in it or the helpers it passes them to),
    with the scalars their addresses are computed from (the caller keeps the tensors); None when its source
    cannot be read. An index tensor loaded to compute the address is not one: a load's value carries no
    pointer it read. Only adds: zero is their identity (a min or max from zero could hide a wrong config)."""
    found = kernel_def(fn)
    if found is None:
        return None
    params = [a.arg for a in found[0].args.args]
    stores = _store_labels(fn, {p: {("arg", p)} for p in params}, atomics_only=True)
    return {name for labels in stores or [] for kind, name in labels if kind == "arg"}


def stored_outputs(fn) -> set[str] | None:
    """The arguments any store or atomic of a JIT kernel writes through (in it or its helpers), with the scalars
    their addresses are computed from; None when its source cannot be read (the caller assumes all)."""
    found = kernel_def(fn)
    if found is None:
        return None
    params = [a.arg for a in found[0].args.args]
    stores = _store_labels(fn, {p: {("arg", p)} for p in params})
    return None if stores is None else {name for labels in stores for kind, name in labels if kind == "arg"}


def accumulated_tensors(fn, tensors: Iterable[tuple[str, str]]) -> set[str]:
    """Of a launch's tensors, (name, dtype) pairs, the floating ones the kernel adds into with atomics: the
    runs that check a config start them at zero (the product's `--measure`, the corpus's timing)."""
    names = accumulated_outputs(fn) or set()
    return {name for name, dtype in tensors if name in names and dtype.startswith(("float", "bfloat"))}


def group_tiles(fn, axes_of: dict[str, set[int]]) -> set[str]:
    """The grid tiles (`axes_of`: tile -> the grid axes it divides) some store of the kernel writes one
    value per program of, along an axis the tile divides (see the module docstring). Empty when the
    source cannot be read (the search's other checks, and `--measure`'s output check, still hold)."""
    stores = _store_labels(fn, {t: {("T", t)} for t in axes_of})
    if not stores:
        return set()
    out = set()
    for tile, axes in axes_of.items():
        for labels in stores:
            pid_axes = {a for kind, a in labels if kind == "pid"}
            follows = ("shape", tile) in labels or ("scaled", tile) in labels
            if (pid_axes & axes or None in pid_axes) and not follows:
                out.add(tile)
    return out
