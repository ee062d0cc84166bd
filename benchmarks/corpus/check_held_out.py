"""The shipped transfer model on a library no choice was made on (replay.HELD_OUT: torchao), both GPUs.

The transfer model shipped in advisor/model/models/transfer/ was fitted on the four corpus libraries
(liger, flaggems, fla, gemlite: `check_transfer.py --write`); the held-out library's rows are read from
files of their own (`timings_held_out*.csv`, `ceilings_held_out*.jsonl`, made by `CORPUS_HELD_OUT=1
check_ceiling.py`) that no fitting script reads. Per GPU: MAPE, p90, median Spearman per launch, top-1
regret and 80% band coverage of the transfer model, next to the ceiling alone and the level baseline's
analogue (the ceiling times the median measured / ceiling of the four libraries' points on that GPU).

    CORPUS_HELD_OUT=1 python benchmarks/corpus/check_held_out.py

Writes `data/model_check_held_out.csv` (check_transfer.py's columns; `check_advice.py --model-check` reads
it) and prints the table.
"""

from __future__ import annotations

import math
import statistics
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

OUT = HERE / "data" / "model_check_held_out.csv"
GPUS = ("h100", "h200")


def predictions(rows: list[dict], fitted_rows: list[dict]) -> list[dict]:
    from advisor.model.features import FEATURES, stored_feature
    from advisor.model.transfer import TransferModel

    model = TransferModel.load()
    x = np.array([[stored_feature(r["features"], f) for f in FEATURES] for r in rows], dtype=np.float32)
    ceiling = np.array([r["ceiling_us"] for r in rows])
    mid, lo, hi = model.predict_us(ceiling, x)
    sd = model.meta.get("ranking_sd")
    out = [dict(r, model="transfer (shipped)", predicted_us=float(m), low_us=float(a), high_us=float(b),
                ranking_sd=sd) for r, m, a, b in zip(rows, mid, lo, hi, strict=True)]
    out += [dict(r, model="ceiling alone", predicted_us=r["ceiling_us"], low_us=r["ceiling_us"],
                 high_us=r["ceiling_us"]) for r in rows]
    level = {g: statistics.median(r["measured_us"] / r["ceiling_us"] for r in fitted_rows if r["gpu"] == g)
             for g in {r["gpu"] for r in fitted_rows}}
    out += [dict(r, model="level baseline", predicted_us=r["ceiling_us"] * level[r["gpu"]],
                 low_us=r["ceiling_us"] * level[r["gpu"]], high_us=r["ceiling_us"] * level[r["gpu"]])
            for r in rows]
    return out


def main() -> int:
    warnings.filterwarnings("ignore", message="An input array is constant")
    from check_transfer import rows_of, write_predictions

    held = [r for gpu in GPUS for r in rows_of(gpu, held_out=True)]
    fitted = [r for gpu in GPUS for r in rows_of(gpu, False)]
    from check_model import figures

    predicted = predictions(held, fitted)
    print("| GPU | model | points (launches) | MAPE | p90 | median Spearman (launches) | top-1 <= 1.03 | "
          "top-1 <= 1.05 (launches) | 80% band covers |")
    print("|---|---|---|---|---|---|---|---|---|")
    for gpu in GPUS:
        for model in dict.fromkeys(r["model"] for r in predicted):
            s = figures([r for r in predicted if r["gpu"] == gpu and r["model"] == model])
            if not s:
                continue
            band = f"{s['coverage']:.0%}" if model.startswith("transfer") else "-"
            print(f"| {gpu.upper()} | {model} | {s['points']} ({s['launches']}) | {s['mape']:.1%} | {s['p90']:.1%} | "
                  f"{s['spearman']:.2f} ({s['ranked']}) | {s['regret_103']:.0%} | {s['regret_105']:.0%} "
                  f"({s['regret_launches']}) | {band} |")
    write_predictions(OUT, predicted)
    levels = {g: math.log(statistics.median(r["measured_us"] / r["ceiling_us"] for r in fitted if r["gpu"] == g))
              for g in GPUS}
    print(f"\n{OUT.name}: {len(predicted)} rows; level baseline factors from {len(fitted)} fitted-library points; "
          "log of the median ratio per GPU: " + ", ".join(f"{g} {v:+.3f}" for g, v in levels.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
