"""`advisor diagnose` over the fused-MoE kernel's measured GEMM1 configs (issue 16): which share of each
launch's gap between the ideal and its measured time the named causes account for.

Rows: every fully timed (`ok`) GEMM1 row of the H100 and H200 sweeps and collections in benchmarks/data/
(each row's own routing: the per-expert token counts it records, else the expected routing) and the
previous kernel's GEMM1 rows of the fusion runs (RESULTS 15; seeded uniform routing, so the expected
one). The ceiling is the exact demand model's (no compile); the SASS is not read (the shipped kernel
has no 64-bit division since RESULTS 1's fix, and spills are in the row's `n_spills`). One process.

    python benchmarks/diagnose_check.py [--csv benchmarks/data/diagnose_check.csv.gz] [--per-case]
                                        [--without "operand staging"]

Prints, per GPU and source, the median share explained and the share of configs at >= 80%, for all
configs and for each case's fastest config; with --per-case, one line per (GPU, shape, M). Rows whose
gap is under 3% of their time are counted apart (nothing to explain) and left out of the medians.
`--without NAME[,NAME]` moves those causes' share back to "unexplained" (the diagnosis before they
existed: each cause is capped in order, and the ones named here come after every earlier one).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor.advice.ceiling import parse_config  # noqa: E402
from advisor.advice.diagnose import diagnose_ceiling  # noqa: E402
from advisor.advice.subjects import FamilySubject  # noqa: E402
from advisor.model.dataset import read_results  # noqa: E402
from ceilings.hardware import resolve_gpu  # noqa: E402
from ceilings.roofline import roofline  # noqa: E402
from kernels.family import family_named  # noqa: E402
from kernels.moe_bench import MoEGemmSpec  # noqa: E402
from kernels.moe_demand import moe_gemm_demand  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
SOURCES = {
    "h100": (["h100_moe_gemm1_sweep_v2.csv.gz", "h100_moe_collect1.csv.gz", "h100_moe_collect2.csv.gz"],
             "h100_moe_fusion_run2.json"),
    "h200": (["h200_moe_gemm1_sweep.csv.gz", "h200_moe_collect1.csv.gz", "h200_moe_collect2.csv.gz"],
             "h200_moe_fusion_run3.json"),
}
TARGET = 0.80           # issue 16: >= 80% of the gap named
SMALL_GAP = 0.03        # a gap under 3% of the time: nothing to explain


def sweep_rows(path: Path, gpu, family):
    for row in read_results(path):
        if row["status"] != "ok" or int(row["gemm"]) != 1:
            continue
        spec, config, demand = family.read_row(row, gpu.arch)
        counts = json.loads(row["case_info"]).get("expert_counts") if row.get("case_info") else None
        runs = [math.ceil(c / config["BLOCK_SIZE_M"]) for c in counts] if counts else None
        yield path.name, spec, config, demand, float(row["us"]), runs


def fusion_rows(path: Path, gpu, family):
    doc = json.loads(path.read_text())
    for row in doc["gemm1"]:
        if row["variant"] != "previous" or row["status"] != "ok":
            continue
        e, top, k, n = row["case"].split("_")
        spec = MoEGemmSpec(int(e[1:]), int(top[3:]), int(k[1:]), int(n[1:]), int(row["m"]), gemm=1)
        config = parse_config(row["config"], family)
        yield path.name, spec, config, moe_gemm_demand(spec, config, gpu.arch), float(row["us"]), None


def diagnose_rows(gpu_name: str):
    gpu, family = resolve_gpu(gpu_name), family_named("moe")
    sweeps, fusion = SOURCES[gpu_name]
    rows = [r for name in sweeps for r in sweep_rows(DATA / name, gpu, family)]
    rows += list(fusion_rows(DATA / fusion, gpu, family))
    for source, spec, config, demand, us, runs in rows:
        ceiling = roofline(demand, gpu.rates, config.to_dict())
        subject = FamilySubject(family, spec, gpu, config, f"{spec.shape_label} M={spec.m}")
        yield source, spec, config, diagnose_ceiling(subject, config, ceiling, us, read_sass=False, m_runs=runs)


def summarise(label: str, shares: list[float], small: int) -> str:
    if not shares:
        return f"{label:<44} no rows with a gap (small gaps: {small})"
    hit = sum(s >= TARGET for s in shares) / len(shares)
    return (f"{label:<44} n={len(shares):5d}  median {statistics.median(shares):6.1%}  >= 80%: {hit:6.1%}  "
            f"(small gaps left out: {small})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", default=str(DATA / "diagnose_check.csv.gz"),
                    help="full rows, one per config (us per cause); gzip when it ends in .gz")
    ap.add_argument("--without", default="", help="causes whose share counts as unexplained, comma-separated")
    ap.add_argument("--gpus", default="h100,h200")
    ap.add_argument("--per-case", action="store_true", help="one line per (GPU, shape, M)")
    args = ap.parse_args(argv)
    start = time.time()
    without = {n.strip() for n in args.without.split(",") if n.strip()}
    out, cause_names = [], []
    capped: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])  # (gpu, cause): [estimated, capped]
    for gpu_name in args.gpus.split(","):
        for source, spec, config, dx in diagnose_rows(gpu_name):
            for c in dx.causes:
                if c.name not in cause_names:
                    cause_names.append(c.name)
            dropped = sum(c.us for c in dx.causes if c.name in without)
            unexplained = dx.unexplained_us + dropped
            share = 1.0 - unexplained / dx.gap_us if dx.gap_us > 0 else 1.0
            above = dx.time_us - dx.ceiling_us
            share_above = max(0.0, 1.0 - unexplained / above) if above > 0 else 1.0
            causes = {f"{c.name} us": (0.0 if c.name in without else unexplained if c.name == "unexplained" else c.us)
                      for c in dx.causes}
            for c in dx.causes:
                if c.name != "unexplained" and c.estimate_us > 0:
                    capped[(gpu_name, c.name)][0] += 1
                    capped[(gpu_name, c.name)][1] += c.estimate_us > c.us + 1e-9
            out.append({"gpu": gpu_name, "source": source, "shape": spec.shape_label, "M": spec.m,
                        "config": config.label(), "time_us": dx.time_us, "ideal_us": dx.ideal_us,
                        "ceiling_us": dx.ceiling_us, "gap_us": dx.gap_us,
                        **causes, "explained_share": share, "explained_share_above_ceiling": share_above})
    fields = ["gpu", "source", "shape", "M", "config", "time_us", "ideal_us", "ceiling_us", "gap_us",
              *[f"{n} us" for n in cause_names], "explained_share", "explained_share_above_ceiling"]
    opener = gzip.open if args.csv.endswith(".gz") else open
    with opener(args.csv, "wt", newline="") as fh:
        w = csv.DictWriter(fh, fields, restval=0.0)
        w.writeheader()
        for r in out:
            w.writerow({k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()})

    def has_gap(r):
        return r["gap_us"] >= SMALL_GAP * r["time_us"]

    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in out:
        groups[(r["gpu"], r["shape"], r["M"])].append(r)
    print(f"{len(out)} measured GEMM1 configs in {len(groups)} cases, diagnosed in {time.time() - start:.1f} s; "
          f"share = named causes / (measured - ideal); rows in {args.csv}"
          + (f"; counted as unexplained: {', '.join(sorted(without))}" if without else ""))
    for key in ("explained_share", "explained_share_above_ceiling"):
        print(f"\n== {key} ==")
        for gpu_name in args.gpus.split(","):
            rows = [r for r in out if r["gpu"] == gpu_name]
            for source in dict.fromkeys(r["source"] for r in rows):
                part = [r for r in rows if r["source"] == source]
                print(summarise(f"{gpu_name} {source}", [r[key] for r in part if has_gap(r)],
                                sum(not has_gap(r) for r in part)))
            print(summarise(f"{gpu_name} all configs", [r[key] for r in rows if has_gap(r)],
                            sum(not has_gap(r) for r in rows)))
            best = [min(g, key=lambda r: r["time_us"]) for k, g in groups.items() if k[0] == gpu_name]
            print(summarise(f"{gpu_name} fastest config per case", [r[key] for r in best if has_gap(r)],
                            sum(not has_gap(r) for r in best)))
    print("\nrows where a cause's estimate passed the gap left to it (capped; an over-estimate or an earlier "
          "cause's):")
    for (gpu_name, name), (n, over) in capped.items():
        print(f"  {gpu_name} {name:<18} estimated in {n:5d} rows, capped in {over:5d} ({over / n:5.1%})")
    if args.per_case:
        print("\ngpu   shape                        M      n  median share  >=80%  fastest: us, gap, share, top causes")
        for (gpu_name, shape, m), g in sorted(groups.items()):
            shares = [r["explained_share"] for r in g if has_gap(r)]
            b = min(g, key=lambda r: r["time_us"])
            tops = sorted(((r_k[:-3], v) for r_k, v in b.items() if r_k.endswith(" us") and r_k != "unexplained us"
                           and isinstance(v, float)), key=lambda kv: -kv[1])[:3]
            med = f"{statistics.median(shares):6.1%}" if shares else "   -  "
            hit = f"{sum(s >= TARGET for s in shares) / len(shares):6.1%}" if shares else "   -  "
            print(f"{gpu_name}  {shape:<26} {m:5d} {len(g):6d}  {med}       {hit}  {b['time_us']:.1f}, "
                  f"{b['gap_us']:.1f}, {b['explained_share']:.0%}, "
                  + ", ".join(f"{n} {v:.1f}" for n, v in tops) + f", unexplained {b['unexplained us']:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
