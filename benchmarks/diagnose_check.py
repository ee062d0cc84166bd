"""`advisor diagnose` over the fused-MoE kernel's measured GEMM1 configs (issue 16): which share of each
launch's gap between the ideal and its measured time the named causes account for.

Rows: every fully timed (`ok`) GEMM1 row of the H100 and H200 sweeps and collections in benchmarks/data/
(each row's own routing: the per-expert token counts it records, else the expected routing) and the
previous kernel's GEMM1 rows of the fusion runs (RESULTS 15; seeded uniform routing, so the expected
one). The ceiling is the exact demand model's (no compile); the SASS is not read (the shipped kernel
has no 64-bit division since RESULTS 1's fix, and spills are in the row's `n_spills`). One process.

    python benchmarks/diagnose_check.py [--csv benchmarks/data/diagnose_check.csv.gz] [--per-case]
                                        [--without "operand staging"]
    python benchmarks/diagnose_check.py --variants [--gpus h100,h200]

Prints, per GPU and source, the median share explained and the share of configs at >= 80%, for all
configs and for each case's fastest config; with --per-case, one line per (GPU, shape, M). Rows whose
gap is under 3% of their time are counted apart (nothing to explain) and left out of the medians.
`--without NAME[,NAME]` moves those causes' share back to "unexplained" (the diagnosis before they
existed: each cause is capped in order, and the ones named here come after every earlier one).
`--variants` diagnoses both sides of RESULTS 15's kernel changes (every GEMM1 variant of the fusion
runs and the fused-il / fused-il-persistent rows of the tuning runs, each through its own exact demand,
kernels/moe_fused_demand.py) and prints, per change, the cause `advisor diagnose --compare` names as
removed against the measured saving (diagnose_variants.py).
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


def variant_rows(path: Path, gpu, family, variant: str):
    """GEMM1 rows of one kernel variant of a fusion run: (spec, config, us)."""
    for row in json.loads(path.read_text())["gemm1"]:
        if row["variant"] == variant and row["status"] == "ok":
            e, top, k, n = row["case"].split("_")
            spec = MoEGemmSpec(int(e[1:]), int(top[3:]), int(k[1:]), int(n[1:]), int(row["m"]), gemm=1)
            yield spec, parse_config(row["config"], family), float(row["us"])


# The kernel changes of RESULTS 15 and the causes each was made to remove (the fused epilogue writes half
# the output: half the epilogue and DRAM-write causes; the persistent grid has no exit-only CTAs and was
# meant to balance the tail).
KERNEL_CHANGES = {"fused-il": {"epilogue": 0.5, "DRAM writes": 0.5},
                  "persistent": {"tail wave": 1.0, "exit-only CTAs": 1.0}}


def print_changes(gpu_names: list[str], diagnosed: dict) -> None:
    """What `advisor diagnose --compare` names for RESULTS 15's changes, against what was measured."""
    from advisor.advice.diagnose_compare import compare

    print("\n== GROUP_SIZE_M 1 -> the fastest of 16/32/64, same tile, warps, stages (sweeps, exact routing) ==")
    print("gpu   shape                        M  config (G1)          measured saved  tool: removed cause (us), "
          "named / unexplained of the saving")
    for gpu_name in gpu_names:
        pairs = defaultdict(dict)
        for (g, source, shape, m, label), dx in diagnosed.items():
            if g == gpu_name and not source.endswith(".json"):
                head, group, tail = label.split(" G")[0], int(label.split(" G")[1].split()[0]), label.split(" ", 4)[4]
                pairs[(shape, m, f"{head} {tail}")][group] = dx
        named, hits, saved, predicted = 0, 0, [], []
        for (shape, m, tile), by_g in sorted(pairs.items()):
            grouped = [by_g[g] for g in by_g if g >= 16]
            if 1 not in by_g or not grouped:
                continue
            cmp = compare(by_g[1], min(grouped, key=lambda d: d.time_us))
            removed = cmp.removed
            named += 1
            hits += removed is not None and removed.name == "L2 re-reads"
            saved.append(cmp.time_saved_us)
            predicted.append(next(c.removed_us for c in cmp.causes if c.name == "L2 re-reads"))
            if m >= 1024 and cmp.time_saved_us > 20:
                print(f"{gpu_name}  {shape:<26} {m:5d}  {tile + ' G1':<20} {cmp.time_saved_us:8.1f}        "
                      f"{removed.name if removed else '-'} ({removed.removed_us if removed else 0:.1f}), "
                      f"{sum(c.removed_us for c in cmp.causes[:-1]):+.1f} / {cmp.causes[-1].removed_us:+.1f}")
        if named:
            both = sum(x > 20 and p > 10 for x, p in zip(saved, predicted, strict=True))
            false = sum(x < 10 and p > 20 for x, p in zip(saved, predicted, strict=True))
            print(f"{gpu_name}: {named} pairs; the tool names L2 re-reads as the removed cause in {hits}; saving "
                  f"measured median {statistics.median(saved):.1f} us, L2 re-reads removed median "
                  f"{statistics.median(predicted):.1f} us; pairs saving > 20 us: {sum(x > 20 for x in saved)}, of "
                  f"them named L2 re-reads > 10 us: {both}; named > 20 us where < 10 us was measured: {false}")

    print("\n== kernel changes (fusion runs, same config): the previous kernel's causes each change targets ==")
    print("gpu   change      shape                        M  config                   measured saved  targeted "
          "cause us (before)")
    for gpu_name in gpu_names:
        gpu, family = resolve_gpu(gpu_name), family_named("moe")
        path = DATA / SOURCES[gpu_name][1]
        before = {(spec.shape_label, spec.m, c.label()): us
                  for spec, c, us in variant_rows(path, gpu, family, "previous")}
        for variant, targets in KERNEL_CHANGES.items():
            big = []  # (saving, targeted us, L2 re-reads us) of the configs the change saved > 20 us on
            for spec, config, us in variant_rows(path, gpu, family, variant):
                key = (gpu_name, path.name, spec.shape_label, spec.m, config.label())
                prev = before.get(key[2:])
                if prev is None or spec.m < 1024 or key not in diagnosed:
                    continue
                dx = diagnosed[key]
                target = sum(share * dx.cause(name) for name, share in targets.items())
                top = max((c for c in dx.causes if c.name != "unexplained"), key=lambda c: c.us)
                print(f"{gpu_name}  {variant:<11} {spec.shape_label:<26} {spec.m:5d}  {config.label():<24} "
                      f"{prev - us:8.1f}        {target:.1f} ({', '.join(targets)}); largest before: {top.name} "
                      f"{top.us:.1f}, L2 re-reads {dx.cause('L2 re-reads'):.1f}")
                if prev - us > 20:
                    big.append((prev - us, target, dx.cause("L2 re-reads")))
            median = statistics.median(b[0] for b in big) if big else 0.0
            targeted, rereads = sum(b[1] >= 10 for b in big), sum(b[2] >= 10 for b in big)
            print(f"{gpu_name} {variant}: {len(big)} configs saved > 20 us (median {median:.1f}); targeted causes "
                  f">= 10 us in {targeted} of them, L2 re-reads >= 10 us in {rereads}")


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
    ap.add_argument("--changes", action="store_true", help="what the diagnosis names for RESULTS 15's changes "
                    "(GROUP_SIZE_M 1 against 16-64; fused-il and persistent against the previous kernel)")
    ap.add_argument("--variants", action="store_true", help="both sides of RESULTS 15's kernel changes, each "
                    "variant through its own demand (fusion and tuning runs); prints and exits")
    args = ap.parse_args(argv)
    if args.variants:
        return variants_main(args.gpus.split(","))
    start = time.time()
    without = {n.strip() for n in args.without.split(",") if n.strip()}
    out, cause_names, diagnosed = [], [], {}
    capped: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])  # (gpu, cause): [estimated, capped]
    for gpu_name in args.gpus.split(","):
        for source, spec, config, dx in diagnose_rows(gpu_name):
            if args.changes:
                diagnosed[(gpu_name, source, spec.shape_label, spec.m, config.label())] = dx
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
            estimated = sum(c.estimate_us for c in dx.causes if c.name != "unexplained" and c.name not in without)
            out.append({"gpu": gpu_name, "source": source, "shape": spec.shape_label, "M": spec.m,
                        "config": config.label(), "time_us": dx.time_us, "ideal_us": dx.ideal_us,
                        "ceiling_us": dx.ceiling_us, "gap_us": dx.gap_us,
                        **causes, "explained_share": share, "explained_share_above_ceiling": share_above,
                        "estimated_over_gap": estimated / dx.gap_us if dx.gap_us > 0 else float("nan")})
    fields = ["gpu", "source", "shape", "M", "config", "time_us", "ideal_us", "ceiling_us", "gap_us",
              *[f"{n} us" for n in cause_names], "explained_share", "explained_share_above_ceiling",
              "estimated_over_gap"]
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
    print("\n== the causes' estimates before capping, summed, over the gap (1.0: they name exactly the gap; "
          "over 1: they name more than was lost) ==")
    for gpu_name in args.gpus.split(","):
        rows = [r for r in out if r["gpu"] == gpu_name and has_gap(r)]
        for source in [*dict.fromkeys(r["source"] for r in rows), None]:
            part = [r["estimated_over_gap"] for r in rows if source is None or r["source"] == source]
            if part:
                q = statistics.quantiles(part, n=10) if len(part) > 1 else part * 9
                print(f"{gpu_name + ' ' + (source or 'all configs'):<44} n={len(part):5d}  median "
                      f"{statistics.median(part):5.2f}  p10 {q[0]:5.2f}  p90 {q[-1]:5.2f}  within 0.8-1.25: "
                      f"{sum(0.8 <= x <= 1.25 for x in part) / len(part):6.1%}  over 1.25: "
                      f"{sum(x > 1.25 for x in part) / len(part):6.1%}")
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
    if args.changes:
        print_changes(args.gpus.split(","), diagnosed)
    return 0


