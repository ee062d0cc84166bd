"""How well does the latency model predict? Measured honestly: split by shape, and across GPUs.

    python benchmarks/accuracy.py --h100 SWEEP.csv.gz ... --h200 SWEEP.csv.gz ... [--folds 4]

Results per GPU and kernel family. Seen GPU: k-fold over shapes (a shape's rows are all in training or
all in test; both GPUs' rows of a test shape are held out). Unseen GPU: train on every H100 row, test
on every H200 row, and the reverse. Per split: MAPE of predicted_us, 90th percentile of the absolute error, Spearman rho
between predicted and measured across the configs of each case (median over cases), and top-1
regret (measured time of the predicted-best config / measured best, per case). The ceiling alone
(predicted_us = ceiling_us) is shown as the baseline.

`--features shipped` (default) trains on the 41 features of RESULTS section 8, `transfer` on all of
`advisor.model.features.FEATURES`; `--corpus` adds the corpus's evaluated points (every library,
`benchmarks/corpus/check_model.corpus_rows`) to every training set, never to a test set.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.model.dataset import Dataset, load_sweeps, shape_folds  # noqa: E402
from advisor.model.features import DEFAULT_FEATURES, FEATURES  # noqa: E402
from advisor.model.held_out import held_out_predictions  # noqa: E402
from advisor.model.predict import train as _train  # noqa: E402

TRAINING = {"features": list(DEFAULT_FEATURES), "extra": None}


def train(part: Dataset):
    """The model of a training split, with the features and the extra training rows chosen in main."""
    if TRAINING["extra"] is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent / "corpus"))
        from check_model import joined

        part = joined(part, TRAINING["extra"])
    return _train(part, features=TRAINING["features"])


def _ranks(v: np.ndarray) -> np.ndarray:
    order = np.argsort(v, kind="stable")
    ranks = np.empty(len(v))
    ranks[order] = np.arange(len(v))
    return ranks


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 3:
        return float("nan")
    ra, rb = _ranks(a), _ranks(b)
    return float(np.corrcoef(ra, rb)[0, 1])


def metrics(test: Dataset, predicted_us: np.ndarray) -> dict:
    err = np.abs(predicted_us - test.measured_us) / test.measured_us
    by_case = defaultdict(list)
    for i, case in enumerate(test.case):
        by_case[case].append(i)
    rhos, regrets = [], []
    for idx in by_case.values():
        idx = np.array(idx)
        if len(idx) >= 3:
            rhos.append(spearman(predicted_us[idx], test.measured_us[idx]))
        best_pred = idx[np.argmin(predicted_us[idx])]
        regrets.append(test.measured_us[best_pred] / test.measured_us[idx].min())
    regrets = np.array(regrets)
    return {"rows": int(len(test)), "cases": len(by_case), "mape_pct": round(100 * float(err.mean()), 2),
            "p90_abs_err_pct": round(100 * float(np.quantile(err, 0.9)), 2),
            "spearman_median": round(float(np.nanmedian(rhos)), 3) if rhos else None,
            "top1_regret_median": round(float(np.median(regrets)), 4),
            "cases_regret_le_1.03_pct": round(100 * float((regrets <= 1.03).mean()), 1)}


def calibrated_split(data: Dataset, tune: Dataset) -> dict:
    """Train without the tuned GPU, fine-tune on its short sweep, test on its shapes outside that sweep;
    the same test rows without the fine-tuning are the unseen-GPU baseline."""
    from advisor.model.predict import fine_tune

    (target,) = sorted(set(tune.gpu))
    gpus = np.array(data.gpu)
    tuned_shapes = set(tune.group)
    model = train(data.subset(gpus != target))
    tuned = fine_tune(model, tune)
    test_mask = (gpus == target) & np.array([g not in tuned_shapes for g in data.group])
    test = data.subset(test_mask)
    families = np.array([g.split("/")[0] for g in test.group])
    out = {"gpu": target, "tune_rows": len(tune), "tune_shapes": len(tuned_shapes)}
    for family in sorted(set(families)):
        part = test.subset(families == family)
        before, _, _ = model.predict_us(part.ceiling_us, part.x)
        after, _, _ = tuned.predict_us(part.ceiling_us, part.x)
        out[family] = {"unseen": metrics(part, before), "calibrated": metrics(part, after)}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--h100", nargs="+", default=[])
    parser.add_argument("--h200", nargs="+", default=[])
    parser.add_argument("--folds", type=int, default=4)
    parser.add_argument("--json", type=Path, help="write all results here")
    parser.add_argument("--tune", nargs="+", default=[],
                        help="short sweeps of one GPU for the calibration tier: train on the other GPU, fine-tune "
                             "on these (advisor.model.predict.fine_tune), test on that GPU's other shapes")
    parser.add_argument("--features", choices=("shipped", "transfer"), default="shipped")
    parser.add_argument("--corpus", action="store_true", help="add the corpus's points to every training set")
    parser.add_argument("--threads", type=int, default=None, help="XGBoost threads (default: the model's)")
    args = parser.parse_args(argv)
    if args.features == "transfer":
        TRAINING["features"] = list(FEATURES)
    if args.threads:
        import advisor.model.predict as predict_module

        predict_module.PARAMS = {**predict_module.PARAMS, "nthread": args.threads}
    if args.corpus:
        sys.path.insert(0, str(Path(__file__).resolve().parent / "corpus"))
        from check_model import corpus_dataset, corpus_rows

        TRAINING["extra"] = corpus_dataset(corpus_rows())
    data = load_sweeps(args.h100 + args.h200)
    gpus = np.array(data.gpu)
    results: dict = {"rows": len(data), "shapes": len(set(data.group)), "seen": {}, "unseen": {}}
    print(f"{len(data)} rows, {len(set(data.group))} shapes, GPUs {sorted(set(data.gpu))}")

    predicted, _, _ = held_out_predictions(data, shape_folds(data, args.folds), train)
    families = np.array([g.split("/")[0] for g in data.group])
    for gpu in sorted(set(data.gpu)):
        for family in sorted(set(families)):
            mask = (gpus == gpu) & (families == family) & ~np.isnan(predicted)
            if mask.any():
                test = data.subset(mask)
                results["seen"][f"{gpu} / {family}"] = {"model": metrics(test, predicted[mask]),
                                                        "ceiling_only": metrics(test, test.ceiling_us)}

    names = sorted(set(data.gpu))
    if len(names) == 2:
        families = np.array([g.split("/")[0] for g in data.group])
        for a, b in ((names[0], names[1]), (names[1], names[0])):
            model = train(data.subset(gpus == a))
            for family in sorted(set(families)):
                test = data.subset((gpus == b) & (families == family))
                predicted, _, _ = model.predict_us(test.ceiling_us, test.x)
                results["unseen"][f"train {a} -> test {b} / {family}"] = {
                    "model": metrics(test, predicted), "ceiling_only": metrics(test, test.ceiling_us)}

    if args.tune:
        results["calibrated"] = calibrated_split(data, load_sweeps(args.tune))

    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
