"""The latency model on kernels it never saw (issue 15): the shipped model on the corpus, leave one
library out, and leave one shipped family out.

A corpus point's feature row is the generic ceiling's (`advisor.model.features.feature_row`, computed in
`check_points`; the TRANSFER_FEATURES added since are rebuilt here from the ceiling and the work the
point's record holds, no compile). Its target is log(measured / ceiling). Points come from
`data/ceilings.jsonl` and `data/ceilings_extra.jsonl` (more configs of launches already evaluated).

1. **Shipped model** (advisor/model/models, not changed): its prediction of every evaluated timed point.
2. **Leave one library out**: for each corpus library L, a model trained on the shipped families' sweep
   rows (`load_sweeps` of the files `advisor train` takes by default, H100 and H200) plus the corpus rows
   of the other libraries, tested on L. Which of VARIANTS (feature set, row weighting) is used, and the
   width of its 80% interval, are chosen by an inner leave-one-library-out over the training libraries
   only: nothing is fitted or chosen on a row of L.
3. **Leave one shipped family out**: the same with a shipped family held out (all corpus rows in
   training), the variant chosen most often in 2; per GPU.

Figures: MAPE and p90 of |predicted / measured - 1|; the median over launches (cases) of Spearman's rank
correlation of predicted and measured time over its configs (>= 3 configs); top-1 regret (measured time of
the predicted-best config over the measured best, >= 2 configs) within 1.03 and 1.05; the share of
points inside the 80% interval.

    python benchmarks/corpus/check_model.py [--no-lolo] [--no-lofo]

Writes `data/model_check.csv` (one row per point and model; `benchmarks/corpus/check_advice.py` reads it)
and prints the tables.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from check_points import DATA, GPU_NAME, LIBRARIES, ROOT, SUFFIX, done_keys, timed_points  # noqa: E402

OUT = DATA / "model_check.csv"
# More configs of launches already evaluated (H100 only: CORPUS_GPU=h200 has no such file).
EXTRA = DATA / f"ceilings_extra{SUFFIX}.jsonl"


def _variants() -> dict[str, tuple[tuple[str, ...], float]]:
    from advisor.model.features import DEFAULT_FEATURES, FEATURES

    base = DEFAULT_FEATURES
    return {f"{name}, weight power {power:g}": (features, power)
            for name, features in (("shipped features", base), ("transfer features", FEATURES))
            for power in (0.0, 0.5, 1.0)}


# ---------------------------------------------------------------------------------------------------
# Corpus rows
# ---------------------------------------------------------------------------------------------------

def _demand(record: dict, work: dict, expected=None):
    from ceilings.roofline import Demand

    detail, n = record["detail"], max(work["working_ctas"], 1)
    return Demand(kernel=record["kernel"], ctas=work["ctas"], active_ctas=work["working_ctas"],
                  warps_per_cta=detail["warps_per_cta"], tensor_flops_per_cta=work["tensor_flops"] / n,
                  tensor_kind="wgmma" if record["features"]["wgmma"] else "mma_sync",
                  instructions_per_cta={k: v / n for k, v in work["instructions"].items()},
                  smem_bytes_per_cta=work["bytes"]["shared"] / n, l2_bytes=work["bytes"]["l2"],
                  dram_bytes=work["bytes"]["dram"], shared_bytes=detail["shared_bytes_per_cta"],
                  registers=detail["registers"], source="generic (SASS x evaluated control flow)",
                  notes=list(detail["notes"]), working_set_bytes=work["working_set_bytes"],
                  local_bytes=detail["spill_bytes_per_thread"], expected=expected)


def full_features(record: dict) -> dict[str, float]:
    """The record's stored feature row plus the transfer features, rebuilt from its ceiling and work."""
    from advisor.model.features import transfer_features
    from ceilings.hardware import get_spec
    from ceilings.roofline import Ceiling

    detail = record["detail"]
    expected = _demand(record, detail["expected"]) if detail.get("expected") else None
    demand = _demand(record, detail["floor"], expected)
    view = record.get("model_view") or record  # the ceiling the model's features describe (check_points)
    ceiling = Ceiling(gpu=GPU_NAME, kernel=record["kernel"], config={}, ceiling_us=view["ceiling_us"],
                      binding=view["binding_pipe"], pipelines=view["pipelines"], ctas=record["ctas"],
                      active_ctas=record["active_ctas"], waves=record["waves"], ctas_per_sm=record["ctas_per_sm"],
                      rates_source={}, demand_source=demand.source, notes=record["notes"], demand=demand)
    return {**record["features"], **transfer_features(ceiling, demand, get_spec(GPU_NAME))}


