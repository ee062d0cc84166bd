"""`advisor apply` for a kernel whose config is written at its launch: `kernel[grid](..., BLOCK=64, num_warps=4)`.

The config of a kernel without an autotune list or a config file lives in the host code that launches it. Where
that launch is one call in the kernel's file and every value the new config changes is written there as a
literal keyword argument (`num_warps=4`, `BLOCK_SIZE=1024`), the edit replaces those literals and nothing else;
`num_warps` / `num_stages` missing from the call (Triton's defaults, 4 and 3) are added as keywords before its
closing parenthesis. A value passed through a local name (`BM=BM`) is edited where the name gets it when the
launching function binds that name once, as that literal (`BM = 4`), and nowhere else (no parameter, no other
assignment): the host's grid, written from the same name, follows it. A literal at the launch whose keyword's name
the launching function also binds once, to the same literal (`BLOCK_C = 1024` for its grid, `BLOCK_C=1024` at the
launch), is edited in both places, so the grid follows there too. Anything else is refused with the line to
change by hand: a name bound from an argument or bound twice (the host's own choice), a launch written in several
places, or none found. Read with `advisor.advice.autotune_list.load_source` (byte offsets of the parsed
source), written through `advisor.advice.edit` (atomic, with a backup, only if the file did not change).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from advisor.advice.autotune_list import Source, load_source
from advisor.advice.edit import Edit, digest
from ceilings.errors import AdvisorError
from ceilings.launch import Config

TRITON_DEFAULTS = {"num_warps": 4, "num_stages": 3}


def launch_calls(src: Source, kernel: str) -> list[ast.Call]:
    """The calls `kernel[grid](...)` (or `module.kernel[grid](...)`) in the file."""
    found = []
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            target = node.func.value
            name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) \
                else None
            if name == kernel:
                found.append(node)
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def plan_launch_literals(path: str | os.PathLike, kernel: str, current: Config, best: Config) -> Edit:
    """The edit that turns the literal keyword values of `kernel`'s one launch call from `current` into `best`."""
    path = Path(path)
    src = load_source(path)
    calls = launch_calls(src, kernel)
    if not calls:
        raise AdvisorError(f"{path}: no launch `{kernel}[grid](...)` found in the file; write {best.label()} where "
                           "the host code launches it")
    if len(calls) > 1:
        lines = ", ".join(str(c.lineno) for c in calls)
        raise AdvisorError(f"{path}: {kernel} is launched at lines {lines}; write {best.label()} in the one you "
                           "mean by hand")
    (call,) = calls
    new, old = best.to_dict(), current.to_dict()
    changed = {k: v for k, v in new.items() if old.get(k) != v}
    keywords = {k.arg: k for k in call.keywords if k.arg}
    replacements: list[tuple[int, int, str]] = []
    added: list[str] = []
    for name, value in changed.items():
        kw = keywords.get(name)
        if kw is None:
            if name in TRITON_DEFAULTS and old.get(name) == TRITON_DEFAULTS[name] and not _splats(call):
                added.append(f"{name}={value!r}")
                continue
            raise AdvisorError(f"{src.where(call)}: {name} is not a keyword of the launch of {kernel}; set "
                               f"{name}={value!r} there by hand")
        if _is_literal(kw.value, old.get(name)):
            replacements.append((src.start(kw.value), src.end(kw.value), repr(value)))
            # `BLOCK_C = 1024; grid = (R, cdiv(C, BLOCK_C))` ... `BLOCK_C=1024`: the host's name of the same
            # spelling and value is the same quantity; left alone, the edited launch would run the new tile on
            # the old grid, a part of the output (a user's row-wise top-k mask, RESULTS 56)
            twin = _bound_once(src.tree, call, ast.Name(id=name, ctx=ast.Load()), old.get(name))
            if twin is not None:
                replacements.append((src.start(twin), src.end(twin), repr(value)))
            continue
        literal = _bound_once(src.tree, call, kw.value, old.get(name))
        if literal is None:
            raise AdvisorError(f"{src.where(kw.value)}: {name} is passed as `{src.text(kw.value)}`, not as the "
                               f"literal {old.get(name)!r}; set it to {value!r} there by hand (the host's value)")
        replacements.append((src.start(literal), src.end(literal), repr(value)))
    body = src.body
    if added:
        # After the last argument, before any space or newline that precedes the call's `)`.
        at = len(body[:src.end(call) - 1].rstrip())
        last = body[at - 1:at]
        text = (" " + ", ".join(added) + ",") if last == b"," else \
            ", ".join(added) if last == b"(" else ", " + ", ".join(added)
        replacements.append((at, at, text))
    for start, end, text in sorted(replacements, reverse=True):
        body = body[:start] + text.encode() + body[end:]
    after = src.bom + body
    what = f"{kernel}'s launch at {src.where(call)}: {current.label()} -> {best.label()}"
    return Edit(path, src.data, after, digest(src.data), what)


def _is_literal(node: ast.AST, value) -> bool:
    return isinstance(node, ast.Constant) and node.value == value and type(node.value) is type(value)


def _bound_once(tree: ast.Module, call: ast.Call, passed: ast.AST, value) -> ast.Constant | None:
    """The literal `value` a local name passed to the launch was bound to, where the function that launches binds
    the name exactly once, before the call, as `NAME = value` (`BM = 4` ... `BM=BM`); None otherwise (a parameter,
    a second binding anywhere in the function, a loop or `with` target, a `global`: the host's own choice)."""
    if not isinstance(passed, ast.Name):
        return None
    name = passed.id
    functions = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                 and f.lineno <= call.lineno <= (f.end_lineno or f.lineno)]
    if not functions:
        return None
    fn = max(functions, key=lambda f: f.lineno)  # the innermost
    args = fn.args
    if name in {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}:
        return None
    stores = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)]
    declared = any(isinstance(n, ast.Global | ast.Nonlocal) and name in n.names for n in ast.walk(fn))
    if len(stores) != 1 or declared:
        return None
    assign = next((n for n in ast.walk(fn) if isinstance(n, ast.Assign) and n.targets == [stores[0]]), None)
    if assign is None or assign.lineno >= call.lineno or not _is_literal(assign.value, value):
        return None
    return assign.value


def _splats(call: ast.Call) -> bool:
    """Whether the call passes `**kwargs` (a keyword added after it could repeat one of them)."""
    return any(k.arg is None for k in call.keywords)
