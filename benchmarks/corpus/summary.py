"""Counts of what the corpus holds: per library, kernels, launches recorded, timed, variants, ncu launches.

    python benchmarks/corpus/summary.py            # print the table
    python benchmarks/corpus/summary.py --write    # also write data/summary.md's table between its markers

Reads only benchmarks/corpus/data (no GPU, no library needed).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
DATA = HERE / "data"
LIBRARIES = ("liger", "flaggems", "fla", "gemlite")
START, END = "<!-- counts: begin -->", "<!-- counts: end -->"


def _rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path) as fh:
        return list(csv.DictReader(fh))


def counts() -> list[dict]:
    """Kernels are (source file, name) pairs; a launch is a distinct trace entry."""
    from replay import load_cases

    timings, ncu = _rows(DATA / "timings.csv"), _rows(DATA / "ncu.csv")
    out = []
    for lib in LIBRARIES:
        if not (DATA / "traces" / f"{lib}.json").exists():
            continue
        cases = load_cases(lib)
        kernel_of = {c.id: (c.entry["source"], c.kernel) for c in cases}
        rows = [r for r in timings if r["library"] == lib]
        ok = [r for r in rows if r["status"] == "ok"]
        profiled = {r["launch_id"] for r in ncu if r["library"] == lib}
        out.append({
            "library": lib,
            "kernels": len(set(kernel_of.values())),
            "launches": len(cases),
            "calls": sum(c.entry.get("count", 1) for c in cases),
            "timed": len({r["launch_id"] for r in ok if r["recorded"] == "1"}),
            "kernels_timed": len({kernel_of[r["launch_id"]] for r in ok if r["recorded"] == "1"}),
            "variants": sum(1 for r in ok if r["recorded"] == "0"),
            "wrong": sum(1 for r in rows if r["status"] == "wrong"),
            "error": sum(1 for r in rows if r["status"] in ("error", "crashed")),
            "ncu": len(profiled),
            "ncu_kernels": len({kernel_of[i] for i in profiled}),
        })
    return out


def table(rows: list[dict]) -> str:
    head = ("| library | kernels | distinct launches (calls) | launches timed (kernels) | config variants timed "
            "| variants wrong | errors | ncu launches (kernels) |")
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    total = {k: sum(r[k] for r in rows) for k in rows[0] if k != "library"} if rows else {}
    for r in rows + ([{"library": "all", **total}] if rows else []):
        lines.append(f"| {r['library']} | {r['kernels']} | {r['launches']} ({r['calls']}) | {r['timed']} "
                     f"({r['kernels_timed']}) | {r['variants']} | {r['wrong']} | {r['error']} | "
                     f"{r['ncu']} ({r['ncu_kernels']}) |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--table", action="store_true", help="(default) print the table")
    a = parser.parse_args()
    text = table(counts())
    print(text)
    if a.write:
        path = DATA / "summary.md"
        body = path.read_text() if path.exists() else f"{START}\n{END}\n"
        if START not in body:
            body += f"\n{START}\n{END}\n"
        before, rest = body.split(START, 1)
        after = rest.split(END, 1)[1]
        path.write_text(f"{before}{START}\n{text}\n{END}{after}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
