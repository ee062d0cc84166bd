"""`advisor apply`'s file editing: put chosen configs where a project keeps them.

Two kinds of target:

* a serving engine's fused-MoE JSON file (`E=..,N=..,device_name=....json`, the layout of
  `kernels.moe_configs`; the project's own `kernels/configs/*.json` are the same files): entries
  added or replaced by token count M, keys in numeric order, written in the file's own indent;
* the `configs=[...]` list of a kernel's `@triton.autotune(...)` in Python source: a minimal edit
  of the list's span, found with `ast`, every byte outside it kept.

Planning reads the file once and returns an `Edit` (old bytes, new bytes, the digest of what was
read); nothing touches the disk until `write`, which refuses when the file changed since it was
read, does nothing when the edit changes nothing (re-running is idempotent), and otherwise keeps a
`.bak` of the old bytes and replaces the file atomically. `rollback` puts the `.bak` back.
Every refusal is an `AdvisorError` naming the file (and line) and the fix, with nothing written.
"""

from __future__ import annotations

import ast
import codecs
import difflib
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ceilings.errors import AdvisorError
from ceilings.files import default_mode, write_atomic
from ceilings.launch import Config
from kernels.moe_configs import ConfigTable, parse_config_text

# triton.Config(kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None, pre_hook=None, ir_override=None)
_CONFIG_ARGS = ("kwargs", "num_warps", "num_stages", "num_ctas", "maxnreg", "pre_hook", "ir_override")
# Arguments whose non-default values make a triton.Config more than a `Config` can say.
_CONFIG_EXTRA_DEFAULTS = {"num_ctas": 1, "maxnreg": None, "pre_hook": None, "ir_override": None}
_MUTATING_METHODS = {"append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse"}


def _digest(data: bytes | None) -> str:
    """sha256 of a file's bytes; a file that does not exist digests as the empty string."""
    return "" if data is None else hashlib.sha256(data).hexdigest()


@dataclass
class Edit:
    """One planned change of one file: its bytes as read, its new bytes and the digest of what was read."""

    path: Path
    before: bytes | None  # None: the file does not exist yet
    after: bytes
    digest: str  # sha256 of `before` at read time ("" when the file did not exist)
    what: str  # one line: what the edit does

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        """A unified diff of the edit (`a/<path>`, `b/<path>`; `/dev/null` for a new file), or ""."""
        if not self.changed:
            return ""
        old = [] if self.before is None else self.before.decode("utf-8", "replace").splitlines(keepends=True)
        new = self.after.decode("utf-8", "replace").splitlines(keepends=True)
        name = str(self.path).lstrip("/")
        lines = difflib.unified_diff(old, new, "/dev/null" if self.before is None else f"a/{name}", f"b/{name}")
        out = []
        for line in lines:
            if line.endswith("\n"):
                out.append(line)
            else:
                out.append(line + "\n\\ No newline at end of file\n")
        return "".join(out)


# ------------------------------------------------------------------------------------------------
# Reading, writing, backups.
# ------------------------------------------------------------------------------------------------
def _read(path: Path, missing_ok: bool = False) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        if missing_ok:
            return None
        raise AdvisorError(f"{path} does not exist; check the path") from None
    except IsADirectoryError:
        raise AdvisorError(f"{path} is a folder; name a file") from None
    except OSError as exc:
        raise AdvisorError(f"{path} cannot be read ({exc.strerror or exc.__class__.__name__}); "
                           "check its permissions") from None




def backup_path(path: str | os.PathLike) -> Path:
    """Where `write` keeps the old bytes: the file's path plus `.bak`."""
    path = Path(path)
    return path.with_name(path.name + ".bak")


def write(edit: Edit, backup: bool = True) -> Path | None:
    """Write `edit` atomically and return its `.bak` path.

    Refuses (nothing written) when the file's bytes are no longer those the edit was planned on.
    Returns None and writes nothing when the edit changes nothing, and None after creating a new
    file (there are no old bytes to keep) or when `backup` is False.
    """
    target = Path(os.path.realpath(edit.path))  # write through a symlink, keep the link
    current = _read(target, missing_ok=True)
    if _digest(current) != edit.digest:
        raise AdvisorError(f"{edit.path} changed since it was read; run again")
    if not edit.changed:
        return None
    try:
        mode = os.stat(target).st_mode & 0o7777 if current is not None else default_mode()
        saved = None
        if backup and current is not None:
            saved = backup_path(target)
            write_atomic(saved, current, mode)
        write_atomic(target, edit.after, mode)
    except OSError as exc:
        raise AdvisorError(f"{edit.path} cannot be written ({exc.strerror or exc.__class__.__name__}); "
                           "check the folder's permissions and free space") from None
    return saved


