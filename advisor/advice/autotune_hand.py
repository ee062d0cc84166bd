"""`advisor apply` on an autotune list built by code (`configs=get_cuda_autotune_config()`, a list
comprehension): what a person changes, exactly, since the advisor does not rewrite code.

A list built by code is evaluated for the space (`advisor.capture.autotune_space`); a config of the
suggestion that the list already holds needs no change (the autotuner times every config of its list on
the GPU, as for a literal list). For the others, a `HandEdit` says where the list is written -- the
literal list of `triton.Config(...)` calls the building code returns (the function and its lines), else
the expression that builds it -- and gives each config as a `triton.Config(...)` line in the file's own
style (its name for triton.Config, its quotes, keyword or positional warps/stages), ready to paste.

Why not edit the building function's list the way a literal `configs=[...]` is edited: the function may
be shared (other kernels, other backends behind an `if is_cuda()`), and which of several lists it
returns depends on code the advisor would have to run to know; a person sees that at a glance.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

from advisor.advice.autotune_edit import _config_call, _style
from advisor.advice.autotune_list import Element, Source, load_source, triton_names
from advisor.advice.autotune_list import _parse_element as parse_element
from ceilings.errors import AdvisorError
from ceilings.launch import Config


@dataclass(frozen=True)
class HandEdit:
    """A change the advisor leaves to a person: the configs to add to a list built by code."""

    path: Path
    line: int            # where to add them: inside the literal list, else the building expression
    kernel: str
    where: str           # the list in words: "the list get_cuda_autotune_config() returns (lines 19-28)"
    configs: tuple[Config, ...]
    lines: tuple[str, ...]  # each config as a `triton.Config(...)` call to paste, in the file's style

    def message(self) -> str:
        """One line (an AdvisorError's form): the file and line, the list, and the configs to paste."""
        return (f"{self.path}:{self.line}: the autotune configs of {self.kernel} are built by code, which advisor "
                f"does not rewrite; add {'; '.join(self.lines)} to {self.where}")

    def text(self) -> str:
        """Several lines for the terminal: where, then each config on its own line, indented, to paste."""
        head = (f"{self.path}:{self.line}: add to {self.where} (the autotune configs of {self.kernel}, built by "
                "code, which advisor does not rewrite):")
        return head + "".join(f"\n    {line}," for line in self.lines)


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _enclosing_function(node: ast.AST, parents: dict) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return node
    return None


def _literal_lists(src: Source) -> list[tuple[ast.List, list[Element]]]:
    """Every list literal whose elements are all plain literal triton.Config calls."""
    _, _, config_names = triton_names(src.tree)
    out = []
    for node in ast.walk(src.tree):
        if isinstance(node, ast.List) and node.elts:
            elements = [parse_element(src, e, config_names) for e in node.elts]
            if all(e.config is not None and e.plain for e in elements):
                out.append((node, elements))
    return out


def _space_list(src: Source, space: list[Config]) -> tuple[ast.List, list[Element]] | None:
    """The literal list the building code returns: the one holding most of the space's configs."""
    best, best_overlap = None, 0
    for node, elements in _literal_lists(src):
        overlap = sum(1 for e in elements if e.config in space)
        if overlap > best_overlap:
            best, best_overlap = (node, elements), overlap
    return best


def _list_words(src: Source, node: ast.List) -> str:
    owner = _enclosing_function(node, _parents(src.tree))
    span = f"lines {node.lineno}-{node.end_lineno}" if node.end_lineno != node.lineno else f"line {node.lineno}"
    return f"the list {owner.name}() returns ({span})" if owner is not None else f"the list at {span}"


def space_list_line(path: str | os.PathLike, space: list[Config]) -> tuple[int, str] | None:
    """Where the configs of a list built by code are written as literals (the line and those words), for
    annotations; None when no literal list holds them (a comprehension)."""
    src = load_source(Path(path))
    best = _space_list(src, space)
    return None if best is None else (best[0].lineno, _list_words(src, best[0]))


def plan_by_hand(path: str | os.PathLike, kernel: str, configs: list[Config], space: list[Config],
                 built_line: int, built_what: str) -> HandEdit | None:
    """The hand edit that puts `configs` into the list built by code (`space` is what it evaluates to,
    built at `built_line`, `built_what` in words); None when the list already holds them all."""
    path = Path(path)
    missing = [c for c in dict.fromkeys(configs) if c not in space]
    if not missing:
        return None
    src = load_source(path)
    best = _space_list(src, space)
    if best is not None:
        node, elements = best
        func, quote, positional = _style(src, elements)
        where = _list_words(src, node)
        line = node.lineno
    else:  # a comprehension or other code: no list of literal configs to add to
        func, quote, positional = _style(src, [])
        where = f"{built_what} (line {built_line}): make it also yield these configs, or append them to it"
        line = built_line
    lines = tuple(_config_call(c, func, quote, positional) for c in missing)
    return HandEdit(path, line, kernel, where, tuple(missing), lines)


def require_by_hand(edits: list[HandEdit]) -> None:
    """For a caller that takes no hand edits (the TUI's apply): the first as a one-line error."""
    if edits:
        raise AdvisorError(edits[0].message())