def corpus_rows() -> list[dict]:
    """Every evaluated timed point: library, launch, config, recorded or not, measured and ceiling us,
    feature row."""
    results = {**done_keys(EXTRA), **done_keys()}
    out = []
    for p in timed_points():
        r = results.get(p.key)
        if r is None or "error" in r:
            continue
        out.append({"library": p.library, "launch_id": p.launch_id, "kernel": p.kernel, "config": p.label,
                    "recorded": int(p.recorded), "measured_us": p.us,
                    "ceiling_us": (r.get("model_view") or r)["ceiling_us"],
                    "features": full_features(r)})
    return out


def matrix(rows: list[dict]) -> np.ndarray:
    from advisor.model.features import FEATURES, stored_feature

    return np.array([[stored_feature(r["features"], f) for f in FEATURES] for r in rows], dtype=np.float32)


def corpus_dataset(rows: list[dict]):
    """Corpus rows as a Dataset: group "corpus/LIBRARY/LAUNCH" (its origin: the library), case the launch."""
    from advisor.model.dataset import Dataset

    keys = [f"corpus/{r['library']}/{r['launch_id']}" for r in rows]
    return Dataset(matrix(rows), np.array([math.log(r["measured_us"] / r["ceiling_us"]) for r in rows]),
                   np.array([r["ceiling_us"] for r in rows]), np.array([r["measured_us"] for r in rows]),
                   [GPU_NAME] * len(rows), keys, keys, [], [r["config"] for r in rows])


def joined(a, b):
    from advisor.model.dataset import Dataset

    if b is None or not len(b):
        return a
    return Dataset(np.concatenate([a.x, b.x]), np.concatenate([a.y, b.y]),
                   np.concatenate([a.ceiling_us, b.ceiling_us]), np.concatenate([a.measured_us, b.measured_us]),
                   a.gpu + b.gpu, a.group + b.group, a.case + b.case, a.sources + b.sources, a.config + b.config)


def shipped_data():
    """The shipped families' training rows: the sweep files the shipped model's meta names (a glob of
    benchmarks/data would also take files of other kinds written there since)."""
    from advisor.model.dataset import load_sweeps
    from advisor.model.predict import MODEL_DIR

    names = json.loads((MODEL_DIR / "latency_meta.json").read_text())["data"]
    return load_sweeps(sorted(str(ROOT / "benchmarks" / "data" / name) for name in names))


# ---------------------------------------------------------------------------------------------------
# Training with a variant, inner selection, figures
# ---------------------------------------------------------------------------------------------------

def fit(data, variant: tuple[tuple[str, ...], float]):
    from advisor.model.dataset import balanced_weights
    from advisor.model.predict import train

    features, power = variant
    return train(data, features=features, weights=balanced_weights(data, power) if power else None)


