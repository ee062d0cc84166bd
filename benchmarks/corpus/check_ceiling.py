"""Is the generic ceiling a floor under the corpus's measured times on the H100 (or the H200), and a useful one?

For every timed point (recorded configs and variants, status ok in `data/timings.csv`): the generic ceiling
with the H100's calibrated rates (`check_points`: the launch from the trace, a variant's grid and config
from the extras, small integer tensors' values from the extras), and measured / ceiling. Reported per
library and overall:

- the share of points with measured >= 0.97 x ceiling (issue 14's target: 99.5%);
- every exception (measured < 0.97 x ceiling) with what can be told of its cause: the binding pipeline,
  how fast the measured time would have run that pipeline's floor against its roof, the binding count
  against Nsight Compute's for the same launch and config where `data/ncu.csv` has it, and the notes;
- the median over launches of measured / ceiling of each launch's best measured config (target <= 1.5).

    python benchmarks/corpus/check_ceiling.py [--per-library N] [--budget-s S] [--no-eval]
    CORPUS_GPU=h200 python benchmarks/corpus/check_ceiling.py     # the H200's timings, its rates, _h200 files

Evaluation is resumable (`data/ceilings.jsonl`); `--no-eval` reports on what is evaluated already.
Writes `data/ceiling_check.csv` (one row per evaluated point) and prints a short table last.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_points import (  # noqa: E402
    DATA,
    GPU_NAME,
    LIBRARIES,
    PART,
    SUFFIX,
    TRITON_TAG,
    Point,
    done_keys,
    evaluate_all,
    in_priority,
    ncu_points,
    sample_launches,
    timed_points,
)

from ceilings.hardware import resolve_gpu  # noqa: E402

OUT = DATA / f"ceiling_check{PART}{TRITON_TAG}{SUFFIX}.csv"
FLOOR_SHARE = 0.97
LAUNCH_US = resolve_gpu(GPU_NAME).rates.launch_us  # the calibrated launch floor (ceilings/calibration/)
# How many times `sm__inst_executed_pipe_tensor.sum` counts a warpgroup MMA per warp that issues it. In the
# corpus's ncu rows, on 15 of the 16 launches with warpgroup MMAs, tensor_op_gmma == tensor_op_hmma ==
# pipe_tensor: the two sub-counters overlap, and pipe_tensor counts each HGMMA once (benchmarks/ncu_pipes.py
# summed the two sub-counters, hence its former "twice"; it compares with pipe_tensor now).
WGMMA_NCU_FACTOR = 1


def ncu_rows() -> dict[tuple[str, str], dict]:
    with open(DATA / "ncu.csv") as f:
        return {(r["library"], r["launch_id"]): r for r in csv.DictReader(f)}


def ncu_count(result: dict, ncu: dict, pipe: str) -> tuple[float, float] | None:
    """(generic floor, Nsight Compute) for a pipeline's warp instructions or DRAM bytes, where both exist."""
    floor = (result.get("detail") or {}).get("floor") or {}
    if pipe == "dram":
        measured = _num(ncu.get("dram__bytes_read.sum")) + _num(ncu.get("dram__bytes_write.sum"))
        return float(floor["bytes"]["dram"]), measured
    if pipe not in (floor.get("instructions") or {}):
        return None
    value = _num(ncu.get(f"sm__inst_executed_pipe_{pipe}.sum"), None)
    if value is None:
        return None
    count = float(floor["instructions"][pipe])
    if pipe == "tensor" and result["features"].get("wgmma"):
        count *= WGMMA_NCU_FACTOR
    return count, value


def _num(text, default=0.0):
    try:
        return float(text)
    except (TypeError, ValueError):
        return default


def cause(result: dict, us: float, ncu: dict | None) -> str:
    """What can be told of why measured < 0.97 x ceiling, from the numbers alone."""
    pipe = result["binding_pipe"]
    pipe_us = result["pipelines"].get(pipe) or 0.0
    parts = [f"{pipe} binds ({pipe_us:.1f} us)"]
    if pipe == "launch" or us <= LAUNCH_US:
        parts.append(f"measured {us:.2f} us is within the {LAUNCH_US} us launch floor")
    else:
        parts.append(f"measured ran that floor at {pipe_us / (us - LAUNCH_US):.2f}x its roof")
    if ncu is not None:
        pair = ncu_count(result, ncu, pipe)
        if pair and pair[1]:
            parts.append(f"{pipe} floor / ncu = {pair[0] / pair[1]:.2f}")
        duration = _num(ncu.get("gpu__time_duration.sum"), None)
        if duration:
            parts.append(f"ncu duration {duration / 1e3:.1f} us")
    if result["active_ctas"] != result["ctas"]:
        parts.append(f"{result['active_ctas']} of {result['ctas']} CTAs work")
    notes = [n for n in result.get("notes", []) if not n.startswith("warm L2")]
    if notes:
        parts.append("notes: " + " | ".join(notes[:3]) + (f" (+{len(notes) - 3})" if len(notes) > 3 else ""))
    return "; ".join(parts)


