"""Editing the `configs=[...]` list of a kernel's `@triton.autotune(...)`: a minimal edit of the list's span
(found by `advisor.advice.autotune_list`), in the file's own style, every byte outside the brackets kept,
and re-read before anything is written.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from advisor.advice.autotune_list import (
    Element,
    Source,
    find_target,
    list_elements,
    literal_configs,
    load_source,
    triton_names,
)
from advisor.advice.edit import Edit, digest
from ceilings.errors import AdvisorError
from ceilings.launch import Config


def _py_value(value: Any, quote: str) -> str:
    if isinstance(value, str):
        text = repr(value)
        if text[0] != quote and quote not in value and "\\" not in text:
            text = quote + text[1:-1] + quote
        return text
    return repr(value)


def _config_call(config: Config, func: str, quote: str, positional: bool) -> str:
    params = ", ".join(f"{quote}{k}{quote}: {_py_value(v, quote)}" for k, v in config.params.items())
    if positional:
        return f"{func}({{{params}}}, {config.num_warps}, {config.num_stages})"
    return f"{func}({{{params}}}, num_warps={config.num_warps}, num_stages={config.num_stages})"


def _style(src: Source, elements: list[Element]) -> tuple[str, str, bool]:
    """The name the file calls triton.Config by, its quote character, and positional warps/stages or not."""
    modules, _, config_names = triton_names(src.tree)
    first = next((e for e in elements if e.config is not None), None)
    if first is not None:
        func = src.text(first.node.func)
        keys = first.node.args[0] if first.node.args else next(k.value for k in first.node.keywords
                                                                  if k.arg == "kwargs")
        quote = src.text(keys.keys[0])[-1] if isinstance(keys, ast.Dict) and keys.keys else None
        return func, quote if quote in ("'", '"') else file_quote(src), first.positional
    extra = sorted(config_names - {"Config"})
    if extra:
        func = extra[0]
    elif "Config" in config_names and any(isinstance(n, ast.ImportFrom) and n.module == "triton"
                                          and any(a.name == "Config" and not a.asname for a in n.names)
                                          for n in ast.walk(src.tree)):
        func = "Config"
    else:
        func = f"{sorted(modules - {'triton'})[0] if modules - {'triton'} else 'triton'}.Config"
    return func, file_quote(src), False


def file_quote(src: Source) -> str:
    """The file's usual string quote: the more common of ' and " among its short string literals."""
    counts = {"'": 0, '"': 0}
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.lineno == node.end_lineno:
            head = src.body[src.start(node):src.start(node) + 3].decode("ascii", "replace")
            if head[:1] in counts and head != head[0] * 3:  # not a triple-quoted docstring
                counts[head[0]] += 1
    return '"' if counts['"'] > counts["'"] else "'"


def _indent_of(src: Source, offset: int) -> str:
    """Leading whitespace of the line holding byte `offset`."""
    start = src.line_start(offset)
    line = src.body[start:offset]
    return line[: len(line) - len(line.lstrip(b" \t"))].decode("ascii")


def _hang(src: Source, offset: int) -> str:
    """Whitespace that lines a new line up under byte `offset` (tabs kept, anything else a space)."""
    prefix = src.body[src.line_start(offset):offset].decode("utf-8")
    return "".join(c if c == "\t" else " " for c in prefix)


def _starts_line(src: Source, offset: int) -> bool:
    return not src.body[src.line_start(offset):offset].strip()


def _dedupe(configs: Iterable[Config]) -> list[Config]:
    out: list[Config] = []
    for config in configs:
        if config not in out:
            out.append(config)
    return out


