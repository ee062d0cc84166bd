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
    """One finding in words, its caveats appended (a CI annotation shows nothing else of the launch)."""
    if a.cannot_run:
        fix = ("no config searched can run either" if a.best.config == a.current.config else
               f"use {a.best.config.label()} ({a.time_of(a.best):.1f} us {_how(a)})")
        text = (f"{a.subject.label}: {a.current.config.label()} cannot run on {a.subject.spec.name}: "
                f"{a.cannot_run}; {fix}")
    else:
        text = (f"{a.subject.label}: {a.current.config.label()} -> {a.best.config.label()}, {a.speedup:.2f}x "
                f"{_how(a)} on {a.subject.spec.name} ({a.time_of(a.current):.1f} -> {a.time_of(a.best):.1f} us); "
                f"bound by {a.current.ceiling.binding}; {a.why}")
    caveats = a.caveats
    return text + (f". Caveats: {'; '.join(caveats)}" if caveats else "")


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
    from advisor.advice.diagnose import diagnose_advice

    launches = []
    for a in advices:
        found = diagnose_advice(a)  # where the current config loses time (None: it cannot run)
        launches.append(dict(a.to_json(), gains=a.gains(min_speedup), cannot_run=a.cannot_run,
                             diagnosis=None if found is None else found.to_json()))
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
                 "basis": _how(a), "caveats": a.caveats}
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
    rows = []
    for a in advices:
        label = a.subject.label[len(prefix):].strip() if prefix else a.subject.label
        if a.cannot_run:
            rows.append((label, a.current.config.label(), "can't run", a.best.config.label(),
                         "-" if a.best.config == a.current.config else f"{a.time_of(a.best):.1f}", "-", "-", "-"))
        else:
            rows.append((label, a.current.config.label(), f"{a.time_of(a.current):.1f}", a.best.config.label(),
                         f"{a.time_of(a.best):.1f}", f"{a.speedup:.2f}x" + ("*" if _how(a) == "measured" else ""),
                         a.current.ceiling.binding, f"{a.headroom:.2f}x"))
    headers = ("launch", "current", "us", "suggested", "us", "gain", "bound", "head-\nroom")
    widths = column_widths(headers, rows, console.width)
    # Launch labels too long for their column (a user kernel's grid and tensors) would make each row a tall
    # thin column: the table then names launches by number and spells them out under it.
    keyed = [row[0] for row in rows] if any(wrap_label(row[0], widths[0]).count("\n") >= LABEL_LINES
                                            for row in rows) else []
    if keyed:
        rows = [(f"#{i}", *row[1:]) for i, row in enumerate(rows, 1)]
        widths = column_widths(headers, rows, console.width)
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, title_justify="left",
                  show_edge=False)
    for col, width_, justify in zip(headers, widths, ("left", "left", "right", "left", "right", "right", "left",
                                                      "right"), strict=True):
        table.add_column(col, justify=justify, width=width_, no_wrap=True, overflow="ellipsis")
    for a, row in zip(advices, rows, strict=True):
        cells = [wrap_label(cell, w) for cell, w in zip(row, widths, strict=True)]
        table.add_row(*cells, style="bold" if is_finding(a, min_speedup) else None)
    console.print(table)
    for i, label in enumerate(keyed, 1):  # wrapped as the table wraps labels, continued under the label's start
        head = f"#{i}: "
        lines = wrap_label(label, max(console.width - len(head), 20)).split("\n")
        console.print("\n".join([head + lines[0], *(" " * len(head) + line for line in lines[1:])]),
                      highlight=False, markup=False, soft_wrap=True)
    findings = [a for a in advices if is_finding(a, min_speedup)]
    console.print(f"{len(findings)} finding(s): a gain over {min_speedup:.2f}x (bold) or a config that cannot run",
                  highlight=False, markup=False)
    # Caveats under the launch they qualify; those every launch shares (a routing assumption of all token
    # counts, an uncalibrated rate) once, after the launches, so 18 token counts do not repeat them 18 times.
    shared = set.intersection(*(set(a.caveats) for a in advices)) if len(advices) > 1 else set()
    for a in advices:
        why = is_finding(a, min_speedup) or a.basis == "measured"  # a measured config kept: say why
        own = [c for c in a.caveats if c not in shared]
        if not why and not own:
            continue
        loc = a.subject.location
        console.print(f"- {a.subject.label}" + (f": {a.why}" if why else "")
                      + (f" [{_rel(loc.path)}:{loc.line}]" if loc and why else ""), highlight=False, markup=False)
        print_caveats(console, own)
    if shared:
        console.print("- every launch above", highlight=False, markup=False)
        print_caveats(console, [c for c in advices[0].caveats if c in shared])
    starred = ("*: the verdict rests on measurements on this GPU, " if any(_how(a) == "measured" for a in advices)
               else "")
    marked = "! : a caveat: an assumption the numbers of the launch above it rest on; " \
        if any(a.caveats for a in advices) else ""
    console.print(f"gain: current time over suggested ({starred}otherwise on the model's predictions); "
                  f"{HEADROOM_NOTE}; bound: the binding pipeline of the current config; {marked}{LABEL_LEGEND}.",
                  highlight=False, markup=False, style="dim")
    if measured:
        console.print(f"timed on this GPU: {sum(a.measured for a in advices)} configs", highlight=False)


