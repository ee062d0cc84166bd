"""The transfer model for generic-path launches (`advisor.model.transfer`), leave one library out on the
corpus, both GPUs (issue 15 points 1, 2 and 5).

Rows: every timed corpus point with a generic ceiling, H100 (`data/ceilings.jsonl`, `ceilings_extra.jsonl`,
`timings.csv`) and H200 (`ceilings_h200.jsonl`, `timings_h200.csv`), feature rows as `check_model.corpus_rows`
builds them. For each library L, `fit_transfer` on the other libraries' rows of both GPUs (its candidate
and its 80% band chosen by an inner leave-one-library-out over those libraries alone), tested on L's rows
of each GPU: no row of L is used to fit or choose anything.

Next to it, on the same points: the level baseline (`check_model.level_baseline`: the ceiling times the
median measured / ceiling of the other libraries on the same GPU), the constant that minimises MAPE on the
other libraries (the transfer model's prior alone), and the shipped model as shipped (with its
generic-path band). `--previous`: also section 14's recipe (the shipped model's training,
`predict.train` with its 41 features and rows alike, on the shipped sweeps plus the other libraries'
corpus rows of the same GPU; no inner choice), minutes more.

    python benchmarks/corpus/check_transfer.py [--previous] [--write] [--write-held-out FOLDER] [--knob-ranges]

Writes `data/model_check_transfer.csv` (one row per point, GPU and model; `check_advice.py --model-check`
reads it) and prints the tables; `--write` fits the transfer model on every corpus row and saves it in
advisor/model/models/transfer/ (the shipped one is fitted on these rows and the user-style sets' since
RESULTS 57: `benchmarks/user_sets_model.py write`); `--write-held-out FOLDER` saves the four models fitted
without one library each (FOLDER/without-LIBRARY), which `check_advice_gpu.py` gives each launch's `suggest` through
TRITON_ADVISOR_TRANSFER_MODEL, so that its advice comes from a model that never saw its library;
`--knob-ranges` only stores the rows' knob ranges in the shipped model's meta (`advisor.model.knob_range`).
"""

from __future__ import annotations

import argparse
import csv
import importlib
import math
import os
import statistics
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]  # the corpus modules, and this checkout's packages

OUT = HERE / "data" / "model_check_transfer.csv"
GPUS = ("h100", "h200")
LIBRARIES = ("liger", "flaggems", "fla", "gemlite")
# One 80% band per GPU (`fit_transfer(row_gpus=...)`) rather than one for both: chosen on the design
# libraries liger, flaggems and gemlite (their nested coverage 79.3% / 81.1% pooled, 80.7% / 79.9% per
# GPU; fla's not looked at for it), RESULTS section 33. `--pooled-band` gives the other.
PER_GPU_BAND = True


def rows_of(gpu: str, held_out: bool = False) -> list[dict]:
    """`check_model.corpus_rows` of one GPU (the corpus modules read CORPUS_GPU and CORPUS_HELD_OUT when
    imported): the fitted libraries' rows, or with `held_out` the held-out libraries' (check_held_out.py)."""
    os.environ["CORPUS_GPU"] = gpu
    os.environ["CORPUS_HELD_OUT"] = "1" if held_out else ""
    import check_points

    importlib.reload(check_points)
    import check_model

    importlib.reload(check_model)
    return [dict(r, gpu=gpu, case=f"{r['library']}/{r['launch_id']}") for r in check_model.corpus_rows()]


def arrays(rows: list[dict]):
    from advisor.model.features import FEATURES, stored_feature

    x = np.array([[stored_feature(r["features"], f) for f in FEATURES] for r in rows], dtype=np.float32)
    y = np.array([math.log(r["measured_us"] / r["ceiling_us"]) for r in rows])
    return x, y, np.array([r["library"] for r in rows])


def fit_rows(rows: list[dict], per_gpu_band: bool | None = None):
    """`fit_transfer` on feature rows (each with its library, GPU and case), a band per GPU unless told otherwise."""
    from advisor.model.transfer import fit_transfer

    x, y, lib = arrays(rows)
    per_gpu = PER_GPU_BAND if per_gpu_band is None else per_gpu_band
    return fit_transfer(x, y, lib, [r["gpu"] for r in rows], [f"{r['gpu']}/{r['case']}" for r in rows],
                        row_gpus=[r["gpu"] for r in rows] if per_gpu else ())