def rows(points: list[Point], results: dict[str, dict]) -> list[dict]:
    ncu = ncu_rows()
    out = []
    for p in points:
        r = results.get(p.key)
        if r is None:
            continue
        row = {"library": p.library, "launch_id": p.launch_id, "kernel": p.kernel, "config": p.label,
               "recorded": int(p.recorded), "measured_us": p.us}
        if "error" in r:
            row.update(status="error", note=r["error"])
        else:
            ratio = p.us / r["ceiling_us"]
            ncu_row = ncu.get((p.library, p.launch_id)) if p.recorded else None
            row.update(status="ok", ceiling_us=round(r["ceiling_us"], 3), measured_over_ceiling=round(ratio, 4),
                       binding=r["binding_pipe"], active_ctas=r["active_ctas"], ctas=r["ctas"],
                       values_from_extras=" ".join(r["values_from_extras"]),
                       note=cause(r, p.us, ncu_row) if ratio < FLOOR_SHARE else "")
        out.append(row)
    return out


def summary(table: list[dict]) -> list[dict]:
    out = []
    for lib in (*LIBRARIES, "all"):
        mine = [r for r in table if lib in ("all", r["library"])]
        ok = [r for r in mine if r["status"] == "ok"]
        best: dict[tuple[str, str], dict] = {}
        for r in ok:
            key = (r["library"], r["launch_id"])
            if key not in best or r["measured_us"] < best[key]["measured_us"]:
                best[key] = r
        below = [r for r in ok if r["measured_over_ceiling"] < FLOOR_SHARE]
        out.append({"library": lib, "points": len(ok), "errors": len(mine) - len(ok),
                    "launches": len(best), "floor_share": 1 - len(below) / len(ok) if ok else float("nan"),
                    "exceptions": len(below),
                    "median_best": statistics.median(r["measured_over_ceiling"] for r in best.values())
                    if best else float("nan"),
                    "worst": min((r["measured_over_ceiling"] for r in ok), default=float("nan"))})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-library", type=int, default=None, help="launches per library (default: all)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit-s", type=float, default=600.0, help="per point")
    parser.add_argument("--budget-s", type=float, default=None, help="start no point after this many seconds")
    parser.add_argument("--no-eval", action="store_true", help="report on the points evaluated already")
    parser.add_argument("--exceptions", type=int, default=25, help="exceptions to print, worst first")
    args = parser.parse_args(argv)

    points = sample_launches(timed_points(), args.per_library)
    if not args.no_eval:
        evaluate_all(in_priority(points + [p for p in ncu_points()
                                           if p.library in LIBRARIES]), args.workers, args.limit_s, args.budget_s)
    results = done_keys()
    table = rows(points, results)
    fields = ["library", "launch_id", "kernel", "config", "recorded", "measured_us", "ceiling_us",
              "measured_over_ceiling", "binding", "active_ctas", "ctas",
              "values_from_extras", "status", "note"]
    with open(OUT, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(table)

    errors = [r for r in table if r["status"] == "error"]
    for r in errors:
        print(f"error: {r['library']} {r['kernel']} {r['config']}: {r['note']}")
    exceptions = sorted((r for r in table if r["status"] == "ok" and r["measured_over_ceiling"] < FLOOR_SHARE),
                        key=lambda r: r["measured_over_ceiling"])
    print(f"\nexceptions (measured < {FLOOR_SHARE} x ceiling), worst first:")
    for r in exceptions[:args.exceptions]:
        print(f"  {r['measured_over_ceiling']:.3f}  {r['library']} {r['kernel']} {r['config']} "
              f"measured {r['measured_us']:.1f} us, ceiling {r['ceiling_us']:.1f} us: {r['note']}")
    print(f"\n{len(table)} of {len(points)} points in {OUT.name}")
    print(f"\n| library | points | launches | errors | measured >= {FLOOR_SHARE} x ceiling | exceptions | worst | "
          "median measured/ceiling of best config |")
    print("|---|---|---|---|---|---|---|---|")
    for s in summary(table):
        print(f"| {s['library']} | {s['points']} | {s['launches']} | {s['errors']} | {s['floor_share']:.1%} | "
              f"{s['exceptions']} | {s['worst']:.2f} | {s['median_best']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
