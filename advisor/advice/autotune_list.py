"""Reading the `configs=[...]` list of a kernel's `@triton.autotune(...)` in Python source, with `ast`:
which kernel, which list (inline or a module-level name), and each element as a `Config` when it is a
literal `triton.Config(...)`. `advisor.advice.autotune_edit` edits the list found here.
"""

from __future__ import annotations

import ast
import codecs
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.advice.edit import number_list, read_bytes
from ceilings import pysource
from ceilings.errors import AdvisorError
from ceilings.launch import Config

# triton.Config(kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None, pre_hook=None, ir_override=None)
_CONFIG_ARGS = ("kwargs", "num_warps", "num_stages", "num_ctas", "maxnreg", "pre_hook", "ir_override")
# Arguments whose non-default values make a triton.Config more than a `Config` can say.
_CONFIG_EXTRA_DEFAULTS = {"num_ctas": 1, "maxnreg": None, "pre_hook": None, "ir_override": None}
_MUTATING_METHODS = {"append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse"}


@dataclass
class Source:
    path: Path
    data: bytes  # the whole file
    bom: bytes  # a UTF-8 byte-order mark, kept in front of everything
    body: bytes  # data without the BOM: what ast's line/column offsets count in
    tree: ast.Module
    line_starts: list[int]  # byte offset of each line of `body`; index 0 is line 1
    newline: str

    def offset(self, lineno: int, col: int) -> int:
        """ast's (1-based line, UTF-8 byte column) as a byte offset in `body`."""
        return self.line_starts[lineno - 1] + col

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)

    def text(self, node: ast.AST) -> str:
        return self.body[self.start(node):self.end(node)].decode("utf-8")

    def line_start(self, offset: int) -> int:
        return self.body.rfind(b"\n", 0, offset) + 1

    def where(self, node: ast.AST) -> str:
        return f"{self.path}:{node.lineno}"


def load_source(path: Path, data: bytes | None = None) -> Source:
    if data is None:
        data = read_bytes(path)
    bom = codecs.BOM_UTF8 if data.startswith(codecs.BOM_UTF8) else b""
    body = data[len(bom):]
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AdvisorError(f"{path}: not UTF-8 (byte {exc.start}); save the file as UTF-8 and run again") from None
    try:
        tree = pysource.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise AdvisorError(f"{path}:{exc.lineno}: cannot parse the file ({exc.msg}); fix the syntax error "
                           "and run again") from None
    starts = [0] + [m.end() for m in re.finditer(rb"\n", body)]
    return Source(path, data, bom, body, tree, starts, "\r\n" if b"\r\n" in body else "\n")


def triton_names(tree: ast.Module) -> tuple[set[str], set[str], set[str]]:
    """Names the file binds to the triton module, to triton.autotune and to triton.Config."""
    modules, autotunes, configs = {"triton"}, {"autotune"}, {"Config"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "triton" and alias.asname:
                    modules.add(alias.asname)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "triton":
            for alias in node.names:
                if alias.name == "autotune":
                    autotunes.add(alias.asname or alias.name)
                elif alias.name == "Config":
                    configs.add(alias.asname or alias.name)
    return modules, autotunes, configs


def _is_named(func: ast.AST, attr: str, names: set[str]) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == attr) or (isinstance(func, ast.Name) and func.id in names)


@dataclass
class Element:
    node: ast.expr
    config: Config | None  # None: not a literal triton.Config
    plain: bool  # no num_ctas / maxnreg / pre_hook / ir_override beyond their defaults
    positional: bool  # num_warps and num_stages given positionally