# RESULTS 15's kernel changes, as (name, variant before, variant after) of one GEMM1 at one config.
VARIANT_CHANGES = (("act fused (fused-il)", "previous", "fused-il"), ("act fused, two dots", "previous", "fused"),
                   ("w1 interleaved", "fused", "fused-il"), ("persistent", "previous", "persistent"),
                   ("persistent on fused-il", "fused-il", "fused-il-persistent"))
SHOWN = ("epilogue", "DRAM writes", "operand staging", "tail wave", "exit-only CTAs", "L2 re-reads", "K-loop rate",
         "CTA ramp")


def variant_diagnoses(gpu_name: str, paths: list[Path]) -> dict:
    """(file, shape, M, config, variant) -> the diagnosis of every timed GEMM1 row of the fusion and tuning
    runs, each variant through its own exact demand at the expected routing (the runs' seeded uniform one)."""
    from kernels.moe_fused_demand import variant_spec

    gpu, family = resolve_gpu(gpu_name), family_named("moe")
    out = {}
    for path in paths:
        for row in json.loads(path.read_text())["gemm1"]:
            if row["status"] != "ok":
                continue
            e, top, k, n = row["case"].split("_")
            spec = variant_spec(MoEGemmSpec(int(e[1:]), int(top[3:]), int(k[1:]), int(n[1:]), int(row["m"]), gemm=1),
                                row["variant"], gpu.spec.sms)
            config = parse_config(row["config"], family)
            subject = FamilySubject(family, spec, gpu, config, f"{spec.shape_label} M={spec.m} [{row['variant']}]")
            ceiling = roofline(family.demand(spec, config, gpu.arch), gpu.rates, config.to_dict())
            out[(path.name, spec.shape_label, spec.m, config.label(), row["variant"])] = diagnose_ceiling(
                subject, config, ceiling, float(row["us"]), read_sass=False)
    return out