def predictions(model, data, factor: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median and 80% band in us, the band widened about the median by `factor` (log space)."""
    from advisor.model.confidence import widen

    mid, lo, hi = model.predict_log_ratio(data.x)
    lo, hi = widen(mid, lo, hi, np.full(len(mid), factor))
    ratio = lambda v: np.exp(np.maximum(v, 0.0))  # noqa: E731 - a launch cannot beat its ceiling
    return data.ceiling_us * ratio(mid), data.ceiling_us * ratio(lo), data.ceiling_us * ratio(hi)


def median_log_ratio(train_data, test_data, variant) -> np.ndarray:
    """The median booster alone, as `train` fits it (for choosing a variant: the band is not needed)."""
    import xgboost as xgb

    from advisor.model.dataset import balanced_weights
    from advisor.model.features import FEATURES
    from advisor.model.predict import PARAMS, ROUNDS

    features, power = variant
    cols = [FEATURES.index(f) for f in FEATURES if f in set(features)]
    m = xgb.DMatrix(train_data.x[:, cols], label=train_data.y,
                    weight=balanced_weights(train_data, power) if power else None)
    booster = xgb.train({**PARAMS, "objective": "reg:squarederror"}, m, num_boost_round=ROUNDS)
    return booster.predict(xgb.DMatrix(test_data.x[:, cols]))


def held_out_by_origin(data, origins: list[str], variant, band: bool = True):
    """Predictions (us) of every row of `origins`, each from a model trained without its origin: median,
    low, high (without `band`: the median three times)."""
    from advisor.model.dataset import origin
    from advisor.model.held_out import held_out_predictions

    of = np.array([origin(g) for g in data.group])
    masks = [of == o for o in origins]
    if band:
        return held_out_predictions(data, masks, lambda part: fit(part, variant))
    mid = np.full(len(data), np.nan)
    for test in masks:
        mid[test] = data.ceiling_us[test] * np.exp(np.maximum(
            median_log_ratio(data.subset(~test), data.subset(test), variant), 0.0))
    return mid, mid, mid


def choose(train_data, inner: list[str], variants: dict) -> tuple[str, float, dict]:
    """The variant with the lowest mean per-library MAPE over an inner leave-one-library-out on `inner`
    (median boosters), and the conformal factor that makes its inner held-out bands cover 80%."""
    from advisor.model.confidence import band_scores, conformal_scale
    from advisor.model.dataset import origin

    of = np.array([origin(g) for g in train_data.group])
    keep = np.isin(of, inner)
    scores = {}
    for name, variant in variants.items():
        mid, _, _ = held_out_by_origin(train_data, inner, variant, band=False)
        ape = np.abs(mid / train_data.measured_us - 1)
        scores[name] = float(np.mean([ape[of == o].mean() for o in inner]))
    best = min(scores, key=scores.get)
    mid, lo, hi = held_out_by_origin(train_data, inner, variants[best])
    factor = conformal_scale(band_scores(mid[keep], lo[keep], hi[keep], train_data.measured_us[keep]))
    return best, factor, scores


def spearman(a, b) -> float:
    from scipy.stats import spearmanr

    value = spearmanr(a, b).statistic
    return float(value) if value == value else 0.0  # constant predictions rank nothing: 0


def figures(rows: list[dict]) -> dict:
    """Figures of rows carrying measured_us, ceiling_us, predicted_us, low_us, high_us and a case."""
    if not rows:
        return {}
    ape = np.array([abs(r["predicted_us"] / r["measured_us"] - 1) for r in rows])
    cases: dict[str, list[dict]] = {}
    for r in rows:
        cases.setdefault(r["case"], []).append(r)
    rhos, regrets = [], []
    for group in cases.values():
        if len(group) >= 3:
            rhos.append(spearman([g["predicted_us"] for g in group], [g["measured_us"] for g in group]))
        if len(group) >= 2:
            chosen = min(group, key=lambda g: g["predicted_us"])
            regrets.append(chosen["measured_us"] / min(g["measured_us"] for g in group))
    covered = np.mean([r["low_us"] <= r["measured_us"] <= r["high_us"] for r in rows])
    return {"points": len(rows), "launches": len(cases), "mape": float(ape.mean()),
            "p90": float(np.percentile(ape, 90)), "spearman": statistics.median(rhos) if rhos else math.nan,
            "ranked": len(rhos), "regret_103": float(np.mean([g <= 1.03 for g in regrets])) if regrets else math.nan,
            "regret_105": float(np.mean([g <= 1.05 for g in regrets])) if regrets else math.nan,
            "regret_launches": len(regrets), "coverage": float(covered),
            "ceiling_mape": float(np.mean([abs(r["ceiling_us"] / r["measured_us"] - 1) for r in rows]))}


def attach(rows: list[dict], mid, lo, hi) -> None:
    for r, m, a, b in zip(rows, mid, lo, hi, strict=True):
        r.update(predicted_us=float(m), low_us=float(a), high_us=float(b))


def table(title: str, results: dict[str, dict]) -> None:
    print(f"\n{title}")
    print("| held out | points (cases) | MAPE | p90 | ceiling alone | median Spearman (cases) | top-1 <= 1.03 | "
          "top-1 <= 1.05 (cases) | 80% interval covers |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, s in results.items():
        if s:
            print(f"| {name} | {s['points']} ({s['launches']}) | {s['mape']:.1%} | {s['p90']:.1%} | "
                  f"{s['ceiling_mape']:.1%} | {s['spearman']:.2f} ({s['ranked']}) | {s['regret_103']:.0%} | "
                  f"{s['regret_105']:.0%} ({s['regret_launches']}) | {s['coverage']:.0%} |")


def leave_one_library_out(shipped, rows: list[dict], variants: dict) -> tuple[list[dict], dict]:
    libraries = [lib for lib in LIBRARIES if any(r["library"] == lib for r in rows)]
    held, chosen = [], {}
    for lib in libraries:
        train_rows = [r for r in rows if r["library"] != lib]
        train_data = joined(shipped, corpus_dataset(train_rows))
        inner = [f"corpus/{x}" for x in libraries if x != lib]
        name, factor, scores = choose(train_data, inner, variants)
        chosen[lib] = {"variant": name, "factor": factor, "inner_mape": scores}
        test = [dict(r, case=f"{r['library']}/{r['launch_id']}", variant=name) for r in rows if r["library"] == lib]
        attach(test, *predictions(fit(train_data, variants[name]), corpus_dataset(test), factor))
        held += test
        print(f"held out {lib}: chose {name} (inner MAPE {scores[name]:.1%}), interval factor {factor:.2f}; "
              f"trained on {len(shipped)} shipped + {len(train_rows)} corpus rows, tested on {len(test)}",
              file=sys.stderr)
    return held, chosen


def leave_one_family_out(shipped, rows: list[dict], variant) -> dict[str, dict]:
    """Per shipped family and GPU, a model trained without the family (all corpus rows in)."""
    from advisor.model.dataset import origin

    data = joined(shipped, corpus_dataset(rows))
    of = [origin(g) for g in data.group]
    families = sorted({o for o in of if not o.startswith("corpus/")})
    mid, lo, hi = held_out_by_origin(data, families, variant)
    out = {}
    for gpu in sorted(set(shipped.gpu)):
        for fam in families:
            idx = [i for i in range(len(data)) if of[i] == fam and data.gpu[i] == gpu]
            test = [{"measured_us": data.measured_us[i], "ceiling_us": data.ceiling_us[i], "case": data.case[i],
                     "predicted_us": mid[i], "low_us": lo[i], "high_us": hi[i]} for i in idx]
            out[f"{gpu.split()[1]} / {fam}"] = figures(test)
    return out


def level_baseline(rows: list[dict]) -> dict[str, float]:
    """MAPE per held-out library of the simplest transfer: the ceiling times the median measured / ceiling
    of the other libraries' points (no model, no features)."""
    out = {}
    for lib in LIBRARIES:
        train_y = [math.log(r["measured_us"] / r["ceiling_us"]) for r in rows if r["library"] != lib]
        test = [r for r in rows if r["library"] == lib]
        if test and train_y:
            level = math.exp(max(statistics.median(train_y), 0.0))
            out[lib] = float(np.mean([abs(r["ceiling_us"] * level / r["measured_us"] - 1) for r in test]))
    return out


def generic_interval(model, rows: list[dict]) -> tuple[dict[str, dict], float]:
    """The shipped model's band on generic-path launches: per held-out library, the conformal factor found
    on the other libraries' points and the coverage it gives on the library's; and the factor of all."""
    from advisor.model.confidence import band_scores, conformal_scale

    mid, lo, hi = model.predict_log_ratio(matrix(rows))
    ceiling = np.array([r["ceiling_us"] for r in rows])
    measured = np.array([r["measured_us"] for r in rows])
    scores = band_scores(ceiling * np.exp(mid), ceiling * np.exp(lo), ceiling * np.exp(hi), measured)
    lib = np.array([r["library"] for r in rows])
    out = {}
    for name in LIBRARIES:
        if (lib == name).any():
            factor = conformal_scale(scores[lib != name])
            out[name] = {"factor": factor, "coverage": float((scores[lib == name] <= factor).mean()),
                         "points": int((lib == name).sum())}
    covered = sum(v["coverage"] * v["points"] for v in out.values())
    out["all"] = {"factor": math.nan, "points": len(rows), "coverage": float(covered / len(rows))}
    return out, conformal_scale(scores)


def write_generic_interval(factor: float, points: int) -> Path:
    from advisor.model.predict import MODEL_DIR

    path = MODEL_DIR / "latency_meta.json"
    meta = json.loads(path.read_text())
    meta.setdefault("intervals", {})["scale_generic"] = round(factor, 4)
    meta["intervals"]["generic_split"] = {"points": points, "method": "split conformal on the corpus's timed points "
                                          "(benchmarks/corpus/check_model.py --write-interval)"}
    path.write_text(json.dumps(meta, indent=2) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-lolo", action="store_true", help="skip leave-one-library-out")
    parser.add_argument("--no-lofo", action="store_true", help="skip leave-one-family-out")
    parser.add_argument("--write-interval", action="store_true",
                        help="store the generic-path interval factor in the shipped model's meta")
    args = parser.parse_args(argv)
    import advisor.model.predict as predict_module
    from advisor.model.predict import LatencyModel

    # One thread: on this 2-core machine shared with other jobs XGBoost runs 5-10x faster than with two
    # (the trees are the same).
    predict_module.PARAMS = {**predict_module.PARAMS, "nthread": 1}

    rows = corpus_rows()
    if not rows:
        print("no evaluated corpus points; run check_ceiling.py first", file=sys.stderr)
        return 2
    shipped_model = LatencyModel.load()
    shipped_rows = [dict(r, case=f"{r['library']}/{r['launch_id']}", variant="") for r in rows]
    attach(shipped_rows, *shipped_model.predict_us(np.array([r["ceiling_us"] for r in rows]), matrix(rows)))
    by_lib = lambda rs: {lib: figures([r for r in rs if lib in ("all", r["library"])])  # noqa: E731
                         for lib in (*LIBRARIES, "all")}
    table("shipped model on the corpus (H100):", by_lib(shipped_rows))
    print("\nceiling x the median measured / ceiling of the other libraries (no model), MAPE: "
          + ", ".join(f"{lib} {v:.1%}" for lib, v in level_baseline(rows).items()))
    written = [{**r, "model": "shipped"} for r in shipped_rows]
    per_lib, factor = generic_interval(shipped_model, rows)
    print("\nshipped model's band on generic-path launches, widened by the factor of the other libraries "
          "(held-out coverage): " + ", ".join(f"{k} x{v['factor']:.2f} -> {v['coverage']:.0%}"
                                              for k, v in per_lib.items() if k != "all")
          + f"; all libraries: factor {factor:.2f}")
    if args.write_interval:
        print(f"wrote scale_generic {factor:.4f} to {write_generic_interval(factor, len(rows))}")

    variants = _variants()
    chosen: dict = {}
    if not (args.no_lolo and args.no_lofo):
        shipped = shipped_data()
    if not args.no_lolo:
        held, chosen = leave_one_library_out(shipped, rows, variants)
        table("held-out library (H100):", by_lib(held))
        written += [{**r, "model": "held-out library"} for r in held]
        print("\nvariant chosen per held-out library (inner leave-one-library-out MAPE of each variant):")
        for lib, c in chosen.items():
            print(f"- {lib}: {c['variant']}, interval factor {c['factor']:.2f}; "
                  + json.dumps({k: round(v, 4) for k, v in c["inner_mape"].items()}))
    if not args.no_lofo:
        name = Counter(c["variant"] for c in chosen.values()).most_common(1)[0][0] if chosen else \
            next(iter(variants))
        table(f"held-out shipped family ({name}; band not widened):",
              leave_one_family_out(shipped, rows, variants[name]))

    with open(OUT, "w", newline="") as f:
        fields = ["model", "variant", "library", "launch_id", "kernel", "config", "recorded", "measured_us",
                  "ceiling_us", "predicted_us", "low_us", "high_us"]
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(written)
    print(f"\n{OUT.name}: {len(written)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