def _parse_element(src: Source, node: ast.expr, config_names: set[str]) -> Element:
    not_literal = Element(node, None, False, False)
    if not isinstance(node, ast.Call) or not _is_named(node.func, "Config", config_names):
        return not_literal
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        return not_literal
    if len(node.args) > len(_CONFIG_ARGS):
        return not_literal
    given: dict[str, ast.expr] = dict(zip(_CONFIG_ARGS, node.args, strict=False))
    for keyword in node.keywords:
        if keyword.arg in given or keyword.arg not in _CONFIG_ARGS:
            return not_literal
        given[keyword.arg] = keyword.value
    if "kwargs" not in given:
        return not_literal
    values: dict[str, Any] = {}
    for name, value_node in given.items():
        if name in ("pre_hook", "ir_override") and not (isinstance(value_node, ast.Constant)
                                                         and value_node.value is None):
            values[name] = object()  # a callable or an override: never equal to a plain config
            continue
        if name == "kwargs" and isinstance(value_node, ast.Call) and isinstance(value_node.func, ast.Name) \
                and value_node.func.id == "dict" and not value_node.args:
            try:
                values[name] = {k.arg: ast.literal_eval(k.value) for k in value_node.keywords if k.arg}
            except ValueError:
                return not_literal
            if len(values[name]) != len(value_node.keywords):
                return not_literal
            continue
        try:
            values[name] = ast.literal_eval(value_node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return not_literal
    params = values.pop("kwargs")
    if not isinstance(params, dict):
        return not_literal
    try:
        config = Config(params, values.pop("num_warps", 4), values.pop("num_stages", 3))
    except AdvisorError as exc:
        raise AdvisorError(f"{src.where(node)}: this triton.Config is not valid ({exc}); fix it and run again") \
            from None
    plain = all(values.get(k, d) == d for k, d in _CONFIG_EXTRA_DEFAULTS.items())
    return Element(node, config, plain, len(node.args) >= 3)


@dataclass
class Target:
    kernel: str
    decorator: ast.Call
    list_node: ast.List
    via: str | None  # the module-level name the list is bound to, when configs=NAME
    shared_with: list[str]  # other autotuned kernels using the same module-level list


def _autotuned(src: Source) -> dict[str, list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.Call]]]:
    _, autotune_names, _ = triton_names(src.tree)
    found: dict[str, list] = {}
    for node in ast.walk(src.tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and _is_named(dec.func, "autotune", autotune_names):
                    found.setdefault(node.name, []).append((node, dec))
    return found


def _configs_arg(src: Source, kernel: str, dec: ast.Call) -> ast.expr:
    for keyword in dec.keywords:
        if keyword.arg == "configs":
            return keyword.value
    if dec.args and not isinstance(dec.args[0], ast.Starred):
        return dec.args[0]
    raise AdvisorError(f"{src.where(dec)}: the @triton.autotune of {kernel} has no configs=[...] list; "
                       "give it one and run again")


def _computed(src: Source, kernel: str, node: ast.AST, why: str = "") -> AdvisorError:
    snippet = src.text(node)
    if len(snippet) > 60 or "\n" in snippet:
        snippet = snippet.split("\n")[0][:57] + "..."
    return AdvisorError(f"{src.where(node)}: the autotune configs of {kernel} are computed ({snippet}){why}, not a "
                        "list literal, so they cannot be edited safely; add the configs by hand or make the list "
                        "a literal")


def _walk_scope(node: ast.AST):
    """ast.walk that stays in the enclosing scope: no function, lambda, class or comprehension bodies."""
    todo = [node]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef
                              | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
                todo.append(child)


def _module_list(src: Source, kernel: str, name_node: ast.Name) -> ast.List:
    """The module-level list literal `NAME = [...]` that `configs=NAME` refers to, or a refusal."""
    name = name_node.id
    bindings: list[ast.AST] = []
    for stmt in src.tree.body:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name) and sub.id == name:
                        bindings.append(stmt)
        elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
            if isinstance(stmt.target, ast.Name) and stmt.target.id == name:
                bindings.append(stmt)
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and stmt.name == name:
            bindings.append(stmt)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            if any((a.asname or a.name.split(".")[0]) == name for a in stmt.names):
                bindings.append(stmt)
        elif any(isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, ast.Store)
                 for sub in _walk_scope(stmt)):  # for-loops, with-blocks, ifs binding the name at module level
            bindings.append(stmt)
    if not bindings:
        raise _computed(src, kernel, name_node, f"; {name} is not defined in this file")
    if len(bindings) > 1:
        raise _computed(src, kernel, name_node, f"; {name} is assigned {len(bindings)} times "
                                                f"(lines {number_list(b.lineno for b in bindings)})")
    stmt = bindings[0]
    value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            or isinstance(stmt, ast.AnnAssign)) or not isinstance(value, ast.List):
        raise _computed(src, kernel, value if value is not None else stmt, f" by {name} at line {stmt.lineno}")
    for sub in ast.walk(src.tree):  # anything that changes the list after it is built
        changed = (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                   and isinstance(sub.func.value, ast.Name) and sub.func.value.id == name
                   and sub.func.attr in _MUTATING_METHODS)
        changed |= (isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id == name
                    and isinstance(sub.ctx, ast.Store | ast.Del))
        changed |= isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Name) and sub.target.id == name
        changed |= isinstance(sub, ast.Global) and name in sub.names
        if changed:
            raise _computed(src, kernel, name_node, f"; {name} is changed at line {sub.lineno}")
    return value


