"""Corpus timings that measured the host, not the kernel: find them, and replace them with a re-timing.

Two rules, neither naming a kernel:
- *one short launch per sample*: a row timed with a CUDA graph of a single launch (`launches_per_sample` 1)
  although the launch took under 100 us. The graph was sized from one cold launch; one replay of a one-launch
  graph then also times the host's submission of it (RESULTS 45: rows of 58-93 us re-timed at 7.6-47 us with
  4-10 launches a sample).
- *a GPU pair out of reach*: the same config timed on the H100 and the H200 more than 2x apart. The two have
  the same SM and clocks within a few per cent, and the H200's memory is 1.43x faster: a 2x gap is no
  property of the kernel; the slower of the two rows is the one replaced.

    python benchmarks/corpus/retime_artefacts.py ids                  # the launches to time again (comma list)
    python benchmarks/corpus/retime_artefacts.py apply H100.csv H200.csv [--dry-run]

`ids` feeds `CORPUS_LAUNCHES` of `measure.py time` (with `CORPUS_TIMINGS` set to a new file, once per GPU);
`apply` writes each flagged row's re-timed `us`, `min_us`, `max_us`, `launches_per_sample` and `replays` into
`data/timings.csv` / `data/timings_h200.csv`, the old time kept in its note. A flagged row the re-timing lacks
(or timed wrong there) stays as it was and is listed.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
FILES = {"h100": DATA / "timings.csv", "h200": DATA / "timings_h200.csv"}
SHORT_US = 100.0      # a single launch shorter than this does not fill a sample
PAIR_LIMIT = 2.0      # same SM and clocks, 1.43x the memory bandwidth: no kernel runs 2x apart
FIELDS = ("us", "min_us", "max_us", "launches_per_sample", "replays")


def _key(row: dict) -> tuple[str, str, str]:
    return row["library"], row["launch_id"], row["config"]


def read(path: Path) -> tuple[list[str], list[dict]]:
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), list(reader)


def flagged(rows: dict[str, list[dict]]) -> dict[str, dict[tuple, str]]:
    """gpu -> {row key: why} for the rows either rule flags."""
    ok = {gpu: {_key(r): r for r in rs if r["status"] == "ok" and r["us"]} for gpu, rs in rows.items()}
    out: dict[str, dict[tuple, str]] = {gpu: {} for gpu in rows}
    for gpu, timed in ok.items():
        for key, r in timed.items():
            if r["launches_per_sample"] == "1" and float(r["us"]) < SHORT_US:
                out[gpu][key] = f"one launch a sample at {float(r['us']):.3f} us"
    for key in ok["h100"].keys() & ok["h200"].keys():
        a, b = float(ok["h100"][key]["us"]), float(ok["h200"][key]["us"])
        if max(a, b) > PAIR_LIMIT * min(a, b):
            slower = "h100" if a > b else "h200"
            out[slower].setdefault(key, f"{max(a, b) / min(a, b):.2f}x the other GPU's {min(a, b):.3f} us")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("ids", "apply"))
    parser.add_argument("retimed", nargs="*", help="apply: the H100's and the H200's re-timing CSVs")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    tables = {gpu: read(path) for gpu, path in FILES.items()}
    flags = flagged({gpu: rows for gpu, (_, rows) in tables.items()})
    if args.step == "ids":
        print(",".join(sorted({key[1] for per_gpu in flags.values() for key in per_gpu})))
        return 0
    if len(args.retimed) != 2:
        parser.error("apply takes the H100's and the H200's re-timing CSVs")
    for gpu, retimed_path in zip(FILES, args.retimed, strict=True):
        fields, rows = tables[gpu]
        retimed = {_key(r): r for r in read(Path(retimed_path))[1] if r["status"] == "ok" and r["us"]}
        changed = 0
        for r in rows:
            why = flags[gpu].get(_key(r))
            if why is None:
                continue
            new = retimed.get(_key(r))
            if new is None:
                print(f"{gpu}: {r['kernel']} {r['config']}: flagged ({why}), not re-timed: kept")
                continue
            print(f"{gpu}: {r['kernel'][:40]:40s} {float(r['us']):9.3f} -> {float(new['us']):9.3f} us  ({why})")
            note = f"re-timed 2026-11-24 (RESULTS 45; was {r['us']} us at {r['launches_per_sample']} a sample: {why})"
            r.update({f: new[f] for f in FIELDS}, note=(r["note"] + "; " if r["note"] else "") + note)
            changed += 1
        print(f"{gpu}: {changed} of {len(flags[gpu])} flagged rows replaced")
        if not args.dry_run and changed:
            tmp = FILES[gpu].with_suffix(".tmp")
            with open(tmp, "w", newline="") as fh:
                writer = csv.DictWriter(fh, fields)
                writer.writeheader()
                writer.writerows(rows)
            tmp.replace(FILES[gpu])
    return 0


if __name__ == "__main__":
    sys.exit(main())
