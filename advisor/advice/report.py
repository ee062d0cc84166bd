"""The report formats of `advisor suggest`: text (a rich table), json, github (workflow annotations at
the config's line) and sarif (SARIF 2.1.0).

Two kinds of finding, each exit code 1 (see the CLI): a launch whose current config cannot run on the
GPU (rule TA002 "config-cannot-run", an error), and a launch where another config gains more than
--min-speedup (rule TA001 "config-speedup", a warning).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from advisor.advice.search import Advice

RULES = {
    "TA001": ("config-speedup", "A config predicted (or measured) to be faster exists for this launch"),
    "TA002": ("config-cannot-run", "The current config does not fit the GPU (shared memory, registers)"),
}
_CANNOT_RUN, _SPEEDUP = "TA002", "TA001"

LABEL_LEGEND = ("config labels: M, N, K = BLOCK_SIZE_M/N/K (BLOCK_M/N/K) tile sizes, G = GROUP_SIZE_M, "
                "w = num_warps, s = num_stages; other parameters as NAME=value")
HEADROOM_NOTE = ("headroom: the current config's time over its ceiling (the least time the GPU's pipelines "
                 "need for the launch's work); 2.00x means it runs at half the speed the hardware allows")


def is_finding(advice: Advice, min_speedup: float) -> bool:
    """A launch to report: its config cannot run, or another config gains more than `min_speedup`."""
    return advice.cannot_run is not None or advice.gains(min_speedup)


def _rule(advice: Advice) -> str:
    return _CANNOT_RUN if advice.cannot_run else _SPEEDUP


def _rel(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _how(a: Advice) -> str:
    """What the verdict rests on: timings of this run, a measured-best record it keeps, or the model."""
    return "measured" if a.measured else a.basis


def message(a: Advice) -> str:
    if a.cannot_run:
        fix = ("no config searched can run either" if a.best.config == a.current.config else
               f"use {a.best.config.label()} ({a.time_of(a.best):.1f} us {_how(a)})")
        return (f"{a.subject.label}: {a.current.config.label()} cannot run on {a.subject.spec.name}: "
                f"{a.cannot_run}; {fix}")
    return (f"{a.subject.label}: {a.current.config.label()} -> {a.best.config.label()}, {a.speedup:.2f}x "
            f"{_how(a)} on {a.subject.spec.name} ({a.time_of(a.current):.1f} -> {a.time_of(a.best):.1f} us); "
            f"bound by {a.current.ceiling.binding}; {a.why}")


def _finite(value):
    """JSON has no infinity or NaN: a number that is not finite (the time of a config that cannot run)
    becomes null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def to_json(advices: Sequence[Advice], min_speedup: float) -> str:
    launches = [dict(a.to_json(), gains=a.gains(min_speedup), cannot_run=a.cannot_run) for a in advices]
    return json.dumps(_finite({"min_speedup": min_speedup, "launches": launches}), indent=2, allow_nan=False)


def _escape_data(text: str) -> str:
    """A workflow command's message: %, CR and LF are escaped (GitHub's workflow-command rules)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    """A workflow command's property value: also ':' and ',' (engine config file names hold commas)."""
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def to_github(advices: Sequence[Advice], min_speedup: float) -> str:
    lines = []
    for a in advices:
        if not is_finding(a, min_speedup):
            continue
        loc = a.subject.location
        where = f"file={_escape_property(_rel(loc.path))},line={loc.line}," if loc else ""
        if a.cannot_run:
            lines.append(f"::error {where}title=triton-advisor config-cannot-run::{_escape_data(message(a))}")
        else:
            lines.append(f"::warning {where}title=triton-advisor {a.speedup:.2f}x::{_escape_data(message(a))}")
    return "\n".join(lines)


