"""The latency model on the corpus (issue 15 point 2, as far as the data allows): the shipped model as it
is, then leave-one-library-out.

The corpus was never used for training. A corpus point's feature row is the generic ceiling's
(`advisor.model.features.feature_row`, computed in `check_points`), its target log(measured / ceiling).

1. **Shipped model** (advisor/model/models, not changed): its prediction of every evaluated timed point.
2. **Leave one library out**: `advisor.model.predict.train` on the shipped families' sweep rows
   (`advisor.model.dataset.load_sweeps`, the files `advisor train` takes by default) plus the corpus rows of
   three libraries; tested on the fourth. Nothing is saved.

Figures per library: MAPE and p90 of |predicted / measured - 1|; the median over launches of Spearman's
rank correlation of predicted and measured time over a launch's configs (launches with >= 3 evaluated
configs); top-1 regret (the measured time of the predicted-best config over the launch's measured best,
launches with >= 2 configs) within 1.03 and 1.05; the share of points inside the 80% interval.

    python benchmarks/corpus/check_model.py [--no-lolo]

Reads what `check_points` evaluated (run check_ceiling.py first); writes `data/model_check.csv` (one row
per point and model) and prints a short table last.
"""

from __future__ import annotations

import argparse
import csv
import glob
import math
import statistics
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from check_points import DATA, GPU_NAME, LIBRARIES, ROOT, done_keys, timed_points  # noqa: E402

OUT = DATA / "model_check.csv"


def corpus_rows() -> list[dict]:
    """Every evaluated timed point: library, launch, config, measured and ceiling us, feature row."""
    results = done_keys()
    out = []
    for p in timed_points():
        r = results.get(p.key)
        if r is None or "error" in r:
            continue
        out.append({"library": p.library, "launch_id": p.launch_id, "kernel": p.kernel, "config": p.label,
                    "measured_us": p.us, "ceiling_us": r["ceiling_us"], "features": r["features"]})
    return out


def matrix(rows: list[dict]) -> np.ndarray:
    from advisor.model.features import FEATURES

    return np.array([[r["features"][f] for f in FEATURES] for r in rows], dtype=np.float32)


def predict(model, rows: list[dict]) -> None:
    mid, lo, hi = model.predict_us(np.array([r["ceiling_us"] for r in rows]), matrix(rows))
    for r, m, a, b in zip(rows, mid, lo, hi, strict=True):
        r.update(predicted_us=float(m), low_us=float(a), high_us=float(b))


def spearman(a: list[float], b: list[float]) -> float:
    from scipy.stats import spearmanr

    value = spearmanr(a, b).statistic
    return float(value) if value == value else 0.0  # constant predictions rank nothing: 0


def figures(rows: list[dict]) -> dict:
    if not rows:
        return {}
    ape = np.array([abs(r["predicted_us"] / r["measured_us"] - 1) for r in rows])
    launches: dict[str, list[dict]] = {}
    for r in rows:
        launches.setdefault(f"{r['library']}/{r['launch_id']}", []).append(r)
    rhos, regrets = [], []
    for group in launches.values():
        if len(group) >= 3:
            rhos.append(spearman([g["predicted_us"] for g in group], [g["measured_us"] for g in group]))
        if len(group) >= 2:
            chosen = min(group, key=lambda g: g["predicted_us"])
            regrets.append(chosen["measured_us"] / min(g["measured_us"] for g in group))
    covered = np.mean([r["low_us"] <= r["measured_us"] <= r["high_us"] for r in rows])
    return {"points": len(rows), "launches": len(launches), "mape": float(ape.mean()),
            "p90": float(np.percentile(ape, 90)), "spearman": statistics.median(rhos) if rhos else math.nan,
            "ranked": len(rhos), "regret_103": float(np.mean([g <= 1.03 for g in regrets])) if regrets else math.nan,
            "regret_105": float(np.mean([g <= 1.05 for g in regrets])) if regrets else math.nan,
            "regret_launches": len(regrets), "coverage": float(covered),
            "ceiling_mape": float(np.mean([abs(r["ceiling_us"] / r["measured_us"] - 1) for r in rows]))}


