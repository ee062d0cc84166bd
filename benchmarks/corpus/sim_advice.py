"""How `suggest` chooses, simulated over timed configs, to pick its rules without the GPU (RESULTS section 28).

Reads `data/model_check_transfer.csv` (check_transfer.py): per corpus point, its measured time (CUDA graph)
and the prediction of the transfer model trained without the point's library. Launches with >= 3 timed
configs, the launch's own config among them; none of the launches of the GPU check's plan
(data/advice_gpu_plan.json, RESULTS 21) nor their kernels. The corpus kernels are split in two halves by a
hash of their name (`design_half`): the rules are chosen on the design half; the other half is the check
(and the GPU check's fresh plan draws its launches from it, `check_advice_gpu.py plan --fresh`).

Without measurement, `suggest` names the model's best unless, on a launch the transfer model predicts, the
predicted gain over the launch's own config is below exp(z sqrt(2) sd) (advisor.advice.search.keep_current;
sd: the held-out fold's spread between configs of one launch, the `ranking_sd` column); figures for z in
Z_GRID and the product's KEEP_Z. With `--measure K`, the own config and K others are "timed" (their measured
times looked up): the product's choice (advisor.advice.timed_pick.choose, re-ranked after each timing by
the kernel's calibration, advisor.model.kernel_calibration.fit) against the K predicted fastest.

    python benchmarks/corpus/sim_advice.py [--half design|check|both] [--gpu h100|h200|both]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import sys
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT)]

MODEL_CHECK = HERE / "data" / "model_check_transfer.csv"
PLAN = HERE / "data" / "advice_gpu_plan.json"
Z_GRID = (0.0, 0.25, 0.5, 0.67, 0.8416)


def design_half(kernel: str) -> bool:
    """Whether a kernel is in the half of the corpus the rules were chosen on (by a hash of its name)."""
    return int(hashlib.sha256(kernel.encode()).hexdigest(), 16) % 2 == 0


def launches(gpu: str, half: str) -> list[list[dict]]:
    planned = json.loads(PLAN.read_text())["launches"]
    ids, kernels = {p["launch_id"] for p in planned}, {(p["library"], p["kernel"]) for p in planned}
    by_launch: dict[str, list[dict]] = defaultdict(list)
    with open(MODEL_CHECK, newline="") as f:
        for r in csv.DictReader(f):
            if r["gpu"] != gpu or r["model"] != "transfer (held-out library)":
                continue
            if r["launch_id"] in ids or (r["library"], r["kernel"]) in kernels:
                continue
            if design_half(r["kernel"]) != (half == "design"):
                continue
            for k in ("measured_us", "ceiling_us", "predicted_us", "low_us", "high_us", "ranking_sd"):
                r[k] = float(r[k])
            by_launch[r["launch_id"]].append(r)
    return [rows for rows in by_launch.values() if len(rows) >= 3 and any(r["recorded"] == "1" for r in rows)]


def own_of(rows: list[dict]) -> dict:
    return next(r for r in rows if r["recorded"] == "1")


def keep_rule(z: float):
    """`suggest` without timings: the model's best, unless its gain is below exp(z sqrt(2) sd)."""
    def pick(rows: list[dict]) -> dict:
        own, best = own_of(rows), min(rows, key=lambda r: r["predicted_us"])
        margin = math.exp(z * math.sqrt(2.0) * own["ranking_sd"])
        return best if own["predicted_us"] / best["predicted_us"] >= margin else own
    return pick


def top_k(k: int):
    def pick(rows: list[dict]) -> dict:
        own = own_of(rows)
        others = sorted((r for r in rows if r is not own), key=lambda r: r["predicted_us"])[:k]
        return min([own, *others], key=lambda r: r["measured_us"])
    return pick


def product_measure(k: int):
    """advisor.advice.timed_pick: the own config, then each step `choose` over the rest re-predicted with the
    kernel's calibration fitted to the timings so far."""
    from advisor.advice.timed_pick import choose
    from advisor.model.kernel_calibration import Point, fit

    def candidate(r: dict, correction) -> SimpleNamespace:
        p = math.log(r["predicted_us"] / r["ceiling_us"])
        mid = correction.log_ratio(np.array([p]), np.log([r["ceiling_us"]]))[0] if correction else p
        # `choose` skips num_stages twins of timed configs; the rows carry no config, each its own (no twins)
        return SimpleNamespace(row=r, predicted_us=r["ceiling_us"] * math.exp(mid),
                               config=SimpleNamespace(program=id(r), num_warps=None),
                               ceiling=SimpleNamespace(ceiling_us=r["ceiling_us"]))

    def pick(rows: list[dict]) -> dict:
        timed = [own_of(rows)]
        for _ in range(k):
            left = [r for r in rows if all(r is not t for t in timed)]
            if not left:
                break
            correction = fit([Point({}, "sim", t["ceiling_us"], math.log(t["predicted_us"] / t["ceiling_us"]),
                                    t["measured_us"]) for t in timed])
            timed.append(choose([candidate(r, correction) for r in left]).row)
        return min(timed, key=lambda r: r["measured_us"])
    return pick


def share(values: list[bool]) -> str:
    return f"{sum(values)}/{len(values)} ({sum(values) / len(values):.0%})" if values else "-"


def report(gpu: str, half: str) -> None:
    from advisor.advice.search import KEEP_Z

    group = launches(gpu, half)
    print(f"\n{gpu.upper()}, {half} half: {len(group)} launches "
          f"({sum(len(g) for g in group)} timed configs; own config within 1.05x of the best: "
          f"{share([own_of(g)['measured_us'] <= 1.05 * min(r['measured_us'] for r in g) for g in group])})")
    print("| suggest without timings | not slower than own | within 1.05x of best |")
    print("|---|---|---|")
    for z in sorted({*Z_GRID, KEEP_Z}):
        picks = [(keep_rule(z)(g), g) for g in group]
        tag = " (product: KEEP_Z)" if z == KEEP_Z else (" (the 80% close-call margin)" if z == 0.8416 else "")
        print(f"| keep own below exp({z} sqrt(2) sd){tag} | "
              f"{share([p['measured_us'] <= own_of(g)['measured_us'] for p, g in picks])} | "
              f"{share([p['measured_us'] <= 1.05 * min(r['measured_us'] for r in g) for p, g in picks])} |")
    larger = [g for g in group if len(g) >= 5]
    print(f"\nmeasured choice, launches with >= 5 timed configs ({len(larger)}): within 1.02x of the best")
    print("| K others timed | K predicted fastest | product (timed_pick) |")
    print("|---|---|---|")
    for k in (1, 2, 3):
        cells = []
        for rule in (top_k(k), product_measure(k)):
            cells.append(share([rule(g)["measured_us"] <= 1.02 * min(r["measured_us"] for r in g) for g in larger]))
        print(f"| {k} | {cells[0]} | {cells[1]} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=["design", "check", "both"], default="design")
    parser.add_argument("--gpu", choices=["h100", "h200", "both"], default="both")
    a = parser.parse_args()
    for gpu in (["h100", "h200"] if a.gpu == "both" else [a.gpu]):
        for half in (["design", "check"] if a.half == "both" else [a.half]):
            report(gpu, half)


if __name__ == "__main__":
    main()