def to_sarif(advices: Sequence[Advice], min_speedup: float) -> str:
    from advisor import __version__

    results = []
    for a in advices:
        if not is_finding(a, min_speedup):
            continue
        props = {"current": a.current.config.to_dict(), "suggested": a.best.config.to_dict(),
                 "launch": a.subject.label, "gpu": a.subject.spec.name,
                 "basis": _how(a)}
        if a.cannot_run:
            result = {"ruleId": _CANNOT_RUN, "level": "error", "message": {"text": message(a)},
                      "properties": {**props, "reason": a.cannot_run}}
        else:
            result = {"ruleId": _SPEEDUP, "level": "warning", "message": {"text": message(a)},
                      "properties": {**props, "speedup": round(a.speedup, 4)}}
        loc = a.subject.location
        if loc:
            result["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": _rel(loc.path)},
                                                         "region": {"startLine": loc.line}}}]
        results.append(result)
    rules = [{"id": rid, "name": name, "shortDescription": {"text": text}} for rid, (name, text) in RULES.items()]
    log = {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0",
           "runs": [{"tool": {"driver": {"name": "triton-advisor", "version": __version__,
                                         "informationUri": "https://github.com/triton-advisor/triton-advisor",
                                         "rules": rules}},
                     "results": results}]}
    return json.dumps(_finite(log), indent=2, allow_nan=False)


def _common_prefix(labels: Sequence[str]) -> str:
    """The words every label starts with (a preset and TP size, a kernel name), to name once in the title."""
    if len(labels) < 2:
        return ""
    words = [label.split(" ") for label in labels]
    common = []
    for column in zip(*words, strict=False):
        if len(set(column)) != 1:
            break
        common.append(column[0])
    if len(common) == min(len(w) for w in words):  # leave every row at least one word of its own
        common = common[:-1]
    return " ".join(common)


def render_text(advices: Sequence[Advice], min_speedup: float, width: int | None = None) -> None:
    """A table readable at 80 columns: labels wrap at their spaces, numbers never do; the GPU is named
    and the times say whether they were predicted or measured; notes below explain the columns."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console(width=width) if width else Console()
    gpus = ", ".join(dict.fromkeys(a.subject.spec.name for a in advices)) or "no GPU"
    measured = any(a.measured for a in advices)
    times = "measured us (predicted where not timed)" if measured else "predicted us"
    prefix = _common_prefix([a.subject.label for a in advices])
    title = f"triton-advisor suggest: {prefix + ' ' if prefix else ''}on {gpus}, {times}"
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, title_justify="left")
    for col, justify, number in (("launch", "left", False), ("current", "left", False), ("us", "right", True),
                                 ("suggested", "left", False), ("us", "right", True), ("gain", "right", True),
                                 ("bound", "left", True), ("head-\nroom", "right", True)):
        table.add_column(col, justify=justify, no_wrap=number, overflow="ellipsis" if number else "fold",
                         ratio=None if number else 1)
    for a in advices:
        label = a.subject.label[len(prefix):].strip() if prefix else a.subject.label
        mark = "bold" if is_finding(a, min_speedup) else None
        if a.cannot_run:
            table.add_row(label, a.current.config.label(), "can't run", a.best.config.label(),
                          "-" if a.best.config == a.current.config else f"{a.time_of(a.best):.1f}", "-",
                          "-", "-", style=mark)
            continue
        table.add_row(label, a.current.config.label(), f"{a.time_of(a.current):.1f}",
                      a.best.config.label(), f"{a.time_of(a.best):.1f}",
                      f"{a.speedup:.2f}x" + ("*" if _how(a) == "measured" else ""),
                      a.current.ceiling.binding, f"{a.headroom:.2f}x", style=mark)
    console.print(table)
    findings = [a for a in advices if is_finding(a, min_speedup)]
    console.print(f"{len(findings)} finding(s): a gain over {min_speedup:.2f}x (bold) or a config that cannot run",
                  highlight=False, markup=False)
    for a in advices:
        if is_finding(a, min_speedup) or a.basis == "measured":  # a measured config kept: say why
            loc = a.subject.location
            console.print(f"- {a.subject.label}: {a.why}" + (f" [{_rel(loc.path)}:{loc.line}]" if loc else ""),
                          highlight=False, markup=False)
            for note in a.notes:
                console.print(f"  note: {note}", highlight=False, markup=False)
    starred = ("*: the verdict rests on measurements on this GPU, " if any(_how(a) == "measured" for a in advices)
               else "")
    console.print(f"gain: current time over suggested ({starred}otherwise on the model's predictions); "
                  f"{HEADROOM_NOTE}; bound: the binding pipeline of the current config; {LABEL_LEGEND}.",
                  highlight=False, markup=False, style="dim")
    if measured:
        console.print(f"timed on this GPU: {sum(a.measured for a in advices)} configs", highlight=False)
