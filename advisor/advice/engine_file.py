"""Edits of serving-engine fused-MoE JSON files (`E=..,N=..,device_name=....json`, the layout of
`kernels.moe_configs`; the project's own `kernels/configs/*.json` are the same files).

Entries are added or replaced by token count M, keys in numeric order, in the file's own indent and line
ends. The file's own keys stay: top-level keys that are not token counts, and keys inside a replaced entry
that the new config does not set (a vendor's knobs). A new file holds token counts only (docs/engine-files.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from advisor.advice.edit import Edit, digest, number_list, read_bytes
from ceilings.errors import AdvisorError
from ceilings.launch import Config
from kernels.moe_configs import ConfigTable, parse_config_text


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
    before = read_bytes(path, missing_ok=True)
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
            raise AdvisorError(f"{where}: not valid JSON ({exc.msg}: line {exc.lineno}); fix or regenerate "
                               "the file") from None
        if not isinstance(obj, dict):
            raise AdvisorError(f"{where}: top level must be an object of token count -> config")
        if any((k.isascii() and k.isdigit()) or isinstance(v, dict) for k, v in obj.items()):
            existing = parse_config_text(text, where)  # the module's checks: every entry complete and valid
        else:
            existing = ConfigTable({}, dict(obj))  # only `"triton_version"`-like keys so far
        for key, value in obj.items():
            if key.isascii() and key.isdigit():  # not str.isdigit alone: "²" is a digit int() refuses
                if int(key) in numbered:
                    raise AdvisorError(f"{where}: token count {int(key)} appears twice (key {key!r}); keep one")
                numbered[int(key)] = (key, value)
            else:
                extras[key] = value
        indent = _json_indent(text)
        final_newline, crlf = text.endswith("\n"), "\r\n" in text
        if all(m in existing.configs and existing.configs[m] == c for m, c in entries.items()):
            return Edit(path, before, before, digest(before), _engine_what(path, entries, before is None))
    for m, config in entries.items():
        try:
            value = config.to_engine_entry()
        except AdvisorError as exc:
            raise AdvisorError(f"{where}: cannot write M={m}: {exc}") from None
        if m in numbered:
            key, old = numbered[m]
            if Config.from_engine_entry(old, f"{where}: entry {key!r}") == config:
                continue  # equal: keep the entry as written
            # The entry's own keys stay, in their order (a vendor's knobs the config does not set); the
            # config's values replace theirs.
            value = {**old, **value}
        numbered[m] = (str(m), value)
    obj = dict(extras)
    for m in sorted(numbered):
        key, value = numbered[m]
        obj[key] = value
    # kernels.moe_configs' writer (and the engines'): json.dumps with the indent, then a newline.
    text = json.dumps(obj, indent=indent) + ("\n" if final_newline else "")
    if crlf:
        text = text.replace("\n", "\r\n")
    return Edit(path, before, text.encode("utf-8"), digest(before), _engine_what(path, entries, before is None))


def _engine_what(path: Path, entries: Mapping[int, Config], new: bool) -> str:
    n = len(entries)
    what = f"{n} entr{'y' if n == 1 else 'ies'} of {path.stem} (M={number_list(sorted(entries))})"
    return what + (", new file" if new else "")


