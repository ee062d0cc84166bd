"""Which grid tiles of the corpus's launches `advisor.advice.stores` calls group sizes, against what
the GPU said of configs that change them.

For every corpus launch (the four fitted libraries and the held-out one), the launch rule is built from
the recorded launch as `suggest` builds it, and the kernel's source read for group tiles. Then every timed
config of that launch (data/timings*.csv: its autotune list, or its num_warps/num_stages neighbours) that
changes a grid tile is put in one of four cells:

- flagged tile changed, result `wrong`:  the rule is right to keep it;
- flagged tile changed, result `ok`:     the rule keeps a tile that was free (a missed speed-up, not a
                                          wrong answer);
- other grid tile changed, `wrong`:      a group size the rule did not see (or another cause);
- other grid tile changed, `ok`.

Needs the corpus libraries at /tmp/site (the paths in the traces; benchmarks/corpus/README.md).

    PYTHONPATH=/tmp/site python benchmarks/corpus/check_group_tiles.py [--list]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT)]

from replay import DATA, HELD_OUT, LIBRARIES, load_cases  # noqa: E402

from advisor.advice.launch_rule import launch_rule  # noqa: E402
from advisor.advice.stores import group_tiles  # noqa: E402
from ceilings.launch import Launch  # noqa: E402

TIMINGS = ("timings.csv", "timings_h200.csv", "timings_held_out.csv", "timings_held_out_h200.csv")


def flagged_per_launch() -> dict[tuple[str, int], dict]:
    """(library, trace index) -> the launch's kernel, its grid tiles (tile -> axes) and the flagged ones."""
    from ceilings.compile import load_kernel

    out = {}
    for library in (*LIBRARIES, *HELD_OUT):
        for case in load_cases(library):
            launch = Launch.from_dict(case.entry, f"{library} launch {case.index}")
            try:
                rule = launch_rule(launch)
                fn = load_kernel(launch.source, launch.kernel)
            except Exception as exc:  # noqa: BLE001 - a launch that cannot be read is listed, not fatal
                out[(library, case.index)] = {"kernel": case.kernel, "error": f"{type(exc).__name__}: {exc}"}
                continue
            axes: dict[str, set[int]] = {}
            for axis, (combo, _) in enumerate(rule.axes):
                for name, _ in combo:
                    axes.setdefault(name, set()).add(axis)
            out[(library, case.index)] = {"kernel": case.kernel, "grid_tiles": sorted(axes),
                                          "flagged": sorted(group_tiles(fn, axes))}
    return out


def timed_changes(per_launch: dict) -> list[dict]:
    """Every timed config that changes a grid tile of its launch, with its status."""
    rows = []
    for name in TIMINGS:
        path = DATA / name
        if not path.exists():
            continue
        timed = list(csv.DictReader(path.open()))
        recorded = {(r["library"], int(r["index"])): json.loads(r["config"]) for r in timed if r["recorded"] == "1"}
        for r in timed:
            key = (r["library"], int(r["index"]))
            info = per_launch.get(key)
            if r["recorded"] == "1" or info is None or "grid_tiles" not in info or key not in recorded:
                continue
            config = json.loads(r["config"])
            changed = [t for t in info["grid_tiles"] if config.get(t) != recorded[key].get(t)]
            if not changed or r["status"] not in ("ok", "wrong"):
                continue
            rows.append({"file": name, "library": key[0], "kernel": info["kernel"], "changed": changed,
                         "flagged": bool(set(changed) & set(info["flagged"])), "status": r["status"]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print every flagged kernel")
    args = parser.parse_args()
    per_launch = flagged_per_launch()
    flagged = Counter(lib for (lib, _), v in per_launch.items() if v.get("flagged"))
    launches = Counter(lib for (lib, _), v in per_launch.items())
    errors = Counter(lib for (lib, _), v in per_launch.items() if "error" in v)
    if args.list:
        for (lib, i), v in sorted(per_launch.items()):
            if v.get("flagged") or "error" in v:
                print(f"{lib:9} {i:4} {v['kernel']}: {v.get('flagged') or v.get('error')}")
    rows = timed_changes(per_launch)
    cells = Counter((r["flagged"], r["status"]) for r in rows)
    print("| library | launches | unreadable | with a group tile |")
    print("|---|---|---|---|")
    for lib in (*LIBRARIES, *HELD_OUT):
        print(f"| {lib} | {launches[lib]} | {errors[lib]} | {flagged[lib]} |")
    print("\n| timed configs changing a grid tile | result right | result wrong |")
    print("|---|---|---|")
    for flag, label in ((True, "a tile called a group size"), (False, "other grid tiles")):
        print(f"| {label} | {cells[(flag, 'ok')]} | {cells[(flag, 'wrong')]} |")
    for r in rows:
        if (r["flagged"] and r["status"] == "ok") or (not r["flagged"] and r["status"] == "wrong"):
            print(f"  {r['file']}: {r['library']}/{r['kernel']} changes {r['changed']}: {r['status']}")


if __name__ == "__main__":
    main()