def _spearman(xs: list[float], ys: list[float]) -> float:
    import numpy as np

    def ranks(v):
        v = np.asarray(v, dtype=float)
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v))
        for value in np.unique(v):  # ties share their mean rank
            r[v == value] = r[v == value].mean()
        return r.tolist()

    return _pearson(ranks(xs), ranks(ys))


def _m_of(cmp) -> int:
    return int(cmp.before.label.split("M=")[1].split()[0])


def _pearson(xs: list[float], ys: list[float]) -> float:
    import numpy as np

    return float(np.corrcoef(xs, ys)[0, 1]) if len(xs) > 2 and np.std(xs) > 0 and np.std(ys) > 0 else float("nan")


def variants_main(gpu_names: list[str], min_m: int = 1024) -> int:
    from collections import Counter

    from advisor.advice.diagnose_compare import compare

    start = time.time()
    for gpu_name in gpu_names:
        paths = [DATA / SOURCES[gpu_name][1], DATA / f"{gpu_name}_moe_fusion_tune.json"]
        dx = variant_diagnoses(gpu_name, paths)
        print(f"\n#### {gpu_name}: {len(dx)} GEMM1 rows diagnosed ({', '.join(p.name for p in paths)}), "
              f"{time.time() - start:.1f} s")
        for name, before, after in VARIANT_CHANGES:
            cmps = [compare(d, dx[k[:-1] + (after,)]) for k, d in dx.items()
                    if k[-1] == before and k[:-1] + (after,) in dx]
            if not cmps:
                continue
            print(f"\n== {name}: {before} -> {after}, same config ({len(cmps)} pairs; lines at M >= {min_m}) ==")
            print("shape                       M  config                   saved  removed (capped us) | by estimate"
                  " | estimate change: " + ", ".join(SHOWN) + " | unexpl. | L2 est. before")
            big = []
            for c in sorted(cmps, key=lambda c: (c.before.label, c.before.config.label())):
                est = {x.name: x.removed_estimate_us for x in c.causes}
                if _m_of(c) >= min_m:
                    r, e = c.removed, c.removed_by_estimate
                    print(f"{c.before.label.split(' [')[0]:<31} {c.before.config.label():<24} {c.time_saved_us:7.1f}  "
                          f"{r.name + f' {r.removed_us:.1f}' if r else '-':<22}| "
                          f"{e.name + f' {e.removed_estimate_us:.1f}' if e else '-':<22}| "
                          + " ".join(f"{est.get(n, 0.0):+7.1f}" for n in SHOWN)
                          + f" | {c.causes[-1].removed_us:+7.1f} | {c.before.estimate('L2 re-reads'):7.1f}")
                    if c.time_saved_us > 20:
                        big.append(c)
            saved = [c.time_saved_us for c in cmps]
            # Causes only one side estimates (a loop probe of one kernel) are left out of the sums.
            named = [sum(x.removed_us for x in c.causes[:-1] if x.name not in c.one_sided) for c in cmps]
            est_named = [sum(x.removed_estimate_us for x in c.causes[:-1] if x.name not in c.one_sided) for c in cmps]
            print(f"{gpu_name} {name}: all M: saving median {statistics.median(saved):+.1f} us; named causes' share "
                  f"change median {statistics.median(named):+.1f}, estimates' change median "
                  f"{statistics.median(est_named):+.1f}; pairs with saving > 20 us at M >= {min_m}: {len(big)}; "
                  f"removed (capped): {dict(Counter(c.removed.name if c.removed else '-' for c in big))}; by estimate: "
                  f"{dict(Counter(c.removed_by_estimate.name if c.removed_by_estimate else '-' for c in big))}")
            rows = [c for c in cmps if _m_of(c) >= min_m]
            saved_big = [c.time_saved_us for c in rows]
            for cause in ("L2 re-reads", "tail wave", "epilogue", "operand staging", "CTA ramp", "K-loop rate"):
                before_us = [c.before.estimate(cause) for c in rows]  # not the share: it is capped by the gap
                change = [next((x.removed_estimate_us for x in c.causes if x.name == cause), 0.0) for c in rows]
                print(f"{gpu_name} {name}, M >= {min_m} ({len(rows)} pairs): {cause}: estimate before median "
                      f"{statistics.median(before_us):.1f} us, estimate change median {statistics.median(change):+.1f} "
                      f"(min {min(change):+.1f}, max {max(change):+.1f}); Pearson r of the saving with it before "
                      f"{_pearson(saved_big, before_us):+.2f} (Spearman {_spearman(saved_big, before_us):+.2f}), with "
                      f"its change {_pearson(saved_big, change):+.2f}")
            covered = [c for c in big if c.before.estimate('L2 re-reads') >= c.time_saved_us]
            est_change = sum(sum(x.removed_estimate_us for x in c.causes[:-1] if x.name not in c.one_sided)
                             for c in big)
            resolved = sum(sum(x.removed_estimate_us for x in c.causes[:-1] if x.name not in c.one_sided and x.resolved)
                           for c in big)
            probe_causes = {n: sum(x.removed_estimate_us for c in big for x in c.causes if x.name == n and x.resolved)
                            for n in ("K-loop rate", "CTA ramp")}
            print(f"{gpu_name} {name}: of the {len(big)} pairs saving > 20 us, {len(covered)} have a before-side L2 "
                  f"re-read estimate at least the saving (sum of savings {sum(c.time_saved_us for c in big):.1f} us, "
                  f"tool's estimates' change {est_change:+.1f}, of it past the probes' resolution {resolved:+.1f}: "
                  + ", ".join(f"{n} {v:+.1f}" for n, v in probe_causes.items()) + ")")
        print_gemm2_sum(gpu_name, DATA / SOURCES[gpu_name][1], min_m)
    return 0