def shipped_data():
    """The shipped families' training rows, as `advisor train` takes them by default."""
    from advisor.model.dataset import load_sweeps

    files = sorted(f for f in glob.glob(str(ROOT / "benchmarks" / "data" / "*.csv.gz"))
                   if not any(tag in f for tag in ("kernel_v1", "ncu", "features")))
    return load_sweeps(files)


def with_corpus(shipped, rows: list[dict]):
    """The shipped rows plus corpus rows (their group and case: the launch; ceilings from the generic path)."""
    from advisor.model.dataset import Dataset

    x = np.concatenate([shipped.x, matrix(rows)])
    y = np.concatenate([shipped.y, [math.log(r["measured_us"] / r["ceiling_us"]) for r in rows]])
    keys = [f"corpus/{r['library']}/{r['launch_id']}" for r in rows]
    return Dataset(x, y, np.concatenate([shipped.ceiling_us, [r["ceiling_us"] for r in rows]]),
                   np.concatenate([shipped.measured_us, [r["measured_us"] for r in rows]]),
                   shipped.gpu + [GPU_NAME] * len(rows), shipped.group + keys, shipped.case + keys,
                   shipped.sources, shipped.config + [r["config"] for r in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-lolo", action="store_true", help="only the shipped model")
    args = parser.parse_args(argv)
    from advisor.model.predict import LatencyModel, train

    rows = corpus_rows()
    if not rows:
        print("no evaluated corpus points; run check_ceiling.py first", file=sys.stderr)
        return 2
    results: dict[str, dict[str, dict]] = {"shipped": {}, "held-out library": {}}
    written = []
    shipped_model = LatencyModel.load()
    shipped_rows = [dict(r) for r in rows]
    predict(shipped_model, shipped_rows)
    for lib in (*LIBRARIES, "all"):
        results["shipped"][lib] = figures([r for r in shipped_rows if lib in ("all", r["library"])])
    written += [{**r, "model": "shipped"} for r in shipped_rows]

    if not args.no_lolo:
        shipped = shipped_data()
        held_rows = []
        for lib in LIBRARIES:
            test = [dict(r) for r in rows if r["library"] == lib]
            if not test:
                continue
            model = train(with_corpus(shipped, [r for r in rows if r["library"] != lib]))
            predict(model, test)
            held_rows += test
            print(f"trained without {lib}: {len(shipped)} shipped + {sum(r['library'] != lib for r in rows)} "
                  f"corpus rows; tested on {len(test)}", file=sys.stderr)
        for lib in (*LIBRARIES, "all"):
            results["held-out library"][lib] = figures([r for r in held_rows if lib in ("all", r["library"])])
        written += [{**r, "model": "held-out library"} for r in held_rows]

    with open(OUT, "w", newline="") as f:
        fields = ["model", "library", "launch_id", "kernel", "config", "measured_us", "ceiling_us", "predicted_us",
                  "low_us", "high_us"]
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(written)
    print(f"{OUT.name}: {len(written)} rows")
    for name, table in results.items():
        if not table:
            continue
        print(f"\n{name} model on the corpus (H100):")
        print("| library | points (launches) | MAPE | p90 APE | ceiling alone MAPE | median Spearman per launch "
              "(launches) | top-1 <= 1.03 | top-1 <= 1.05 (launches) | 80% interval covers |")
        print("|---|---|---|---|---|---|---|---|---|")
        for lib, s in table.items():
            if not s:
                continue
            print(f"| {lib} | {s['points']} ({s['launches']}) | {s['mape']:.1%} | {s['p90']:.1%} | "
                  f"{s['ceiling_mape']:.1%} | {s['spearman']:.2f} ({s['ranked']}) | {s['regret_103']:.0%} | "
                  f"{s['regret_105']:.0%} ({s['regret_launches']}) | {s['coverage']:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