def rollback(path: str | os.PathLike, backup: str | os.PathLike) -> None:
    """Put a file back from its `.bak` (the path `write` returned), atomically, keeping the file's mode.

    The `.bak` stays. A file that `write` created has no backup: delete it to undo.
    """
    path, backup = Path(path), Path(backup)
    old = _read(backup, missing_ok=True)
    if old is None:
        raise AdvisorError(f"backup {backup} of {path} does not exist; nothing to restore")
    target = Path(os.path.realpath(path))
    try:
        mode = os.stat(target).st_mode & 0o7777 if target.exists() else os.stat(backup).st_mode & 0o7777
        write_atomic(target, old, mode)
    except OSError as exc:
        raise AdvisorError(f"{path} cannot be restored from {backup} ({exc.strerror or exc.__class__.__name__}); "
                           f"copy {backup} over it by hand") from None


def check_fits(configs: Iterable[Config], max_shared_bytes: int,
               precheck: Callable[[Config, int], str | None]) -> None:
    """Refuse configs the GPU cannot run: `precheck(config, max_shared_bytes)` (the kernel's resource
    check, e.g. `kernels.fused_moe.resource_precheck`) returns a reason, or None when it fits."""
    problems = []
    for config in configs:
        try:
            reason = precheck(config, max_shared_bytes)
        except KeyError as exc:
            reason = f"it has no parameter {exc.args[0]}, which this kernel's resource check needs"
        if reason:
            problems.append(f"{config.label()}: {reason}")
    if problems:
        what = "config does" if len(problems) == 1 else f"{len(problems)} configs do"
        raise AdvisorError(f"{what} not fit the GPU ({max_shared_bytes} B shared memory), nothing written: "
                           + "; ".join(problems))


