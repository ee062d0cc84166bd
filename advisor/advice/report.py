"""The report formats of `advisor suggest`: text (a rich table), json, github (workflow annotations at
the config's line) and sarif (SARIF 2.1.0). Exit code 1 when some launch `gains` (see the CLI)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from advisor.advice.search import Advice

RULES = {
    "TA001": ("config-speedup", "A config predicted (or measured) to be faster exists for this launch"),
    "TA002": ("config-cannot-run", "The current config does not fit the GPU (shared memory, registers)"),
}


def gains(advice: Advice, min_speedup: float) -> bool:
    return advice.gains(min_speedup)


def _rel(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def message(a: Advice) -> str:
    return (f"{a.subject.label}: {a.current.config.label()} -> {a.best.config.label()}, {a.speedup:.2f}x "
            f"{a.basis} ({a.current.predicted_us:.1f} -> "
            f"{a.best.predicted_us:.1f} us); bound by {a.current.ceiling.binding}; {a.why}")


def to_json(advices: Sequence[Advice], min_speedup: float) -> str:
    return json.dumps({"min_speedup": min_speedup, "launches": [dict(a.to_json(), gains=gains(a, min_speedup))
                                                                for a in advices]}, indent=2)


def _escape_data(text: str) -> str:
    """A workflow command's message: %, CR and LF are escaped (GitHub's workflow-command rules)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    """A workflow command's property value: also ':' and ',' (engine config file names hold commas)."""
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def to_github(advices: Sequence[Advice], min_speedup: float) -> str:
    lines = []
    for a in advices:
        if not gains(a, min_speedup):
            continue
        loc = a.subject.location
        where = f"file={_escape_property(_rel(loc.path))},line={loc.line}," if loc else ""
        lines.append(f"::warning {where}title=triton-advisor {a.speedup:.2f}x::{_escape_data(message(a))}")
    return "\n".join(lines)


def to_sarif(advices: Sequence[Advice], min_speedup: float) -> str:
    from advisor import __version__

    results = []
    for a in advices:
        if not gains(a, min_speedup):
            continue
        result = {"ruleId": "TA001", "level": "warning", "message": {"text": message(a)},
                  "properties": {"speedup": round(a.speedup, 4), "basis": a.basis,
                                 "current": a.current.config.to_dict(),
                                 "suggested": a.best.config.to_dict(), "launch": a.subject.label}}
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
    return json.dumps(log, indent=2)


def render_text(advices: Sequence[Advice], min_speedup: float) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"triton-advisor suggest (gain shown above {min_speedup:.2f}x)", show_lines=False)
    for col, justify in (("launch", "left"), ("current", "left"), ("us", "right"), ("suggested", "left"),
                         ("us", "right"), ("speed-up", "right"), ("bound by", "left"), ("headroom", "right")):
        table.add_column(col, justify=justify)
    for a in advices:
        mark = "bold green" if gains(a, min_speedup) else None
        table.add_row(a.subject.label, a.current.config.label(), f"{a.time_of(a.current):.1f}",
                      a.best.config.label(), f"{a.time_of(a.best):.1f}", f"{a.speedup:.2f}x {a.basis}",
                      a.current.ceiling.binding, f"{a.headroom:.2f}x", style=mark)
    console = Console()
    console.print(table)
    for a in advices:
        if gains(a, min_speedup) or a.basis == "measured":  # a measured config kept: say why
            loc = a.subject.location
            console.print(f"- {a.subject.label}: {a.why}" + (f" [{_rel(loc.path)}:{loc.line}]" if loc else ""),
                          highlight=False, markup=False)
    if any(a.measured for a in advices):
        console.print(f"timed on this GPU: {sum(a.measured for a in advices)} configs", highlight=False)


# ------------------------------------------------------------------------------------------ apply
