"""Advice and per-kernel calibration on kernels the model never saw (issue 15 points 3 and 4), simulated
over measured configs.

Reads `data/model_check.csv` (written by check_model.py): each corpus point's measured time (CUDA graph on
an H100) and the prediction of the model trained without the point's library ("held-out library"). No
GPU is used here: every "measurement" below is a time the GPU already measured, looked up.

**Per-kernel calibration** (launches with >= 5 evaluated configs): the advisor's own adaptive rule
(`advisor.advice.kernel_sweep.next_config`: the launch's own config first, then alternately the config
predicted fastest and the config with the widest band, re-fitting after each) picks 3 configs; their
measured times fit the kernel's correction (`advisor.model.kernel_calibration.fit`), which re-predicts
the launch's other configs. Figures: MAPE on the other configs; top-1 regret of the config the advisor
would then choose (a timed config by its measured time, the rest by the corrected prediction) against
the best measured of all the launch's evaluated configs.

**Advice** (launches whose every timed config was evaluated, >= 2 configs): the space is the timed
configs. Without measurement, the suggestion is the config predicted fastest, unless its predicted gain
over the launch's own config is within the model's error between configs of one launch
(`advisor.advice.search.close_call`'s margin, exp(0.8416 sqrt(2) sd) with the shipped model's
`ranking_sd_outside`), where `suggest` says so and recommends --measure: then the own config stays (the
"model's top" columns show the config predicted fastest regardless). "measure 4" times the 4 predicted
fastest and the own config, and keeps the fastest measured.

    python benchmarks/corpus/check_advice.py [--model-check data/model_check_transfer.csv
        --model "transfer (held-out library)" --gpu h100|h200]

With `--model-check` another file of held-out predictions (check_transfer.py's, both GPUs, a `gpu`
column) and `--model` the rows of one model in it; where its rows carry `ranking_sd` (the held-out
fold's spread between configs of one launch), the close-call margin is the fold's.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

MODEL_CHECK = HERE / "data" / "model_check.csv"
TIMINGS = HERE / "data" / "timings.csv"
CALIBRATION_TIMINGS = 3
MEASURE = 4


def launches(model: str = "held-out library", path: Path = MODEL_CHECK, gpu: str = "h100") -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["model"] != model or r.get("gpu", "h100") != gpu:
                continue
            for k in ("measured_us", "ceiling_us", "predicted_us", "low_us", "high_us"):
                r[k] = float(r[k])
            r["recorded"] = r["recorded"] == "1"
            out[f"{r['library']}/{r['launch_id']}"].append(r)
    return out


def timed_counts(gpu: str = "h100") -> dict[str, int]:
    """Configs timed ok per launch (timings.csv, or the GPU's; CORPUS_HELD_OUT=1: the held-out library's, as
    check_points reads them, autotune probes' rows under their launch)."""
    import os

    if os.environ.get("CORPUS_HELD_OUT") == "1":
        os.environ["CORPUS_GPU"] = gpu
        sys.path.insert(0, str(HERE))
        import check_points

        points: dict[str, set] = defaultdict(set)
        for p in check_points.timed_points():
            points[f"{p.library}/{p.launch_id}"].add(p.label)
        return {k: len(v) for k, v in points.items()}
    counts: dict[str, set] = defaultdict(set)
    with open(TIMINGS if gpu == "h100" else TIMINGS.with_name(f"timings_{gpu}.csv"), newline="") as f:
        for r in csv.DictReader(f):
            if r["status"] == "ok":
                counts[f"{r['library']}/{r['launch_id']}"].add(r["config"])
    return {k: len(v) for k, v in counts.items()}


def _log_band(r: dict) -> tuple[float, float, float]:
    c = r["ceiling_us"]
    return math.log(r["predicted_us"] / c), math.log(r["low_us"] / c), math.log(r["high_us"] / c)


def _points(timed: list[dict]):
    from advisor.model.kernel_calibration import Point

    return [Point({}, "", t["ceiling_us"], _log_band(t)[0], t["measured_us"]) for t in timed]


def _corrected_us(r: dict, correction) -> float:
    """The row's prediction after the kernel's correction (the model's own without one)."""
    p = _log_band(r)[0]
    if correction is not None:
        p = float(correction.log_ratio(np.array([p]), np.array([math.log(r["ceiling_us"])]))[0])
    return r["ceiling_us"] * math.exp(max(p, 0.0))  # a launch cannot beat its ceiling


def calibrate(group: list[dict], timings: int = CALIBRATION_TIMINGS, slope_on_ceiling: bool = False) -> dict:
    """The advisor's adaptive pick of `timings` configs, the correction they fit, and the outcome."""
    from advisor.model.kernel_calibration import fit

    timed: list[dict] = []
    own = [r for r in group if r["recorded"]]
    for step in range(timings):
        untimed = [r for r in group if r not in timed]
        if step == 0 and own:
            timed.append(own[0])
        elif step % 2 == 1:
            correction = fit(_points(timed), slope_on_ceiling=slope_on_ceiling)
            # Predictions equal to 0.1% (configs of one ceiling and the same features) tie likewise.
            timed.append(min(untimed, key=lambda r, c=correction: round(math.log(_corrected_us(r, c)), 3)))
        else:
            # Widths equal to 3 decimals (a band of constant width, as the transfer model's) tie: the
            # first in the launch's order, not the one float rounding makes widest.
            timed.append(max(untimed, key=lambda r: round(_log_band(r)[2] - _log_band(r)[1], 3)))
    correction = fit(_points(timed), slope_on_ceiling=slope_on_ceiling)
    rest = [r for r in group if r not in timed]
    pred = {id(r): _corrected_us(r, correction) for r in rest}
    choice = min(group, key=lambda r: r["measured_us"] if r in timed else pred[id(r)])
    best = min(r["measured_us"] for r in group)
    return {"ape_before": [abs(r["predicted_us"] / r["measured_us"] - 1) for r in rest],
            "ape_after": [abs(pred[id(r)] / r["measured_us"] - 1) for r in rest],
            "regret": choice["measured_us"] / best}


def close_call_margin(group: list[dict] | None = None) -> float:
    """The smallest predicted gain `suggest` claims without --measure: from the held-out fold's spread
    between configs when the rows carry it, else for a launch outside the shipped model's data."""
    from advisor.model.predict import LatencyModel

    if group and group[0].get("ranking_sd"):
        sd = float(group[0]["ranking_sd"])
    else:
        sd = LatencyModel.load().meta["intervals"]["ranking_sd_outside"]
    return math.exp(0.8416 * math.sqrt(2.0) * sd)


def advise(group: list[dict], measure: int = 0, margin: float = 1.0) -> dict | None:
    """The suggestion for a launch (module docstring) and its measured regret against the own and best config."""
    own = [r for r in group if r["recorded"]]
    if not own:
        return None
    own = own[0]
    ranked = sorted(group, key=lambda r: r["predicted_us"])
    if measure:
        chosen = min([*ranked[:measure], own], key=lambda r: r["measured_us"])
    else:
        top = ranked[0]
        chosen = top if own["predicted_us"] / top["predicted_us"] >= margin else own
    best = min(r["measured_us"] for r in group)
    return {"vs_own": chosen["measured_us"] / own["measured_us"], "vs_best": chosen["measured_us"] / best,
            "changed": chosen is not own, "library": own["library"]}


def summarize_calibration(groups: dict[str, list[dict]], slope_on_ceiling: bool) -> None:
    by_lib: dict[str, list[dict]] = defaultdict(list)
    for key, group in groups.items():
        if len(group) >= 5:
            by_lib[key.split("/")[0]].append(calibrate(group, slope_on_ceiling=slope_on_ceiling))
    by_lib["all"] = [x for v in list(by_lib.values()) for x in v]
    rule = ("offset + slope on log ceiling" if slope_on_ceiling
            else "offset (+ slope on the prediction from 4 points): the rule before neighbours, not the product's")
    print(f"\nper-kernel calibration from {CALIBRATION_TIMINGS} timings chosen by the advisor ({rule}):")
    print("| library | launches | other configs | MAPE before | MAPE after | top-1 <= 1.03 | top-1 <= 1.05 |")
    print("|---|---|---|---|---|---|---|")
    for lib, res in by_lib.items():
        before = [a for r in res for a in r["ape_before"]]
        after = [a for r in res for a in r["ape_after"]]
        regrets = np.array([r["regret"] for r in res])
        print(f"| {lib} | {len(res)} | {len(after)} | {np.mean(before):.1%} | {np.mean(after):.1%} | "
              f"{np.mean(regrets <= 1.03):.0%} | {np.mean(regrets <= 1.05):.0%} |")


def summarize_product_calibration(groups: dict[str, list[dict]]) -> None:
    """The product's own rule (neighbours in the config space, check_calibration.py): the tables below are
    the kernel-wide offset alone, the rule before it, kept for comparison (RESULTS 36 quoted them as the
    product's by mistake, RESULTS 37)."""
    from check_calibration import calibrate as product_calibrate

    by_lib: dict[str, list[dict]] = defaultdict(list)
    for key, group in groups.items():
        if len(group) >= 5:
            by_lib[key.split("/")[0]].append(product_calibrate(group))
    by_lib["all"] = [x for v in list(by_lib.values()) for x in v]
    print(f"\nper-kernel calibration from {CALIBRATION_TIMINGS} timings, the product's rule (neighbours):")
    print("| library | launches | other configs | MAPE before | MAPE after | top-1 <= 1.03 | top-1 <= 1.05 |")
    print("|---|---|---|---|---|---|---|")
    for lib, res in by_lib.items():
        regrets = np.array([r["regret"] for r in res])
        before, after = (np.mean([a for r in res for a in r[k]]) for k in ("ape_before", "ape"))
        print(f"| {lib} | {len(res)} | {sum(len(r['ape']) for r in res)} | {before:.1%} | {after:.1%} | "
              f"{np.mean(regrets <= 1.03):.0%} | {np.mean(regrets <= 1.05):.0%} |")


def summarize_advice(groups: dict[str, list[dict]], gpu: str = "h100") -> None:
    counts = timed_counts(gpu)
    complete = {k: g for k, g in groups.items() if len(g) >= 2 and len(g) == counts.get(k, 0)}
    print(f"\nadvice over the measured space ({len(complete)} launches whose every timed config was evaluated):")
    margins = sorted({round(close_call_margin(g), 3) for g in complete.values()})
    print(f"(close-call margin {', '.join(f'{m:.3f}x' for m in margins)})")
    print("| library | launches | suggestion: changed | not slower than own | within 1.05x of best | model's top: "
          f"not slower than own | within 1.05x | measure {MEASURE}: within 1.02x of best | within 1.05x |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = defaultdict(list)
    for key, group in complete.items():
        a, t, m = advise(group, margin=close_call_margin(group)), advise(group), advise(group, MEASURE)
        if a and m:
            rows[key.split("/")[0]].append((a, t, m))
    rows["all"] = [x for v in list(rows.values()) for x in v]
    sizes = sorted(len(g) for g in complete.values())
    big = [advise(g, MEASURE) for g in complete.values() if len(g) > MEASURE + 1]
    big = [x for x in big if x]
    print(f"(configs per launch: median {sizes[len(sizes) // 2]}, range {sizes[0]}-{sizes[-1]}; on the "
          f"{len(big)} launches with more than {MEASURE + 1} configs, measure {MEASURE} is within 1.02x of the "
          f"best on {np.mean([x['vs_best'] <= 1.02 for x in big]):.0%})")
    for lib, res in rows.items():
        a, t, m = ([x[i] for x in res] for i in range(3))
        print(f"| {lib} | {len(res)} | {np.mean([x['changed'] for x in a]):.0%} | "
              f"{np.mean([x['vs_own'] <= 1.0 for x in a]):.0%} | {np.mean([x['vs_best'] <= 1.05 for x in a]):.0%} | "
              f"{np.mean([x['vs_own'] <= 1.0 for x in t]):.0%} | {np.mean([x['vs_best'] <= 1.05 for x in t]):.0%} | "
              f"{np.mean([x['vs_best'] <= 1.02 for x in m]):.0%} | {np.mean([x['vs_best'] <= 1.05 for x in m]):.0%} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-check", type=Path, default=MODEL_CHECK, help="held-out predictions (CSV)")
    parser.add_argument("--model", default="held-out library", help="the model column's value to read")
    parser.add_argument("--gpu", default="h100", choices=("h100", "h200"))
    args = parser.parse_args(argv)
    groups = launches(args.model, args.model_check, args.gpu)
    if not groups:
        print(f"no {args.model!r} predictions for {args.gpu} in {args.model_check}; run check_model.py or "
              "check_transfer.py first", file=sys.stderr)
        return 2
    summarize_product_calibration(groups)
    summarize_calibration(groups, slope_on_ceiling=False)
    summarize_calibration(groups, slope_on_ceiling=True)
    summarize_advice(groups, args.gpu)
    return 0


if __name__ == "__main__":
    sys.exit(main())