# ------------------------------------------------------------------------------------------------
# Serving-engine fused-MoE JSON files.
# ------------------------------------------------------------------------------------------------
def _json_indent(text: str) -> int | str | None:
    """The indent a `json.dumps(..., indent=...)` file was written with; None for a one-line file."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            unit = line[: len(line) - len(stripped)]
            return len(unit) if set(unit) == {" "} else unit
    return None


def _no_duplicate_keys(where: str):
    def hook(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise AdvisorError(f"{where}: key {key!r} appears twice; keep one and run again")
            seen.add(key)
        return dict(pairs)
    return hook


def _m_list(ms: Iterable[int]) -> str:
    return ", ".join(str(m) for m in ms)


def plan_engine_json(path: str | os.PathLike, entries: Mapping[int, Config]) -> Edit:
    """Add or replace the entries for the given token counts M in an engine fused-MoE config file.

    Entries of other M keep their values (key order included); keys come out in numeric order, after
    the file's other top-level keys (`"triton_version"`), written with the file's indent and final
    newline. A new file gets the engines' layout (`json.dump(indent=4)` and a newline) with token-count
    keys only, the format every engine release reads. An M already holding an equal config is left as it is, so a
    second run changes nothing.
    """
    path = Path(path)
    if not entries:
        raise AdvisorError(f"{path}: no configs to write; give at least one token count M and its config")
    for m in entries:
        if not isinstance(m, int) or isinstance(m, bool) or m < 1:
            raise AdvisorError(f"{path}: token count {m!r} must be a positive integer")
    before = _read(path, missing_ok=True)
    where = str(path)
    extras: dict[str, Any] = {}
    numbered: dict[int, tuple[str, Any]] = {}  # M -> (key as written, value as read)
    if before is None:
        indent: int | str | None = 4
        final_newline, crlf = True, False
    else:
        try:
            text = before.decode("utf-8")
        except UnicodeDecodeError:
            raise AdvisorError(f"{where}: not UTF-8 text; is this an engine config file?") from None
        try:
            obj = json.loads(text, object_pairs_hook=_no_duplicate_keys(where))
        except json.JSONDecodeError as exc:
            raise AdvisorError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno}); fix or regenerate "
                               "the file") from None
        if not isinstance(obj, dict):
            raise AdvisorError(f"{where}: top level must be an object of token count -> config")
        if any(k.isdigit() or isinstance(v, dict) for k, v in obj.items()):
            existing = parse_config_text(text, where)  # the module's checks: every entry complete and valid
        else:
            existing = ConfigTable({}, dict(obj))  # only `"triton_version"`-like keys so far
        for key, value in obj.items():
            if key.isdigit():
                if int(key) in numbered:
                    raise AdvisorError(f"{where}: token count {int(key)} appears twice (key {key!r}); keep one")
                numbered[int(key)] = (key, value)
            else:
                extras[key] = value
        indent = _json_indent(text)
        final_newline, crlf = text.endswith("\n"), "\r\n" in text
        if all(m in existing.configs and existing.configs[m] == c for m, c in entries.items()):
            return Edit(path, before, before, _digest(before), _engine_what(path, entries, before is None))
    for m, config in entries.items():
        try:
            value = config.to_engine_entry()
        except AdvisorError as exc:
            raise AdvisorError(f"{where}: cannot write M={m}: {exc}") from None
        if m in numbered:
            key, old = numbered[m]
            if Config.from_engine_entry(old, f"{where}: entry {key!r}") == config:
                continue  # equal: keep the entry as written
        numbered[m] = (str(m), value)
    obj = dict(extras)
    for m in sorted(numbered):
        key, value = numbered[m]
        obj[key] = value
    # kernels.moe_configs' writer (and the engines'): json.dumps with the indent, then a newline.
    text = json.dumps(obj, indent=indent) + ("\n" if final_newline else "")
    if crlf:
        text = text.replace("\n", "\r\n")
    return Edit(path, before, text.encode("utf-8"), _digest(before), _engine_what(path, entries, before is None))


def _engine_what(path: Path, entries: Mapping[int, Config], new: bool) -> str:
    n = len(entries)
    what = f"{n} entr{'y' if n == 1 else 'ies'} of {path.stem} (M={_m_list(sorted(entries))})"
    return what + (", new file" if new else "")


# ------------------------------------------------------------------------------------------------
# @triton.autotune(configs=[...]) lists in Python source.
# ------------------------------------------------------------------------------------------------
@dataclass
class _Source:
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


def _load_source(path: Path, data: bytes | None = None) -> _Source:
    if data is None:
        data = _read(path)
    bom = codecs.BOM_UTF8 if data.startswith(codecs.BOM_UTF8) else b""
    body = data[len(bom):]
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AdvisorError(f"{path}: not UTF-8 (byte {exc.start}); save the file as UTF-8 and run again") from None
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise AdvisorError(f"{path}:{exc.lineno}: cannot parse the file ({exc.msg}); fix the syntax error "
                           "and run again") from None
    starts = [0] + [m.end() for m in re.finditer(rb"\n", body)]
    return _Source(path, data, bom, body, tree, starts, "\r\n" if b"\r\n" in body else "\n")


def _triton_names(tree: ast.Module) -> tuple[set[str], set[str], set[str]]:
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
class _Element:
    node: ast.expr
    config: Config | None  # None: not a literal triton.Config
    plain: bool  # no num_ctas / maxnreg / pre_hook / ir_override beyond their defaults
    positional: bool  # num_warps and num_stages given positionally


def _parse_element(src: _Source, node: ast.expr, config_names: set[str]) -> _Element:
    not_literal = _Element(node, None, False, False)
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
    return _Element(node, config, plain, len(node.args) >= 3)


@dataclass
class _Target:
    kernel: str
    decorator: ast.Call
    list_node: ast.List
    via: str | None  # the module-level name the list is bound to, when configs=NAME
    shared_with: list[str]  # other autotuned kernels using the same module-level list


def _autotuned(src: _Source) -> dict[str, list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.Call]]]:
    _, autotune_names, _ = _triton_names(src.tree)
    found: dict[str, list] = {}
    for node in ast.walk(src.tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and _is_named(dec.func, "autotune", autotune_names):
                    found.setdefault(node.name, []).append((node, dec))
    return found


def _configs_arg(src: _Source, kernel: str, dec: ast.Call) -> ast.expr:
    for keyword in dec.keywords:
        if keyword.arg == "configs":
            return keyword.value
    if dec.args and not isinstance(dec.args[0], ast.Starred):
        return dec.args[0]
    raise AdvisorError(f"{src.where(dec)}: the @triton.autotune of {kernel} has no configs=[...] list; "
                       "give it one and run again")


def _computed(src: _Source, kernel: str, node: ast.AST, why: str = "") -> AdvisorError:
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


def _module_list(src: _Source, kernel: str, name_node: ast.Name) -> ast.List:
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
                                                f"(lines {_m_list(b.lineno for b in bindings)})")
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


def _find_target(src: _Source, kernel: str | None) -> _Target:
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
                           f"(lines {_m_list(f.lineno for f, _ in found[kernel])}); edit the list by hand")
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
    return _Target(kernel, dec, list_node, via, shared)


def _elements(src: _Source, target: _Target) -> list[_Element]:
    _, _, config_names = _triton_names(src.tree)
    return [_parse_element(src, e, config_names) for e in target.list_node.elts]


def _literal_configs(src: _Source, target: _Target, elements: list[_Element], why: str) -> list[Config]:
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
    src = _load_source(Path(path))
    target = _find_target(src, kernel)
    elements = _elements(src, target)
    configs = _literal_configs(src, target, elements, "the autotune space cannot be read")
    return [(c, e.node.lineno) for c, e in zip(configs, elements, strict=True)]


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


def _style(src: _Source, elements: list[_Element]) -> tuple[str, str, bool]:
    """The name the file calls triton.Config by, its quote character, and positional warps/stages or not."""
    modules, _, config_names = _triton_names(src.tree)
    first = next((e for e in elements if e.config is not None), None)
    if first is not None:
        func = src.text(first.node.func)
        keys = first.node.args[0] if first.node.args else next(k.value for k in first.node.keywords
                                                                  if k.arg == "kwargs")
        quote = src.text(keys.keys[0])[-1] if isinstance(keys, ast.Dict) and keys.keys else None
        return func, quote if quote in ("'", '"') else _file_quote(src), first.positional
    extra = sorted(config_names - {"Config"})
    if extra:
        func = extra[0]
    elif "Config" in config_names and any(isinstance(n, ast.ImportFrom) and n.module == "triton"
                                          and any(a.name == "Config" and not a.asname for a in n.names)
                                          for n in ast.walk(src.tree)):
        func = "Config"
    else:
        func = f"{sorted(modules - {'triton'})[0] if modules - {'triton'} else 'triton'}.Config"
    return func, _file_quote(src), False


def _file_quote(src: _Source) -> str:
    """The file's usual string quote: the more common of ' and " among its short string literals."""
    counts = {"'": 0, '"': 0}
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.lineno == node.end_lineno:
            head = src.body[src.start(node):src.start(node) + 3].decode("ascii", "replace")
            if head[:1] in counts and head != head[0] * 3:  # not a triple-quoted docstring
                counts[head[0]] += 1
    return '"' if counts['"'] > counts["'"] else "'"