def find_target(src: Source, kernel: str | None) -> Target:
    found = _autotuned(src)
    if not found:
        raise AdvisorError(f"{src.path}: no @triton.autotune kernel in this file; name the file that defines the "
                           "autotuned kernel")
    if kernel is None:
        if len(found) > 1:
            raise AdvisorError(f"{src.path}: {len(found)} autotuned kernels ({', '.join(found)}); name the one "
                               "to edit")
        kernel = next(iter(found))
    if kernel not in found:
        defined = any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == kernel
                      for n in ast.walk(src.tree))
        if defined:
            raise AdvisorError(f"{src.path}: kernel {kernel} has no @triton.autotune(configs=[...]); autotuned "
                               f"kernels here: {', '.join(found)}")
        raise AdvisorError(f"{src.path}: no kernel {kernel}; autotuned kernels here: {', '.join(found)}")
    if len(found[kernel]) > 1:
        raise AdvisorError(f"{src.path}: {kernel} is defined {len(found[kernel])} times with @triton.autotune "
                           f"(lines {number_list(f.lineno for f, _ in found[kernel])}); edit the list by hand")
    func, dec = found[kernel][0]
    value = _configs_arg(src, kernel, dec)
    via, shared = None, []
    if isinstance(value, ast.Name):
        if func not in src.tree.body:
            raise _computed(src, kernel, value, f"; {value.id} in a kernel defined inside a function or class")
        via = value.id
        list_node = _module_list(src, kernel, value)
        for other, pairs in found.items():
            if other != kernel and any(isinstance(v := _configs_arg(src, other, d), ast.Name) and v.id == via
                                       for _, d in pairs):
                shared.append(other)
    elif isinstance(value, ast.List):
        list_node = value
    else:
        raise _computed(src, kernel, value)
    return Target(kernel, dec, list_node, via, shared)


def list_elements(src: Source, target: Target) -> list[Element]:
    _, _, config_names = triton_names(src.tree)
    return [_parse_element(src, e, config_names) for e in target.list_node.elts]


def literal_configs(src: Source, target: Target, elements: list[Element], why: str) -> list[Config]:
    for element in elements:
        if element.config is None:
            raise AdvisorError(f"{src.where(element.node)}: an autotune config of {target.kernel} is not a literal "
                               f"triton.Config({{...}}, num_warps=..., num_stages=...), so {why}; write it out as "
                               "one")
    return [e.config for e in elements]


def read_autotune_configs(path: str | os.PathLike, kernel: str | None = None) -> list[tuple[Config, int]]:
    """A kernel's `@triton.autotune` configs with the 1-based line each starts on.

    num_ctas, maxnreg and pre_hook are not part of `Config` and are left out.
    """
    src = load_source(Path(path))
    target = find_target(src, kernel)
    elements = list_elements(src, target)
    configs = literal_configs(src, target, elements, "the autotune space cannot be read")
    return [(c, e.node.lineno) for c, e in zip(configs, elements, strict=True)]


