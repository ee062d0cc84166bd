"""Is the ceiling a floor? Every fully timed point of a sweep of a shipped kernel against its ceiling.

    python benchmarks/ceiling_check.py SWEEP_CSV[.gz] [--calibration FILE] [--rows OUT.csv]

For each row with status ok: the exact semantic ceiling (kernels.moe_demand with the row's recorded
per-expert token counts, or the expected padding of uniform routing for rows recorded without them;
kernels.gemm for GEMM rows; the row's shared memory and registers; the GPU's calibration) and
measured / ceiling. Reports the
share of points under 0.97 (the target is none) and the spread of measured / ceiling for the best
config of each case (the target median is 1.25 or less).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.measure.moe_tune import read_results  # noqa: E402
from advisor.model.dataset import row_demand  # noqa: E402
from ceilings.hardware import Calibration, get_spec, rates_for  # noqa: E402
from ceilings.roofline import roofline  # noqa: E402


def check(rows: list[dict], calibration: Calibration | None, source: str) -> tuple[list[dict], dict]:
    out = []
    rates_by_gpu = {}
    for r in rows:
        if r["status"] != "ok":
            continue
        gpu = get_spec(r["gpu"])
        if gpu.name not in rates_by_gpu:
            rates_by_gpu[gpu.name] = rates_for(gpu.name, calibration, source, use_calibration=calibration is not None)
        # The exact demand of the row (its own routing counts, shared memory, registers; rows recorded without
        # routing use the expected padding of uniform routing).
        demand, config = row_demand(r, gpu.arch)
        c = roofline(demand, rates_by_gpu[gpu.name], config.to_dict())
        us = float(r["us"])
        out.append({"gpu": gpu.name, "kernel": r["kernel"], "shape": r["shape"], "M": int(r["M"]),
                    "config": r["config"], "us": us, "ceiling_us": round(c.ceiling_us, 3), "binding": c.binding,
                    "ratio": round(us / c.ceiling_us, 4),
                    **{f"{p}_us": (None if v is None else round(v, 3)) for p, v in c.pipelines.items()}})
    best = {}
    for row in out:
        key = (row["gpu"], row["kernel"], row["shape"], row["M"])
        if key not in best or row["us"] < best[key]["us"]:
            best[key] = row
    ratios = [b["ratio"] for b in best.values()]
    summary = {"points": len(out), "violations_below_0.97": sum(r["ratio"] < 0.97 for r in out),
               "min_ratio": min((r["ratio"] for r in out), default=None),
               "best_per_case_median": statistics.median(ratios) if ratios else None,
               "best_per_case_max": max(ratios, default=None), "cases": len(best)}
    return out, summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", type=Path)
    parser.add_argument("--calibration", type=Path, help="calibration JSON (default: spec-sheet rates)")
    parser.add_argument("--rows", type=Path, help="write every point with its ceiling to this CSV")
    args = parser.parse_args(argv)
    calibration = None
    if args.calibration:
        calibration = Calibration.from_json(args.calibration.read_text(), str(args.calibration))
    rows, summary = check(read_results(args.csv), calibration, str(args.calibration or ""))
    if args.rows and rows:
        with args.rows.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    print(json.dumps(summary, indent=2))
    by_case = defaultdict(list)
    for r in rows:
        by_case[(r["shape"], r["M"])].append(r)
    print(f"{'shape':<24}{'M':>6}{'best us':>10}{'ceiling':>10}{'ratio':>8}  binding   worst ratio")
    for (shape, m), rs in sorted(by_case.items()):
        b = min(rs, key=lambda r: r["us"])
        worst = min(rs, key=lambda r: r["ratio"])
        print(f"{shape:<24}{m:>6}{b['us']:>10.1f}{b['ceiling_us']:>10.1f}{b['ratio']:>8.3f}  {b['binding']:<9}"
              f"{worst['ratio']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
