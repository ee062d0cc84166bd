"""How often a config that spills registers is a launch's fastest: the evidence behind `suggest` never naming,
without timings, a config that spills where the current config does not (`advisor.advice.search.SPILL_NOTE`).

For every corpus launch timed under configs that spill (the compile's local memory, `spill_bytes` in the
evaluated ceilings) and configs that do not: whether the fastest spilling config beat the fastest non-spilling
one, and by how much the former is slower (quantiles of best spilling / best non-spilling). Per GPU, the fitted
libraries and the held-out one apart.

    python benchmarks/corpus/spill_check.py

Reads only `data/` (ceilings*.jsonl from check_points.py, timings*.csv from measure.py).
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
SETS = [("H100, fitted libraries", "", "timings.csv"), ("H200, fitted libraries", "_h200", "timings_h200.csv"),
        ("H100, torchao (held out)", "_held_out", "timings_held_out.csv"),
        ("H200, torchao (held out)", "_held_out_h200", "timings_held_out_h200.csv")]


def main() -> None:
    print("| GPU, libraries | launches with both | a spilling config fastest | best spilling / best not: min, "
          "p25, median, p75, max |\n|---|---|---|---|")
    for name, suffix, timings in SETS:
        ceilings = {}
        with open(DATA / f"ceilings{suffix}.jsonl") as f:
            for line in f:
                row = json.loads(line)
                if "error" not in row:
                    ceilings[row["key"]] = row
        by_launch: dict[str, list[tuple[float, int]]] = defaultdict(list)
        with open(DATA / timings) as f:
            for r in csv.DictReader(f):
                key = f"{r['library']}/{r['launch_id']}/{json.dumps(json.loads(r['config']), sort_keys=True)}"
                if r["status"] == "ok" and key in ceilings:
                    by_launch[key.rsplit("/", 1)[0]].append((float(r["us"]), ceilings[key].get("spill_bytes") or 0))
        ratios, fastest = [], 0
        for points in by_launch.values():
            spilling = [us for us, spill in points if spill > 0]
            clean = [us for us, spill in points if spill == 0]
            if spilling and clean:
                ratios.append(min(spilling) / min(clean))
                fastest += min(spilling) < min(clean)
        ratios.sort()
        quantiles = ", ".join(f"{ratios[round(q * (len(ratios) - 1))]:.2f}" for q in (0, 0.25, 0.5, 0.75, 1)) \
            if ratios else "-"
        print(f"| {name} | {len(ratios)} | {fastest} | {quantiles} |")


if __name__ == "__main__":
    main()