def with_prediction(rows: list[dict], model: str, mid, lo, hi) -> list[dict]:
    return [dict(r, model=model, predicted_us=float(m), low_us=float(a), high_us=float(b))
            for r, m, a, b in zip(rows, mid, lo, hi, strict=True)]


def transfer_held_out(rows: list[dict], save_to: Path | None = None) -> tuple[list[dict], dict]:
    """Each library's rows predicted by a model fitted without it; `save_to`: each such model saved in
    save_to/without-LIBRARY (what TRITON_ADVISOR_TRANSFER_MODEL takes, for check_advice_gpu.py)."""
    x, _, lib = arrays(rows)
    out, chosen = [], {}
    for held in LIBRARIES:
        test = lib == held
        model = fit_rows([r for r, t in zip(rows, test, strict=True) if not t])
        chosen[held] = model.meta["candidate"], model.band, model.meta["inner_mape"][model.meta["candidate"]]
        if save_to is not None:
            model.meta["held_out_library"] = held
            model.save(save_to / f"without-{held}")
        test_rows = [r for r, t in zip(rows, test, strict=True) if t]
        ceiling = np.array([r["ceiling_us"] for r in test_rows])
        # The fold's spread between configs of one launch: check_advice.py's close-call margin for it.
        test_rows = [dict(r, ranking_sd=model.meta["ranking_sd"]) for r in test_rows]
        out += with_prediction(test_rows, "transfer (held-out library)", *model.predict_us(ceiling, x[test]))
        print(f"held out {held}: chose {chosen[held][0]} (inner MAPE {chosen[held][2]:.1%}), band "
              f"[{chosen[held][1][0]:+.3f}, {chosen[held][1][1]:+.3f}] log" + _gpu_bands(model), file=sys.stderr,
              flush=True)
    return out, chosen


def _gpu_bands(model) -> str:
    bands = model.meta.get("band_by_gpu", {})
    return "".join(f"; {g} [{b['band'][0]:+.3f}, {b['band'][1]:+.3f}]" for g, b in bands.items())


def constants(rows: list[dict]) -> list[dict]:
    """The level baseline (median ratio) and the MAPE-optimal constant, each from the other libraries'
    points of the same GPU; their bands are not defined (the band columns hold the point)."""
    from advisor.model.transfer import mape_level

    out = []
    for gpu in GPUS:
        for held in LIBRARIES:
            train_y = [math.log(r["measured_us"] / r["ceiling_us"]) for r in rows
                       if r["gpu"] == gpu and r["library"] != held]
            test = [r for r in rows if r["gpu"] == gpu and r["library"] == held]
            if not (test and train_y):
                continue
            for name, level in (("level baseline", statistics.median(train_y)),
                                ("MAPE constant", mape_level(np.array(train_y)))):
                us = [r["ceiling_us"] * math.exp(max(level, 0.0)) for r in test]
                out += with_prediction(test, name, us, us, us)
    return out


def shipped(rows: list[dict]) -> list[dict]:
    from advisor.model.predict import LatencyModel

    model = LatencyModel.load()
    x, _, _ = arrays(rows)
    return with_prediction(rows, "shipped", *model.predict_us(np.array([r["ceiling_us"] for r in rows]), x))


def previous(rows: list[dict]) -> list[dict]:
    """Section 14's recipe per GPU and held-out library (module docstring)."""
    import check_model

    import advisor.model.predict as predict_module

    predict_module.PARAMS = {**predict_module.PARAMS, "nthread": 1}
    base = check_model.shipped_data()
    out = []
    for gpu in GPUS:
        for held in LIBRARIES:
            train = [r for r in rows if r["gpu"] == gpu and r["library"] != held]
            test = [r for r in rows if r["gpu"] == gpu and r["library"] == held]
            model = predict_module.train(check_model.joined(base, check_model.corpus_dataset(train)))
            x, _, _ = arrays(test)
            mid, lo, hi = model.predict_log_ratio(x)
            ceiling = np.array([r["ceiling_us"] for r in test])
            mid, lo, hi = (ceiling * np.exp(np.maximum(v, 0.0)) for v in (mid, lo, hi))
            out += with_prediction(test, "section 14 recipe (held-out library)", mid, lo, hi)
            print(f"previous recipe: {gpu} without {held} done", file=sys.stderr, flush=True)
    return out