def _indent_of(src: _Source, offset: int) -> str:
    """Leading whitespace of the line holding byte `offset`."""
    start = src.line_start(offset)
    line = src.body[start:offset]
    return line[: len(line) - len(line.lstrip(b" \t"))].decode("ascii")


def _hang(src: _Source, offset: int) -> str:
    """Whitespace that lines a new line up under byte `offset` (tabs kept, anything else a space)."""
    prefix = src.body[src.line_start(offset):offset].decode("utf-8")
    return "".join(c if c == "\t" else " " for c in prefix)


def _starts_line(src: _Source, offset: int) -> bool:
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
    src = _load_source(path)
    target = _find_target(src, kernel)
    kernel = target.kernel
    elements = _elements(src, target)
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
        old = _literal_configs(src, target, elements, "advisor cannot tell which configs are already there")
        plain_old = [e.config for e in elements if e.plain]
        new = [(c, call) for c, call in zip(configs, calls, strict=True) if c not in plain_old]
        expected = [c for c, _ in new] + old
        n = len(new)
        what = f"add {n} config{'' if n == 1 else 's'} to {where}: " + (", ".join(c.label() for c, _ in new)
                                                                           if new else "all already there")
        if not new:
            return Edit(path, src.data, src.data, _digest(src.data), what)
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
            return Edit(path, src.data, src.data, _digest(src.data), what)
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
    return Edit(path, src.data, after, _digest(src.data), what)


def _empty_list_body(src: _Source, open_at: int, texts: list[str]) -> str:
    """`[]` becomes one config per line, indented one level past the line holding the `[`."""
    indent = _indent_of(src, open_at)
    unit = "\t" if indent.startswith("\t") else "    "
    nl = src.newline
    return nl + "".join(f"{indent}{unit}{t},{nl}" for t in texts) + indent


def _check_round_trip(path: Path, after: bytes, kernel: str, expected: list[Config]) -> None:
    """Re-read the edited source: it must parse and hold exactly the expected configs, else nothing is written."""
    try:
        src = _load_source(path, after)
        target = _find_target(src, kernel)
        got = _literal_configs(src, target, _elements(src, target), "")
    except AdvisorError as exc:
        raise AdvisorError(f"{path}: the edit would not read back ({exc}); nothing written, please report "
                           "this") from None
    if got != expected:
        raise AdvisorError(f"{path}: the edit would not hold the expected configs of {kernel}; nothing written, "
                           "please report this")