LABEL_LINES = 4  # a launch label wrapped to this many lines or more is shown by number, spelled out below
# Between two columns a space of padding each side and the box's (blank) rule; no edges (show_edge=False).
_GAP, _EDGES = 3, 0


def column_widths(headers: Sequence[str], rows: Sequence[Sequence[str]], total: int) -> list[int]:
    """Each column's width for a table of `total` columns: numbers and the config labels' words (a config
    label's `BLOCK_H=512`) at their full width, so no number is ever cut; the launch label up to 24 of what is
    left, then the configs as much as they need, then the launch label the rest."""
    def longest_word(i: int) -> int:
        return max((len(w) for row in rows for w in row[i].split()), default=0)

    widths = [max([len(h) for h in headers[i].split("\n")] + [len(row[i]) for row in rows])
              for i in range(len(headers))]
    for i in (1, 3):
        widths[i] = max(len(headers[i]), longest_word(i))
    fixed = sum(w for i, w in enumerate(widths) if i != 0) + _GAP * (len(headers) - 1) + _EDGES
    label = max((len(row[0]) for row in rows), default=0)
    widths[0] = max(len(headers[0]), min(total - fixed, label, 24))
    spare = total - fixed - widths[0]
    # The two config columns on as few lines as the room allows, equally wide where both want more.
    want = {i: max((len(row[i]) for row in rows), default=0) for i in (1, 3)}
    even = max(widths[1], widths[3], min(max(want.values()), (spare + widths[1] + widths[3]) // 2))
    for i in (1, 3):
        grow = max(0, min(spare, min(even, want[i]) - widths[i]))
        widths[i] += grow
        spare -= grow
    for i in (1, 3):  # what one left, to the other
        grow = max(0, min(spare, want[i] - widths[i]))
        widths[i] += grow
        spare -= grow
    widths[0] += max(0, min(spare, label - widths[0]))  # what the configs leave, back to the launch
    return widths


# Inside a word longer than its column, a break may follow these characters (a tensor's `x_ptr[4096,`
# breaks after its comma, a kernel name after an underscore), never fall between two digits.
_BREAK_AFTER = "_,)]"


def wrap_label(text: str, width: int) -> str:
    """`text` wrapped at its spaces (not those inside brackets: a tensor's shape stays on one line where it fits) to
    lines of at most `width`; a word longer than that is broken after one of `_BREAK_AFTER` or before a `[`, and cut
    bare only where it has no such place (never inside a number if the word has any other place to break)."""
    lines: list[str] = []
    line = ""
    for word in _bracketed_words(text):
        while len(word) > width:
            cut = max([i + 1 for i, ch in enumerate(word[:width]) if ch in _BREAK_AFTER]
                      + [i for i, ch in enumerate(word[:width + 1]) if ch == "[" and i > 0], default=0)
            if cut == 0:
                cut = _cut_outside_digits(word, width)
            if line:
                lines.append(line)
                line = ""
            lines.append(word[:cut])
            word = word[cut:].lstrip()  # a shape's space after its comma: the line break stands for it
        if line and len(line) + 1 + len(word) <= width:
            line += " " + word
        else:
            if line:
                lines.append(line)
            line = word
    if line:
        lines.append(line)
    return "\n".join(lines)


def _bracketed_words(text: str) -> list[str]:
    """The words of `text`, a bracketed group with its spaces (`x_ptr[4096, 28672]`) kept as one word where it fits
    a line at all (wrap_label still breaks a word longer than the column, after its commas)."""
    words: list[str] = []
    depth = 0
    for part in text.split():
        if depth > 0 and words:
            words[-1] += " " + part
        else:
            words.append(part)
        depth = max(0, depth + part.count("[") - part.count("]"))
    return words


def _cut_outside_digits(word: str, width: int) -> int:
    """Where to cut a word that has no break character: the last place within `width` not between two
    digits, else `width`."""
    for i in range(width, 0, -1):
        if not (word[i - 1].isdigit() and i < len(word) and word[i].isdigit()):
            return i
    return width


SHOWN_CAVEATS = 3  # per launch in text; --format json lists every one


def print_caveats(console, caveats: Sequence[str], limit: int = SHOWN_CAVEATS) -> None:
    """Each caveat on its own line under the launch it qualifies, wrapped with a hanging indent so it
    reads at 80 columns; beyond `limit`, a count and where to read the rest."""
    from rich.padding import Padding
    from rich.text import Text

    for note in caveats[:limit]:
        console.print(Padding(Text(f"! {note}"), (0, 0, 0, 4)), highlight=False)
    if len(caveats) > limit:
        console.print(Padding(Text(f"! and {len(caveats) - limit} more (--format json lists them)"), (0, 0, 0, 4)),
                      highlight=False)