def print_gemm2_sum(gpu_name: str, path: Path, min_m: int) -> None:
    """GEMM2 with the top-k sum fused was timed only inside the layer: its change is inferred as the layer's
    (act-il -> act-il+sum, both at the shipped config) plus the sum kernel's time alone; the tool's side is
    GEMM2 at its predicted time, previous and fused, through each one's demand."""
    from advisor.advice.diagnose_compare import compare
    from advisor.advice.moe import gemm_spec
    from kernels.moe_fused_demand import variant_spec

    gpu, family = resolve_gpu(gpu_name), family_named("moe")
    print(f"\n== GEMM2 sum fused ({gpu_name}): previous -> fused, at the layer's shipped config; measured change "
          "inferred from the layer ==")
    for layer in json.loads(path.read_text())["layers"]:
        runs = layer["variants"]
        plain, summed = runs["act-il"]["tried"].get(layer["shipped"]), runs["act-il+sum"]["tried"].get(layer["shipped"])
        if layer["m"] < min_m or not plain or not summed:
            continue
        preset, tp = layer["case"].split(" TP")
        spec, _ = gemm_spec(preset, layer["m"], int(tp), 2)
        config = parse_config(layer["shipped"], family)
        sides = []
        for variant in ("previous", "fused"):
            subject = FamilySubject(family, variant_spec(spec, variant, gpu.spec.sms), gpu, config,
                                    f"{layer['case']} GEMM2 M={layer['m']} [{variant}]")
            (cand,) = subject.predict([config])
            sides.append(diagnose_ceiling(subject, config, cand.ceiling, cand.predicted_us, "predicted",
                                          read_sass=False))
        cmp = compare(*sides)
        measured = summed["us"] - plain["us"] + layer["sum_alone_us"]
        est = {c.name: -c.removed_estimate_us for c in cmp.causes}
        print(f"{layer['case']:<20} M={layer['m']:<5} {layer['shipped']:<24} GEMM2 measured (inferred) "
              f"{measured:+7.1f} us; predicted {-cmp.time_saved_us:+7.1f} us; estimates: epilogue "
              f"{est['epilogue']:+.1f}, DRAM writes {est.get('DRAM writes', 0.0):+.1f}, L2 re-reads "
              f"{est['L2 re-reads']:+.1f} (+ = slower); the sum kernel it replaces {layer['sum_alone_us']:.1f} us")


if __name__ == "__main__":
    raise SystemExit(main())
