"""The transfer model with the user-style sets as training data (issue 15): does a model that has seen eight sets of
kernels written the way users write them predict a ninth better than the model fitted on the corpus alone?

    python benchmarks/user_sets_model.py rows [--sets 1-9] [--out benchmarks/data/user_sets_rows.jsonl.gz]  # CPU
    python benchmarks/user_sets_model.py check [--rows ...] [--torchao] [--previous FOLDER]           # CPU
    python benchmarks/user_sets_model.py write [--rows ...]     # fit on the corpus + every set: the shipped model
    python benchmarks/user_sets_model.py margin [--rows ...] [--held-out ROWS]   # CPU: section 28's margin re-read

`rows`: every config timed on a GPU in sets 1-9 (`benchmarks/fresh_user_kernels.py device`, the row files in
SET_FILES), its feature row as the product computes it today (`subject.ceilings` + `feature_row`: the generic
ceiling, evaluated on this machine), its measured time and ceiling. One row per (set, GPU, launch, config).

`check`: leave one set out. For each set S, `advisor.model.transfer.fit_transfer` on the corpus's generic-path
rows (both GPUs, the four fitted libraries, as the shipped transfer model) plus the rows of the other sets, each
set a "library" of its own for the inner choice; tested on S's rows. Next to it, on the same rows, the model in
`--previous` (default: the shipped one, which since `write` has seen every set: give the one fitted on the corpus
alone, as of commit 9040840) and the corpus-only refit with the same code. Figures: `check_model.figures`.
Then leave one corpus library out with and without all sets in training. Figures per model: MAPE, median
Spearman per launch (>= 3 configs), the predicted fastest within 1.05x of the fastest timed, 80% band coverage.

`margin`: `suggest`'s choice without timings (`advisor.advice.search.keep_current`: the model's best is named only
when predicted faster than the launch's own config by exp(z sqrt(2) ranking_sd)) simulated over each launch's timed
configs, for z on a grid: with each set's predictions from the model fitted without it, and with `--held-out`, rows
of sets no model saw (`rows --sets 10-11 --out ...`) predicted by the shipped model. Per z: the named config not
slower than the launch's own, and within 1.05x of the fastest timed (issue 15's first two advice targets).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks" / "corpus")]
ROWS = DATA / "user_sets_rows.jsonl.gz"

# The row files of each set's main timings on each GPU (re-runs of single launches and variants left out).
SET_FILES: dict[int, dict[str, list[str]]] = {
    1: {"h100": ["fresh_user_h100.json"], "h200": ["fresh_user_h200.json"]},
    2: {"h100": ["fresh_user2_h100.json"], "h200": ["fresh_user2_h200.json"]},
    **{n: {g: [f"fresh_user{n}_{g}_a.json", f"fresh_user{n}_{g}_b.json"] for g in ("h100", "h200")}
       for n in range(3, 8)},
    8: {"h100": ["fresh_user8_h100_a.json", "fresh_user8_h100_b.json"],
        "h200": ["fresh_user8_h200_a.json", "fresh_user8_h200_b.json"]},
    9: {"h200": ["fresh_user9_h200_a.json", "fresh_user9_h200_b.json"]},
    10: {"h200": ["fresh_user10_h200.json"]},   # held out from the shipped model (RESULTS 58-59)
    11: {"h200": ["fresh_user11_h200.json"]},
    12: {"h200": ["fresh_user12_h200.json"]},   # held out from the shipped model (RESULTS 60)
    # held out from the shipped model (RESULTS 61); the decode step's rows as re-timed after the faults it found
    13: {"h200": ["fresh_user13_h200_fixed.json"]},
    14: {"h200": ["fresh_user14_h200_a.json", "fresh_user14_h200_b.json"]},   # held out (RESULTS 62)
    15: {"h100": ["fresh_user15_h100_a.json", "fresh_user15_h100_b.json"]},   # held out (RESULTS 63)
}
MARGIN_Z = (0.0, 0.25, 0.5, 0.67, 0.8416, 1.2)


def parse_sets(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def set_rows(sets, gpus=None, report_missing: bool = False):
    """(set, GPU, row) of every launch row in the sets' row files (SET_FILES), in file order; `gpus`: only those."""
    for n in sets:
        for gpu, files in SET_FILES[n].items():
            if gpus is not None and gpu not in gpus:
                continue
            for name in files:
                if not (DATA / name).exists():
                    if report_missing:
                        print(f"set {n} {gpu}: {name} missing", file=sys.stderr)
                    continue
                for r in json.loads((DATA / name).read_text())["rows"]:
                    yield n, gpu, r