def write_predictions(path: Path, predicted: list[dict]) -> None:
    """One row per point, GPU and model (what check_advice.py --model-check reads)."""
    with open(path, "w", newline="") as f:
        fields = ["gpu", "model", "library", "launch_id", "kernel", "config", "recorded", "measured_us", "ceiling_us",
                  "predicted_us", "low_us", "high_us", "ranking_sd"]
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in r.items()} for r in predicted)


def print_tables(predicted: list[dict]) -> None:
    from check_model import figures

    models = list(dict.fromkeys(r["model"] for r in predicted))
    for gpu in GPUS:
        print(f"\n{gpu.upper()}: | held-out library | model | points (launches) | MAPE | p90 | median Spearman "
              "(launches) | top-1 <= 1.03 | top-1 <= 1.05 (launches) | 80% band covers |")
        print("|---|---|---|---|---|---|---|---|---|")
        for lib in (*LIBRARIES, "all"):
            for model in models:
                part = [r for r in predicted
                        if r["gpu"] == gpu and r["model"] == model and lib in ("all", r["library"])]
                s = figures(part)
                if not s:
                    continue
                band = "-" if model in ("level baseline", "MAPE constant") else f"{s['coverage']:.0%}"
                print(f"| {lib} | {model} | {s['points']} ({s['launches']}) | {s['mape']:.1%} | {s['p90']:.1%} | "
                      f"{s['spearman']:.2f} ({s['ranked']}) | {s['regret_103']:.0%} | {s['regret_105']:.0%} "
                      f"({s['regret_launches']}) | {band} |")


def store_knob_ranges(rows: list[dict]) -> int:
    """The values of num_warps / num_stages by kind of work in `rows` (what `fit_transfer` stores when
    it fits) written into the shipped transfer model's meta, its trees untouched: the model fitted
    before `advisor.model.knob_range` existed, on these rows' configs."""
    import json

    from advisor.model.knob_range import knob_ranges
    from advisor.model.transfer import META_FILE, TRANSFER_DIR

    path = TRANSFER_DIR / META_FILE
    meta = json.loads(path.read_text())
    meta["knob_ranges"] = knob_ranges(arrays(rows)[0])
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(meta, indent=2) + "\n")
    tmp.replace(path)
    print(f"{path}: knob_ranges {meta['knob_ranges']} ({len(rows)} rows)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--previous", action="store_true", help="also section 14's recipe (minutes)")
    parser.add_argument("--write", action="store_true", help="fit on every row and save the shipped transfer model")
    parser.add_argument("--pooled-band", action="store_true", help="one band for both GPUs (sections 18-18c)")
    parser.add_argument("--write-held-out", metavar="FOLDER", type=Path,
                        help="save the four held-out models in FOLDER/without-LIBRARY (for check_advice_gpu.py)")
    parser.add_argument("--knob-ranges", action="store_true",
                        help="only store the knob ranges of every row in the shipped transfer model's meta (no refit)")
    args = parser.parse_args(argv)
    if args.knob_ranges:
        return store_knob_ranges([r for gpu in GPUS for r in rows_of(gpu)])
    global PER_GPU_BAND
    PER_GPU_BAND = not args.pooled_band
    import warnings

    warnings.filterwarnings("ignore", message="An input array is constant")  # constant predictions rank nothing

    rows = [r for gpu in GPUS for r in rows_of(gpu)]
    for gpu in GPUS:
        part = [r for r in rows if r["gpu"] == gpu]
        print(f"{gpu}: {len(part)} points, {len({r['case'] for r in part})} launches, "
              + ", ".join(f"{lib} {sum(r['library'] == lib for r in part)}" for lib in LIBRARIES), file=sys.stderr)
    held, chosen = transfer_held_out(rows, args.write_held_out)
    predicted = held + constants(rows) + shipped(rows) + (previous(rows) if args.previous else [])
    print_tables(predicted)
    print("\nchosen per held-out library (inner leave-one-library-out):")
    for lib, (name, band, inner) in chosen.items():
        print(f"- {lib}: {name}, inner MAPE {inner:.1%}, band x{math.exp(band[0]):.2f} .. x{math.exp(band[1]):.2f}")
    write_predictions(OUT, predicted)
    print(f"\n{OUT.name}: {len(predicted)} rows")
    if args.write:
        model = fit_rows(rows)
        print(f"shipped transfer model: {model.meta['candidate']}, band [{model.band[0]:+.3f}, {model.band[1]:+.3f}]"
              f" log{_gpu_bands(model)}, ranking sd {model.meta['ranking_sd']:.4f}, {len(rows)} rows -> {model.save()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
