"""Calibrate the shipped model's confidence: its feature-space support and its interval factors.

    python benchmarks/confidence.py [--features benchmarks/data/features_all.csv.gz] [--model advisor/model/models]
                                    [--folds 4] [--json benchmarks/data/confidence_<date>.json]

Reads every training row as the model sees it (`advisor train --features-out`), fits the support the
"outside the model's data" distance is measured to (advisor.model.confidence), and finds the interval
factors by split conformal prediction: models trained with the same parameters as the shipped one on
all but one fold of shapes (then of kernel families), their 10-90% band on the held-out rows, and the
factor that makes it cover 80% of them. Writes the support file and the `support` / `intervals` entries
of the model's meta; the trees are not retrained. Prints the coverage before and after, per GPU.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.model import confidence  # noqa: E402
from advisor.model.dataset import Dataset, read_results, shape_folds  # noqa: E402
from advisor.model.features import FEATURES  # noqa: E402
from advisor.model.held_out import held_out_predictions  # noqa: E402
from advisor.model.predict import MODEL_DIR, train  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FILE_FEATURES: list[str] = list(FEATURES)  # the features of the file read_features read


def read_features(path: Path) -> Dataset:
    """The feature rows `advisor train --features-out` wrote, as a Dataset (rows of all FEATURES: a feature
    the file predates is 0, and the models here are trained on the file's features only, `FILE_FEATURES`)."""
    rows = read_results(path)
    FILE_FEATURES[:] = [f for f in FEATURES if rows and f in rows[0]]
    x = np.array([[float(r.get(f, 0.0)) for f in FEATURES] for r in rows], dtype=np.float32)
    ceiling = np.array([float(r["ceiling_us"]) for r in rows])
    measured = np.array([float(r["measured_us"]) for r in rows])
    return Dataset(x, np.log(measured / ceiling), ceiling, measured, [r["gpu"] for r in rows],
                   [r["shape"] for r in rows], [r["case"] for r in rows], [str(path)], [r["config"] for r in rows])


def held_out(data: Dataset, masks: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Predictions (mid, lo, hi in us) of each row by the model trained without its fold; its distance."""
    dist = np.zeros(len(data))

    def fold_done(i: int, train_part: Dataset, test: Dataset) -> None:
        mask = np.asarray(masks[i], dtype=bool)
        dist[mask] = confidence.fit_support(train_part.x).distance(test.x)
        print(f"fold {i + 1}/{len(masks)}: {mask.sum()} rows held out", file=sys.stderr)

    mid, lo, hi = held_out_predictions(data, masks, lambda part: train(part, features=FILE_FEATURES), fold_done)
    return mid, lo, hi, dist


def within_case_sd(data: Dataset, mid: np.ndarray) -> float:
    """The spread of log(predicted / measured) among the configs of one case, the case's own offset
    removed: the error of a predicted speed-up between two configs is sqrt(2) times it."""
    resid = np.log(mid / data.measured_us)
    by_case: dict[str, list[int]] = {}
    for i, case in enumerate(data.case):
        by_case.setdefault(case, []).append(i)
    centred = np.concatenate([resid[idx] - resid[idx].mean() for idx in map(np.array, by_case.values())
                              if len(idx) >= 3])
    return float(np.sqrt((centred ** 2).mean()))


def summary(data: Dataset, mid, lo, hi, factor: float) -> dict:
    gpus = np.array(data.gpu)
    out = {}
    for gpu in sorted(set(data.gpu)):
        sel = gpus == gpu
        out[gpu] = {"coverage_before": round(confidence.coverage(mid[sel], lo[sel], hi[sel],
                                                                 data.measured_us[sel]), 3),
                    "coverage_after": round(confidence.coverage(mid[sel], lo[sel], hi[sel], data.measured_us[sel],
                                                                factor), 3)}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--features", type=Path, default=ROOT / "benchmarks/data/features_all.csv.gz")
    parser.add_argument("--model", type=Path, default=MODEL_DIR)
    parser.add_argument("--folds", type=int, default=4)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    data = read_features(args.features)
    families = np.array([g.split("/")[0] for g in data.group])

    # The shape split: calibrates the band of launches inside the data.
    mid, lo, hi, _ = held_out(data, shape_folds(data, args.folds))
    inside = confidence.conformal_scale(confidence.band_scores(mid, lo, hi, data.measured_us))
    # Families held out one at a time: the band of a kernel the model has not seen.
    fmid, flo, fhi, fdist = held_out(data, [families == f for f in sorted(set(families))])
    outside = max(confidence.conformal_scale(confidence.band_scores(fmid, flo, fhi, data.measured_us)), inside)

    support = confidence.fit_support(data.x)
    support.save(args.model)
    threshold_rows = fdist > support.threshold
    meta_path = args.model / "latency_meta.json"
    meta = json.loads(meta_path.read_text())
    meta["support"] = {"file": confidence.SUPPORT_FILE, "rows": int(len(support.rows)),
                       "threshold": round(support.threshold, 4), "quantile": confidence.OUTSIDE_QUANTILE,
                       "held_out_families_outside_pct": round(100 * float(threshold_rows.mean()), 1)}
    meta["intervals"] = {
        "level": confidence.COVERAGE, "scale": round(inside, 4), "scale_outside": round(outside, 4),
        "method": "split conformal on held-out folds (benchmarks/confidence.py)",
        "ranking_sd": round(within_case_sd(data, mid), 4), "ranking_sd_outside": round(within_case_sd(data, fmid), 4),
        "shape_split": summary(data, mid, lo, hi, inside),
        "family_split": summary(data, fmid, flo, fhi, outside),
        "date": dt.date.today().isoformat(), "features": args.features.name, "folds": args.folds}
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    result = {"support": meta["support"], "intervals": meta["intervals"]}
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
