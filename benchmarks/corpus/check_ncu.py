"""The generic path's per-pipeline counts and DRAM bytes against Nsight Compute's, on the corpus.

Per profiled launch (its recorded config: `data/ncu.csv`, one row each, `--clock-control none`, one
replay), the generic demand's chip-wide warp instructions by pipeline and its compulsory DRAM bytes
(`advisor ceiling --format json --detail` holds the same: `detail.floor` and `detail.expected`) against
`sm__inst_executed_pipe_{tensor,fma,alu,xu,lsu}.sum` and `dram__bytes_{read,write}.sum` (units in
`data/logs/ncu_units.json`: instructions and bytes). Cells: tensor, FMA+ALU, XU, LSU, and FMA and ALU
apart; a cell is within when |generic / ncu - 1| <= 10% (DRAM: 25%). A cell where both are zero is
trivially right and counted apart ("cells with work" excludes it). Both answers of the generic path are
checked: the floor the ceiling uses and the expected work the model sees.

The tensor cell compares with `sm__inst_executed_pipe_tensor.sum`, which counts a warpgroup MMA once per
warp (check_ceiling.WGMMA_NCU_FACTOR says why).

    python benchmarks/corpus/check_ncu.py [--per-library N] [--budget-s S] [--no-eval]

Writes `data/ncu_check.csv` (one row per launch and cell; `CORPUS_HELD_OUT=1`: the held-out library's
`data/ncu_held_out.csv` into `data/ncu_check_held_out.csv`) and prints a short table last.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_ceiling import WGMMA_NCU_FACTOR, _num  # noqa: E402
from check_points import DATA, LIBRARIES, PART, done_keys, evaluate_all, in_priority, ncu_points, sample_launches  # noqa: E402

OUT = DATA / f"ncu_check{PART}.csv"  # CORPUS_HELD_OUT=1: the held-out library's profiles and file
CELLS = {"tensor": ("tensor",), "fma+alu": ("fma", "alu"), "xu": ("xu",), "lsu": ("lsu",), "fma": ("fma",),
         "alu": ("alu",)}
WITHIN = {"dram": 0.25}
DEFAULT_WITHIN = 0.10


def cell_values(result: dict, ncu: dict, answer: str) -> dict[str, tuple[float, float]]:
    """cell -> (generic, ncu) for one launch; `answer` is "floor" or "expected"."""
    work = result["detail"][answer]
    wgmma = bool(result["features"].get("wgmma"))
    out = {}
    for cell, pipes in CELLS.items():
        ours = 0.0
        theirs = 0.0
        for p in pipes:
            count = float(work["instructions"].get(p, 0.0))
            ours += count * (WGMMA_NCU_FACTOR if p == "tensor" and wgmma else 1)
            theirs += _num(ncu.get(f"sm__inst_executed_pipe_{p}.sum"))
        out[cell] = (ours, theirs)
    out["dram"] = (float(work["bytes"]["dram"]),
                   _num(ncu.get("dram__bytes_read.sum")) + _num(ncu.get("dram__bytes_write.sum")))
    return out


def within(cell: str, ours: float, theirs: float) -> bool:
    if theirs == 0:
        return ours == 0
    return abs(ours / theirs - 1) <= WITHIN.get(cell, DEFAULT_WITHIN)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-library", type=int, default=None, help="launches per library (default: all)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit-s", type=float, default=600.0)
    parser.add_argument("--budget-s", type=float, default=None)
    parser.add_argument("--no-eval", action="store_true", help="report on the launches evaluated already")
    args = parser.parse_args(argv)

    points = sample_launches(ncu_points(), args.per_library)
    if not args.no_eval:
        evaluate_all(in_priority(points), args.workers, args.limit_s, args.budget_s)
    results = done_keys()
    with open(DATA / f"ncu{PART}.csv") as f:
        ncu = {(r["library"], r["launch_id"]): r for r in csv.DictReader(f)}

    table = []
    failed = []
    for p in points:
        r = results.get(p.key)
        if r is None:
            continue
        if "error" in r:
            failed.append((p, r["error"]))
            continue
        row = ncu[(p.library, p.launch_id)]
        duration_us = _num(row.get("gpu__time_duration.sum")) / 1e3
        for answer in ("floor", "expected"):
            for cell, (ours, theirs) in cell_values(r, row, answer).items():
                table.append({"library": p.library, "launch_id": p.launch_id, "kernel": p.kernel, "answer": answer,
                              "cell": cell, "generic": ours, "ncu": theirs,
                              "ratio": round(ours / theirs, 4) if theirs else "",
                              "mma": int(bool(r["detail"][answer].get("tensor_flops"))),
                              "within": int(within(cell, ours, theirs)), "trivial": int(ours == 0 == theirs),
                              "ncu_duration_us": round(duration_us, 3), "ceiling_us": round(r["ceiling_us"], 3),
                              "registers": r["registers"],
                              "ncu_registers": int(_num(row["launch__registers_per_thread"])),
                              "shared_bytes": r["shared_bytes"],
                              "ncu_shared_bytes": int(_num(row["launch__shared_mem_per_block_static"])
                                                      + _num(row["launch__shared_mem_per_block_dynamic"]))})
    with open(OUT, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]) if table else ["library"])
        writer.writeheader()
        writer.writerows(table)

    for p, error in failed:
        print(f"error: {p.library} {p.kernel}: {error}")
    launches = {(r["library"], r["launch_id"]) for r in table}
    print(f"{len(launches)} of {len(points)} profiled launches evaluated ({len(failed)} errors); {OUT.name}")
    # The SASS here comes from this machine's Triton, Nsight Compute's from the GPU machine's (3.6): equal
    # registers and shared bytes say the two compiles allocated alike (not that their code is identical).
    first = {r["launch_id"]: r for r in table}.values()
    print(f"registers per thread equal to ncu's on {sum(r['registers'] == r['ncu_registers'] for r in first)} of "
          f"{len(first)} launches, shared bytes per CTA on "
          f"{sum(r['shared_bytes'] == r['ncu_shared_bytes'] for r in first)}")
    header = ["tensor", "fma+alu", "xu", "lsu", "fma", "alu", "dram"]
    for answer in ("floor", "expected"):
        print(f"\n{answer}: share of (launch, cell) within 10% of ncu (DRAM bytes: 25%), cells with work "
              "(all cells in brackets)")
        print("| library | launches | " + " | ".join(header) + " | ncu duration >= 0.97 x ceiling |")
        print("|---|---|" + "---|" * (len(header) + 1))
        for lib in (*LIBRARIES, "all"):
            mine = [r for r in table if r["answer"] == answer and lib in ("all", r["library"])]
            n = len({r["launch_id"] for r in mine})
            cells = []
            for cell in header:
                rows = [r for r in mine if r["cell"] == cell]
                work = [r for r in rows if not r["trivial"]]
                share = sum(r["within"] for r in work) / len(work) if work else float("nan")
                every = sum(r["within"] for r in rows) / len(rows) if rows else float("nan")
                cells.append(f"{share:.0%} of {len(work)} ({every:.0%})")
            first = {r["launch_id"]: r for r in mine}
            floor_ok = sum(r["ncu_duration_us"] >= 0.97 * r["ceiling_us"] for r in first.values())
            print(f"| {lib} | {n} | " + " | ".join(cells) + f" | {floor_ok} of {len(first)} |")
    # A kernel without MMAs has tensor-pipe work only from HFMA2.MMA, which ptxas picks (or not) to move
    # a constant into a register: which moves it picks differs between compiles (here and the GPU's).
    tensor = [r for r in table if r["answer"] == "floor" and r["cell"] == "tensor" and not r["trivial"]]
    for label, group in (("with MMAs", [r for r in tensor if r["mma"]]),
                         ("without (HFMA2.MMA only)", [r for r in tensor if not r["mma"]])):
        print(f"tensor cells of launches {label}: {sum(r['within'] for r in group)} of {len(group)} within 10%")
    print("\nfloor / ncu per cell over launches with work on both sides: median [10th, 90th percentile]")
    print("| library | " + " | ".join(header) + " |")
    print("|---|" + "---|" * len(header))
    for lib in (*LIBRARIES, "all"):
        cells = []
        for cell in header:
            ratios = [r["ratio"] for r in table if r["answer"] == "floor" and r["cell"] == cell and r["ratio"] != ""
                      and r["generic"] and lib in ("all", r["library"])]
            cells.append(f"{np.median(ratios):.2f} [{np.percentile(ratios, 10):.2f}, {np.percentile(ratios, 90):.2f}]"
                         if ratios else "-")
        print(f"| {lib} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
