"""A kernel's `@triton.autotune` configs however the file builds them: a function
(`configs=get_cuda_autotune_config()`), a list comprehension, `filter(keep, configs)`.

`advisor.advice.apply.read_autotune_configs` reads literal lists from the source, which is what
`apply` can edit. A list built by code is read here instead: the file is opened as
`ceilings.compile.load_module` opens it (the stand-in environment of `ceilings.standin`, so the
building code runs as it would on the chosen GPU), and the configs are those the kernel's
`Autotuner` object holds. The line given is where the list is built: the def of the function
called, or the `configs=` expression itself, so a person knows what to change.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

from ceilings import pysource
from ceilings.launch import Config


@dataclass(frozen=True)
class BuiltSpace:
    configs: list[Config]
    line: int    # where the list is built (1-based)
    what: str    # how, in words: "the list get_cuda_autotune_config() returns"


def _autotuner_of(obj, kernel: str):
    from triton.runtime.autotuner import Autotuner

    for _ in range(8):
        if isinstance(obj, Autotuner):
            return obj
        obj = getattr(obj, "fn", None)
        if obj is None:
            return None
    return None


def _configs_node(tree: ast.Module, kernel: str) -> ast.expr | None:
    """The `configs` argument of the autotune decorator on `def kernel`: `@triton.autotune(...)`, or a
    library's own autotuner decorator that takes `configs=` (FlagGems' `@libtuner(configs=...)`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == kernel:
            for deco in node.decorator_list:
                if not isinstance(deco, ast.Call):
                    continue
                func = deco.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                for kw in deco.keywords:
                    if kw.arg == "configs":
                        return kw.value
                if name == "autotune":
                    return deco.args[0] if deco.args else None
    return None


def _where(tree: ast.Module, node: ast.expr | None, source: str) -> tuple[int, str]:
    if node is None:
        return 1, "the autotune configs"
    text = ast.get_source_segment(source, node) or "the configs expression"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        for top in tree.body:
            if isinstance(top, ast.FunctionDef) and top.name == node.func.id:
                return top.lineno, f"the list {text} returns"
    if isinstance(node, ast.Name):
        for top in tree.body:
            targets = top.targets if isinstance(top, ast.Assign) else [top.target] if isinstance(
                top, ast.AnnAssign) else []
            if any(isinstance(t, ast.Name) and t.id == node.id for t in targets):
                return top.lineno, f"the list {node.id} is built from"
    return node.lineno, f"the list {' '.join(text.split())[:80]} builds"


def built_autotune_space(source: str | os.PathLike, kernel: str) -> BuiltSpace | None:
    """The autotune configs of `kernel` in `source` as the file builds them; None when the kernel is
    not autotuned (or the file cannot be opened: the caller reports that where it loads the kernel)."""
    from ceilings.compile import load_module
    from ceilings.errors import AdvisorError

    path = Path(source)
    try:
        module = load_module(path)
    except AdvisorError:
        return None
    tuner = _autotuner_of(vars(module).get(kernel), kernel)
    if tuner is None or not tuner.configs:
        return None
    configs = list(dict.fromkeys(Config.from_triton(c) for c in tuner.configs))
    text = path.read_text()
    tree = pysource.parse(text)
    line, what = _where(tree, _configs_node(tree, kernel), text)
    return BuiltSpace(configs, line, what)
