"""Which tensors a kernel's matrix products read: the operands its shared-memory tiles hold.

A tiled kernel stages the operands of its `tl.dot`s in shared memory, one (M x K) and one (K x N) tile
per pipeline stage; their size is the element size of the tensors those loads read, not of every tensor
the kernel touches (a float32 routing-weight vector of a bf16 fused-MoE kernel is read once per row and
never staged). Before a config is compiled, that element size is read from the kernel's source: each
operand of a `tl.dot` (or `a @ b`) is traced back through the kernel's assignments to the `tl.load`s
that produce it, and each load to the pointer argument its address is based on (`a_ptr + offsets`:
a_ptr; index tensors loaded from other pointers and multiplied into the offset are not the base).
Once compiled, the kernel's own shared bytes replace the estimate (advisor.advice.subjects). Products
in helper functions the kernel calls are not followed: such a kernel gets no analytic operand check,
and the compile of each finalist (the search's confirm step) is what refuses a config that overflows.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterable

from ceilings import pysource
from ceilings.launch import Launch

ELEMENT_BYTES = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "int16": 2,
                 "float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1, "uint8": 1}
# Calls whose result is (a view of) the pointer they are given.
_POINTER_PASSTHROUGH = {"advance", "multiple_of", "max_contiguous", "where", "make_block_ptr", "broadcast_to",
                        "reshape", "view", "expand_dims", "max_constancy"}


class _Kernel:
    def __init__(self, fn_def: ast.FunctionDef):
        # Meta-parameters (annotated constexpr) are never pointers; other scalars are told apart from
        # tensors by the launch (operand_element_bytes).
        self.params = {a.arg for a in fn_def.args.args
                       if a.annotation is None or "constexpr" not in ast.unparse(a.annotation)}
        self.assigned: dict[str, list[ast.expr]] = {}
        self.dots: list[ast.expr] = []
        for node in ast.walk(fn_def):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    for name in _names_of(target):
                        self.assigned.setdefault(name, []).append(node.value)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                self.assigned.setdefault(node.target.id, []).append(node.value)
            elif isinstance(node, ast.Call) and call_name(node) == "dot":
                operands = list(node.args[:2]) + [k.value for k in node.keywords if k.arg in ("input", "other")]
                self.dots += operands
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                self.dots += [node.left, node.right]

    def pointer_bases(self, expr: ast.expr, seen: frozenset = frozenset()) -> set[str]:
        """The pointer arguments an address expression is based on."""
        if isinstance(expr, ast.Name):
            if expr.id in seen:
                return set()
            if expr.id in self.assigned:
                return set().union(*(self.pointer_bases(v, seen | {expr.id}) for v in self.assigned[expr.id]))
            return {expr.id} if expr.id in self.params else set()
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add | ast.Sub):
            return self.pointer_bases(expr.left, seen) | self.pointer_bases(expr.right, seen)
        if isinstance(expr, ast.Subscript):
            return self.pointer_bases(expr.value, seen)
        if isinstance(expr, ast.IfExp):
            return self.pointer_bases(expr.body, seen) | self.pointer_bases(expr.orelse, seen)
        if isinstance(expr, ast.Call) and call_name(expr) in _POINTER_PASSTHROUGH:
            args = list(expr.args) + [k.value for k in expr.keywords if k.arg == "base"]
            return set().union(*(self.pointer_bases(a, seen) for a in args)) if args else set()
        return set()

    def loaded_from(self, expr: ast.expr, seen: frozenset = frozenset()) -> set[str]:
        """The pointer arguments whose loaded values flow into `expr`."""
        if isinstance(expr, ast.Name):
            if expr.id in seen:
                return set()
            return set().union(*(self.loaded_from(v, seen | {expr.id}) for v in self.assigned.get(expr.id, [])))
        if isinstance(expr, ast.Call):
            name = call_name(expr)
            if name == "load":
                target = expr.func.value if isinstance(expr.func, ast.Attribute) else None
                if isinstance(target, ast.Name) and target.id in self.params:
                    return {target.id}  # a tensor descriptor's load: desc.load([...])
                return self.pointer_bases(expr.args[0]) if expr.args else set()
            parts = list(expr.args) + [k.value for k in expr.keywords]
            if isinstance(expr.func, ast.Attribute):  # a.to(dtype), a.trans()
                parts.append(expr.func.value)
            return set().union(*(self.loaded_from(a, seen) for a in parts)) if parts else set()
        if isinstance(expr, ast.BinOp):
            return self.loaded_from(expr.left, seen) | self.loaded_from(expr.right, seen)
        if isinstance(expr, ast.Subscript | ast.Attribute | ast.UnaryOp):
            inner = expr.operand if isinstance(expr, ast.UnaryOp) else expr.value
            return self.loaded_from(inner, seen)
        if isinstance(expr, ast.IfExp):
            return self.loaded_from(expr.body, seen) | self.loaded_from(expr.orelse, seen)
        return set()


def _names_of(target: ast.expr) -> Iterable[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Tuple | ast.List):
        for elt in target.elts:
            yield from _names_of(elt)


def names_in(node: ast.AST) -> set[str]:
    """Every name an expression or statement reads or binds."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def call_name(call: ast.Call) -> str | None:
    """`f` of `f(...)` or of `tl.f(...)`."""
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def axis_arg(call: ast.Call) -> int | None:
    """The axis of `tl.program_id(a)` / `tl.num_programs(axis=a)` where the source spells it as a constant."""
    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "axis"), None)
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, int) else None


def kernel_def(fn) -> tuple[ast.FunctionDef, dict] | None:
    """The syntax tree of a JIT function (through Autotuner / Heuristics wrappers) and the globals its
    names resolve in; None when its source cannot be read."""
    inner = fn
    while hasattr(inner, "fn"):  # Autotuner / Heuristics -> JITFunction -> the Python function
        inner = inner.fn
    try:
        tree = pysource.parse(textwrap.dedent(inspect.getsource(inner)))
    except (OSError, TypeError, SyntaxError):
        return None
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    return (defs[0], getattr(inner, "__globals__", {})) if defs else None


def dot_operand_args(fn) -> set[str] | None:
    """The pointer arguments of a JIT kernel whose loads feed its matrix products (empty: it has none);
    None when its source cannot be read."""
    found = kernel_def(fn)
    if found is None:
        return None
    kernel = _Kernel(found[0])
    return set().union(*(kernel.loaded_from(d) for d in kernel.dots)) if kernel.dots else set()


def operand_element_bytes(launch: Launch, fn=None) -> int | None:
    """The element size of the tiles a launch's matrix products stage in shared memory: the largest
    among the tensors their loads read. None when the kernel has no matrix product (no operand
    tiles); the largest element size of all its tensors when its source cannot be read."""
    args = dot_operand_args(fn) if fn is not None else None
    sizes = {t.name: ELEMENT_BYTES[t.dtype] for t in launch.tensors if t.dtype in ELEMENT_BYTES}
    if args is None:
        return max(sizes.values(), default=2)
    if not args:
        return None
    found = [sizes[a] for a in args if a in sizes]
    return max(found) if found else 2