def build_rows(sets: list[int], out: Path) -> None:
    from advisor.advice.suggest import subjects_for
    from advisor.model.features import feature_row
    from ceilings.hardware import resolve_gpu
    from ceilings.launch import Config
    from ceilings.roofline import model_ceiling_us

    done = 0
    with gzip.open(out, "wt") as f:
        for n, gpu, r in set_rows(sets, report_missing=True):
            timed = [(t["config"], t["us"]) for t in r.get("timed", []) if "us" in t]
            if not timed:
                continue
            try:
                subject = next(s for s in subjects_for(r["file"], call=r["call"], gpu=resolve_gpu(gpu))
                               if s.label == r["launch"])
                configs = [Config.from_dict(c) for c, _ in timed]
                ceilings = subject.ceilings(configs)
            except Exception as exc:  # noqa: BLE001 -- a launch the product cannot evaluate is reported
                print(f"set {n} {gpu} {r['kernel']}: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
                continue
            for (_, us), config, c in zip(timed, configs, ceilings, strict=True):
                f.write(json.dumps({
                    "set": n, "gpu": gpu, "library": f"set{n}", "kernel": r["kernel"],
                    "case": f"set{n}/{r['launch']}", "config": config.label(), "measured_us": us,
                    # the ceiling the features describe (Ceiling.model_view), as the model's rows were fitted
                    "ceiling_us": model_ceiling_us(c), "features": feature_row(c, c.demand, config, subject.spec),
                }) + "\n")
                done += 1
            print(f"set {n} {gpu} {r['kernel'][:30]:30s} {len(timed)} configs", file=sys.stderr, flush=True)
    print(f"wrote {done} rows to {out}")


def read_rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def corpus() -> list[dict]:
    from check_transfer import GPUS, rows_of

    return [r for gpu in GPUS for r in rows_of(gpu)]


def figures(rows: list[dict], mid: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> dict:
    """`check_model.figures` (the corpus checks' one definition) of `rows` predicted `mid` within [lo, hi], a launch
    per GPU and case."""
    from check_model import figures as corpus_figures

    f = corpus_figures([dict(r, case=f"{r['gpu']}/{r['case']}", predicted_us=float(m), low_us=float(a),
                             high_us=float(b)) for r, m, a, b in zip(rows, mid, lo, hi, strict=True)])
    return {"rows": f["points"], "launches": f["launches"], "mape": f["mape"], "spearman": f["spearman"],
            "top1_105": f["regret_105"], "band": f["coverage"]}


def fit(train: list[dict]):
    from check_transfer import fit_rows

    return fit_rows(train, per_gpu_band=True)


def predict(model, rows: list[dict]):
    from check_transfer import arrays

    x, _, _ = arrays(rows)
    return model.predict_us(np.array([r["ceiling_us"] for r in rows]), x)


def line(name: str, f: dict) -> str:
    return (f"| {name} | {f['launches']} | {f['rows']} | {f['mape']:.1%} | {f['spearman']:.2f} | "
            f"{f['top1_105']:.0%} | {f['band']:.0%} |")


HEADER = "| model | launches | configs | MAPE | Spearman | top-1 <= 1.05 | 80% band |\n" + "|---" * 7 + "|"


def held_out_by_set(users: list[dict], base: list[dict]):
    """(set, its rows, the model fitted on the corpus and every other set) for each set in `users`."""
    for s in sorted({r["set"] for r in users}):
        yield s, [r for r in users if r["set"] == s], fit(base + [r for r in users if r["set"] != s])


def check(path: Path, previous: Path | None) -> None:
    from advisor.model.transfer import TransferModel

    users = read_rows(path)
    base = corpus()
    # the model to compare with: once `write` has run, the shipped one has seen every set (give --previous)
    shipped = TransferModel.load(previous) if previous else TransferModel.load()
    corpus_only = fit(base)
    header = HEADER
    pooled: dict[str, tuple[list, list, list, list]] = {k: ([], [], [], []) for k in ("shipped", "refit", "sets")}
    for s, test, model in held_out_by_set(users, base):
        print(f"\nset {s} held out (model chose {model.meta['candidate']})\n{header}")
        for name, m in (("shipped", shipped), ("refit", corpus_only), ("sets", model)):
            mid, lo, hi = predict(m, test)
            print(line({"shipped": f"{previous or 'shipped'}", "refit": "corpus only, refitted now",
                        "sets": "corpus + the other sets"}[name], figures(test, mid, lo, hi)), flush=True)
            for acc, v in zip(pooled[name], (test, mid, lo, hi), strict=True):
                acc.extend(v)
    print(f"\nall sets, each held out from its own model\n{header}")
    for name, (rows, mid, lo, hi) in pooled.items():
        print(line(name, figures(rows, np.array(mid), np.array(lo), np.array(hi))))
    print(f"\ncorpus libraries, each held out; with and without the sets in training\n{header}")
    held: dict[str, tuple[list, list, list, list]] = {k: ([], [], [], []) for k in ("without sets", "with sets")}
    for lib in sorted({r["library"] for r in base}):
        test = [r for r in base if r["library"] == lib]
        rest = [r for r in base if r["library"] != lib]
        for name, train in (("without sets", rest), ("with sets", rest + users)):
            mid, lo, hi = predict(fit(train), test)
            print(line(f"{lib}, {name}", figures(test, mid, lo, hi)), flush=True)
            for acc, v in zip(held[name], (test, mid, lo, hi), strict=True):
                acc.extend(v)
    print(f"\nthe four libraries pooled, per GPU\n{header}")
    for name, (rows, mid, lo, hi) in held.items():
        for gpu in ("h100", "h200"):
            keep = np.array([r["gpu"] == gpu for r in rows])
            part = [r for r, k in zip(rows, keep, strict=True) if k]
            print(line(f"{gpu}, {name}", figures(part, np.array(mid)[keep], np.array(lo)[keep],
                                                 np.array(hi)[keep])))


def torchao(path: Path, previous: Path | None) -> None:
    """The held-out library (torchao: no model or rule was fitted on it) under a model fitted on the corpus and
    every set, against `previous` (a saved transfer model's folder; default: the one shipped now)."""
    from check_transfer import GPUS, rows_of

    from advisor.model.transfer import TransferModel

    before = TransferModel.load(previous) if previous else TransferModel.load()
    after = fit(corpus() + read_rows(path))
    print(f"\ntorchao, held out from both models\n{HEADER}")
    for gpu in GPUS:
        rows = rows_of(gpu, held_out=True)
        for name, m in ((f"{previous or 'shipped'}", before), ("corpus + every set", after)):
            print(line(f"{gpu}, {name}", figures(rows, *predict(m, rows))), flush=True)


def write(path: Path) -> None:
    """Fit the shipped transfer model on the corpus and every set's rows, and save it. Its knob ranges (the
    values `advice.search` names without timing, `advisor.model.knob_range`) stay those of the corpus rows:
    held out by set, the sets' few single-stage dot loops are still predicted 0.41-0.72x of their time where
    the same launches' other configs are 1.08x (an implicit-GEMM conv, RESULTS 57), so the refit does not
    make that value safe to name."""
    from check_transfer import arrays

    from advisor.model.knob_range import knob_ranges

    base = corpus()
    train = base + read_rows(path)
    model = fit(train)
    model.meta["knob_ranges"] = knob_ranges(arrays(base)[0])
    model.meta["knob_ranges_rows"] = "the corpus's rows only (benchmarks/user_sets_model.py write)"
    print(f"transfer model: {model.meta['candidate']}, {len(train)} rows, libraries {model.meta['libraries']}, "
          f"inner MAPE {model.meta['inner_mape'][model.meta['candidate']]:.1%} -> {model.save()}")


def currents() -> dict[tuple[int, str, str], str]:
    """(set, GPU, case) -> the label of the launch's own config, from the sets' row files."""
    from ceilings.launch import Config

    return {(n, gpu, f"set{n}/{r['launch']}"): Config.from_dict(r["current"]).label()
            for n, gpu, r in set_rows(SET_FILES) if "current" in r}


def margin_outcomes(rows: list[dict], predicted: np.ndarray, sd: list[float], z: float, own: dict) -> list[tuple]:
    """Per launch with its own config and >= 3 configs timed: (named not slower than its own, named within 1.05x of
    the fastest timed) when the model's fastest is named only past exp(z sqrt(2) sd)."""
    launches: dict[tuple, list] = {}
    for r, p, s in zip(rows, predicted, sd, strict=True):
        launches.setdefault((r["set"], r["gpu"], r["case"]), []).append((r["config"], r["measured_us"], float(p), s))
    out = []
    for key, configs in launches.items():
        mine = next((c for c in configs if c[0] == own.get(key)), None)
        if mine is None or len(configs) < 3:
            continue
        lead = min(configs, key=lambda c: c[2])
        named = lead if mine[2] / lead[2] >= np.exp(z * np.sqrt(2.0) * mine[3]) else mine
        out.append((named[1] <= mine[1], named[1] <= 1.05 * min(c[1] for c in configs)))
    return out


def margin(path: Path, held_out: Path | None) -> None:
    from advisor.model.transfer import TransferModel

    users, base, own = read_rows(path), corpus(), currents()
    rows, predicted, sd = [], [], []
    for _, test, model in held_out_by_set(users, base):
        rows += test
        predicted += list(predict(model, test)[0])
        sd += [model.meta["ranking_sd"]] * len(test)
    cases = [("sets, each predicted by the model fitted without it", rows, np.array(predicted), sd)]
    if held_out:
        shipped, unseen = TransferModel.load(), read_rows(held_out)
        cases.append((f"sets {sorted({r['set'] for r in unseen})}, the shipped model", unseen,
                      predict(shipped, unseen)[0], [shipped.meta["ranking_sd"]] * len(unseen)))
    print("| rows | z | launches | named not slower than own | named within 1.05x of fastest timed |\n"
          "|---|---|---|---|---|")
    for name, part, mid, spread in cases:
        for z in MARGIN_Z:
            outcomes = margin_outcomes(part, mid, spread, z, own)
            n = len(outcomes)
            print(f"| {name} | {z:g} | {n} | {sum(a for a, _ in outcomes) / n:.0%} | "
                  f"{sum(b for _, b in outcomes) / n:.0%} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    r = sub.add_parser("rows")
    r.add_argument("--sets", default="1-9")
    r.add_argument("--out", type=Path, default=ROWS)
    c = sub.add_parser("check")
    c.add_argument("--rows", type=Path, default=ROWS)
    c.add_argument("--torchao", action="store_true", help="only the held-out library, against --previous")
    c.add_argument("--previous", type=Path, help="a transfer model's folder to compare with (default: shipped)")
    w = sub.add_parser("write", help="fit the shipped transfer model on the corpus and every set, and save it")
    w.add_argument("--rows", type=Path, default=ROWS)
    m = sub.add_parser("margin", help="suggest's keep-the-current margin simulated over the sets' timed configs")
    m.add_argument("--rows", type=Path, default=ROWS)
    m.add_argument("--held-out", type=Path, help="rows of sets no model saw (rows --sets 10-11 --out ...)")
    args = parser.parse_args(argv)
    if args.step == "rows":
        build_rows(parse_sets(args.sets), args.out)
    elif args.step == "write":
        write(args.rows)
    elif args.step == "margin":
        margin(args.rows, args.held_out)
    elif args.torchao:
        torchao(args.rows, args.previous)
    else:
        check(args.rows, args.previous)
        torchao(args.rows, args.previous)
    return 0


if __name__ == "__main__":
    sys.exit(main())
