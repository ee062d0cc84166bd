"""Leave one shipped family out (issue 15: MAPE <= 15% on a shipped family the model never saw), nested.

Rows: the shipped families' sweep rows (`check_model.shipped_data`, H100 and H200, exact-demand features)
and, for the variants that say so, every corpus point of both GPUs (generic-path rows, as
`check_transfer.rows_of` builds them). For held-out family F, each variant below is scored by an inner
leave-one-family-out over the other three families (mean per-family MAPE; F gives no row and no choice),
the best is refitted on the three and tested on F's rows of each GPU. Predictions are medians only (no
band). Figures as `check_model.figures`.

Variants: the shipped recipe's median (`predict.PARAMS`, squared log error, the 41 shipped features, 300
rounds of depth 6) and the transfer model's recipe (`advisor.model.transfer`: the MAPE-optimal constant as
base score, the absolute percentage error as loss, every feature but the GPU's constants) at depth 3 / 150
rounds and depth 6 / 300 rounds, and depth 3 / 150 with the corpus rows in training.

    python benchmarks/corpus/check_family_out.py      # a few minutes on one core
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]


def _columns(names):
    from advisor.model.features import FEATURES

    return [FEATURES.index(f) for f in names]


def _squared(x, y):
    import xgboost as xgb

    from advisor.model.features import DEFAULT_FEATURES
    from advisor.model.predict import PARAMS, ROUNDS

    cols = _columns(DEFAULT_FEATURES)
    booster = xgb.train({**PARAMS, "nthread": 1, "objective": "reg:squarederror"},
                        xgb.DMatrix(x[:, cols], label=y), ROUNDS)
    return lambda xs: booster.predict(xgb.DMatrix(xs[:, cols]))


def _percentage(depth: int, rounds: int):
    def fit(x, y):
        import xgboost as xgb

        from advisor.model import transfer

        cols = _columns(transfer.FEATURE_SETS["all"])
        booster = xgb.train({**transfer.PARAMS, "max_depth": depth, "base_score": transfer.mape_level(y)},
                            xgb.DMatrix(x[:, cols], label=y), rounds, obj=transfer.mape_objective)
        return lambda xs: booster.predict(xgb.DMatrix(xs[:, cols]), output_margin=True)
    return fit


# name -> (fit(x, y) -> predict(x) of log(measured / ceiling), corpus rows in training)
VARIANTS = {
    "shipped recipe (squared, 41 features, depth 6, 300 rounds)": (_squared, False),
    "percentage loss, depth 3, 150 rounds": (_percentage(3, 150), False),
    "percentage loss, depth 6, 300 rounds": (_percentage(6, 300), False),
    "percentage loss, depth 3, 150 rounds, + corpus": (_percentage(3, 150), True),
}


def main() -> int:
    warnings.filterwarnings("ignore", message="An input array is constant")
    import check_model
    import check_transfer

    from advisor.model.dataset import origin

    data = check_model.shipped_data()
    corpus = [r for gpu in check_transfer.GPUS for r in check_transfer.rows_of(gpu)]
    xc, yc, _ = check_transfer.arrays(corpus)
    family = np.array([origin(g) for g in data.group])
    gpu, case = np.array(data.gpu), np.array(data.case)
    families = sorted(set(family.tolist()))

    def predict(name, train, test):
        fit, with_corpus = VARIANTS[name]
        x, y = data.x[train], data.y[train]
        if with_corpus:
            x, y = np.concatenate([x, xc]), np.concatenate([y, yc])
        return np.maximum(fit(x, y)(data.x[test]), 0.0)  # no launch beats its ceiling

    print("| held-out family, GPU | chosen (inner MAPE) | points (cases) | MAPE | p90 | ceiling alone | median "
          "Spearman | top-1 <= 1.03 | top-1 <= 1.05 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for held in families:
        inner = [f for f in families if f != held]
        scores = {}
        for name in VARIANTS:
            apes = []
            for f in inner:
                test = family == f
                p = predict(name, np.isin(family, inner) & ~test, test)
                apes.append(float(np.abs(np.exp(p - data.y[test]) - 1).mean()))
            scores[name] = float(np.mean(apes))
        best = min(scores, key=scores.get)
        print(f"{held}: inner MAPE " + ", ".join(f"{k} {v:.1%}" for k, v in scores.items()), file=sys.stderr)
        test = family == held
        log_ratio = predict(best, ~test, test)
        for g in sorted(set(gpu.tolist())):
            mine = gpu[test] == g
            rows = [{"measured_us": m, "ceiling_us": c, "case": k, "predicted_us": c * math.exp(p),
                     "low_us": 0.0, "high_us": 0.0}
                    for m, c, k, p in zip(data.measured_us[test][mine], data.ceiling_us[test][mine],
                                          case[test][mine], log_ratio[mine], strict=True)]
            s = check_model.figures(rows)
            print(f"| {held}, {g} | {best} ({scores[best]:.1%}) | {s['points']} ({s['launches']}) | {s['mape']:.1%} | "
                  f"{s['p90']:.1%} | {s['ceiling_mape']:.1%} | {s['spearman']:.2f} | {s['regret_103']:.0%} | "
                  f"{s['regret_105']:.0%} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