def plan_autotune(path: str | os.PathLike, kernel: str | None, configs: list[Config],
                  mode: Literal["add", "replace"] = "add") -> Edit:
    """Put `configs` in the `@triton.autotune(configs=[...])` list of `kernel`.

    add: configs not already in the list become its first elements, one per line, in the order given;
    replace: the list's elements become `configs`; comments among the old elements go with them, those
    on the `[` line stay. Nothing outside the list's brackets changes. A list bound to a
    module-level name (`configs=CONFIGS`) is edited where it is written; a computed list is refused.
    """
    path = Path(path)
    if mode not in ("add", "replace"):
        raise AdvisorError(f"apply mode {mode!r} is not known; use add or replace")
    configs = _dedupe(configs)
    if not configs:
        raise AdvisorError(f"{path}: no configs to write; give at least one")
    src = load_source(path)
    target = find_target(src, kernel)
    kernel = target.kernel
    elements = list_elements(src, target)
    func, quote, positional = _style(src, elements)
    calls = [_config_call(c, func, quote, positional) for c in configs]
    lst = target.list_node
    open_at, close_at = src.start(lst), src.end(lst) - 1  # the `[` and the `]`
    nl = src.newline
    where = f"the @triton.autotune list of {kernel}"
    if target.via:
        where += f" ({target.via}, line {lst.lineno}" + (f", shared with {', '.join(target.shared_with)}"
                                                         if target.shared_with else "") + ")"
    labels = ", ".join(c.label() for c in configs)

    if mode == "add":
        old = literal_configs(src, target, elements, "advisor cannot tell which configs are already there")
        plain_old = [e.config for e in elements if e.plain]
        new = [(c, call) for c, call in zip(configs, calls, strict=True) if c not in plain_old]
        expected = [c for c, _ in new] + old
        n = len(new)
        what = f"add {n} config{'' if n == 1 else 's'} to {where}: " + (", ".join(c.label() for c, _ in new)
                                                                           if new else "all already there")
        if not new:
            return Edit(path, src.data, src.data, digest(src.data), what)
        texts = [call for _, call in new]
        if not elements:
            body = _empty_list_body(src, open_at, texts)
            start, end = open_at + 1, close_at
        else:
            first = src.start(elements[0].node)
            if _starts_line(src, first) and lst.lineno < elements[0].node.lineno:
                indent = _indent_of(src, first)
                start = end = src.body.index(b"\n", open_at) + 1  # after the line holding `[`
                body = "".join(f"{indent}{t},{nl}" for t in texts)
            elif lst.lineno != lst.end_lineno:  # `[first,` hanging: line the new ones up with it
                start = end = first
                body = "".join(f"{t},{nl}{_hang(src, first)}" for t in texts)
            else:  # the whole list on one line
                start = end = first
                body = "".join(f"{t}, " for t in texts)
    else:
        readable = all(e.config is not None and e.plain for e in elements)
        if readable and [e.config for e in elements] == configs:
            what = f"replace the {len(configs)} configs of {where}: already {labels}"
            return Edit(path, src.data, src.data, digest(src.data), what)
        expected = configs
        what = (f"replace the {len(elements)} config{'' if len(elements) == 1 else 's'} of {where} "
                f"with {len(configs)}: {labels}")
        if not elements:
            body = _empty_list_body(src, open_at, calls)
            start, end = open_at + 1, close_at
        else:
            start, end = src.start(elements[0].node), src.end(elements[-1].node)
            if _starts_line(src, start) and lst.lineno < elements[0].node.lineno:
                # One element per line: the old elements and the comments among them go, up to the `]`.
                indent = _indent_of(src, start)
                start = src.body.index(b"\n", open_at) + 1
                if _starts_line(src, close_at):
                    comma = "," if b"," in src.body[end:close_at] else ""
                    end = src.line_start(close_at)
                    body = f",{nl}".join(f"{indent}{c}" for c in calls) + f"{comma}{nl}"
                else:  # `...)]`: the `]` closes the last element's line
                    body = f",{nl}".join(f"{indent}{c}" for c in calls)
            elif lst.lineno != lst.end_lineno:
                body = f",{nl}{_hang(src, start)}".join(calls)
            else:
                body = ", ".join(calls)

    after_body = src.body[:start] + body.encode("utf-8") + src.body[end:]
    after = src.bom + after_body
    _check_round_trip(path, after, kernel, expected)
    return Edit(path, src.data, after, digest(src.data), what)


def _empty_list_body(src: Source, open_at: int, texts: list[str]) -> str:
    """`[]` becomes one config per line, indented one level past the line holding the `[`."""
    indent = _indent_of(src, open_at)
    unit = "\t" if indent.startswith("\t") else "    "
    nl = src.newline
    return nl + "".join(f"{indent}{unit}{t},{nl}" for t in texts) + indent


def _check_round_trip(path: Path, after: bytes, kernel: str, expected: list[Config]) -> None:
    """Re-read the edited source: it must parse and hold exactly the expected configs, else nothing is written."""
    try:
        src = load_source(path, after)
        target = find_target(src, kernel)
        got = literal_configs(src, target, list_elements(src, target), "")
    except AdvisorError as exc:
        raise AdvisorError(f"{path}: the edit would not read back ({exc}); nothing written, please report "
                           "this") from None
    if got != expected:
        raise AdvisorError(f"{path}: the edit would not hold the expected configs of {kernel}; nothing written, "
                           "please report this")
