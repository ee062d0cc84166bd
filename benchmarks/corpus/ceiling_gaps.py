"""How far the generic ceiling is from the measured time of each launch's best config, and what binds.

For every launch of the corpus, its fastest measured config (`data/timings.csv`, or the H200's with
`CORPUS_GPU=h200`) against that config's evaluated ceiling (`data/ceilings.jsonl`): which term binds and
measured / term for every term (a term's "gap": 1.0 = the measured time is that floor). Launches are grouped
by what binds, DRAM split by whether the grid fills one wave; each group's median measured / ceiling, how many
launches are above issue 14's 1.5, and the median gap to the largest term other than the binding one (how far
the next floor is; the launch term is the calibrated launch time, added to the binding work's).

    python benchmarks/corpus/ceiling_gaps.py [--launches] [--library LIB]

Reads only `data/`; evaluate first (`check_points.py`, `check_ceiling.py`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_points import GPU_KEY, LIBRARIES, done_keys, timed_points  # noqa: E402

TARGET = 1.5  # issue 14: median measured / ceiling of each launch's best config


def best_configs(results: dict[str, dict]) -> list[tuple[str, float, dict]]:
    """(library, measured us, ceiling row) of each launch's fastest measured config that evaluated."""
    best: dict[tuple[str, str], tuple[float, dict]] = {}
    for p in timed_points():
        row = results.get(p.key)
        if row is None or "error" in row:
            continue
        key = (p.library, p.launch_id)
        if key not in best or p.us < best[key][0]:
            best[key] = (p.us, row)
    return [(lib, us, row) for (lib, _), (us, row) in best.items()]


def cause(row: dict) -> str:
    """The group of a launch: what binds, DRAM split by whether the grid fills one wave of resident CTAs."""
    binding = row["binding_pipe"]
    if binding == "dram":
        return "dram, grid under one wave" if row["waves"] < 1 else "dram, full waves"
    return {"launch": "launch (grid dispatch)", "chain": "chain (dependency path)",
            "issue": "issue slots"}.get(binding, f"pipe roof ({binding})")


def gaps(us: float, row: dict) -> list[tuple[str, float]]:
    """measured / term for every term with time, largest term first (L2 is shown, not a roof)."""
    terms = [(name, t) for name, t in row["pipelines"].items() if t and name != "l2"]
    return [(name, us / t) for name, t in sorted(terms, key=lambda nt: -nt[1])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", action="store_true", help="list every launch: measured / each term")
    parser.add_argument("--library", choices=LIBRARIES, default=None)
    args = parser.parse_args(argv)
    rows = [r for r in best_configs(done_keys()) if args.library in (None, r[0])]
    if not rows:
        print("no evaluated points: run check_ceiling.py first", file=sys.stderr)
        return 2
    ratio = {id(r): r[1] / r[2]["ceiling_us"] for r in rows}
    groups: dict[str, list] = defaultdict(list)
    for r in rows:
        groups[cause(r[2])].append(r)
    print(f"{GPU_KEY}: {len(rows)} launches, median measured/ceiling of the best config "
          f"{statistics.median(ratio.values()):.3f}; {sum(v <= TARGET for v in ratio.values())} at or under {TARGET}")
    for lib in LIBRARIES:
        mine = [ratio[id(r)] for r in rows if r[0] == lib]
        if mine:
            print(f"  {lib}: {len(mine)} launches, median {statistics.median(mine):.2f}")
    print("\n| binds | launches | median measured/ceiling | above 1.5 | median measured/second term |")
    print("|---|---|---|---|---|")
    for name, members in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        second = [next((gap for n, gap in gaps(us, row) if n != row["binding_pipe"]), None) for _, us, row in members]
        second = [g for g in second if g is not None]
        next_gap = f"{statistics.median(second):.2f}" if second else "-"
        print(f"| {name} | {len(members)} | {statistics.median(ratio[id(r)] for r in members):.2f} | "
              f"{sum(ratio[id(r)] > TARGET for r in members)} | {next_gap} |")
    if args.launches:
        for name, members in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            print(f"\n{name}:")
            for lib, us, row in sorted(members, key=lambda r: ratio[id(r)]):
                terms = " ".join(f"{n}={g:.2f}" for n, g in gaps(us, row)[:5])
                print(f"  {us / row['ceiling_us']:6.2f} {lib:8s} {row['kernel'][:44]:44s} {us:9.2f} us "
                      f"ctas {row['ctas']} waves {row['waves']:.2f} | {terms}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
