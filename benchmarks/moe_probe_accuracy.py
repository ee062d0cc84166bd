"""How closely the causes `advisor diagnose` reads off the loop probe add up to each config's gap (issue 16):
the share of measured GEMM1 configs whose uncapped named total lies within 0.8-1.25x of the gap between the
ideal and the measured time, per GPU, on two disjoint splits, under each way of reading the probe.

    python benchmarks/moe_probe_accuracy.py [--gpus h100,h200] [--choices all|current]

Splits (benchmarks/diagnose_check.py's rows): **fit** = the sweeps of ANCHORS section 3's shapes
(`h100_moe_gemm1_sweep_v2`, `h200_moe_gemm1_sweep`) and the fusion runs; **held out** = the collections of the
other models' shapes (`*_moe_collect1`, `*_moe_collect2`). A choice is made on the fit split's rows alone;
the held-out split is reported, never chosen on. Rows whose gap is under 3% of their time are left out, as
diagnose_check does.

The choices (each one a way of reading the probe, not a constant fitted to a time):
- clock: `load` scales the probe's times by its recorded SM clock over the sweeps' protocol's on a heavy
  launch (both clock64 against event time, benchmarks/moe_probe_clock.py), in proportion to the diagnosed
  launch's tensor load up to that launch's; `measured` by the whole ratio whatever the load; `anchors` by
  1 / 0.82 (ANCHORS section 6's 1.37 / 1.67 ms, the older probe's rule).
- ramp: `further` charges the first round's fixed cost once and the two-round probe's further-round cost for
  every other round; `first` charges the first round's for every round (the older probe's rule).
- probe: `own` reads the probe of the GPU diagnosed; `h100` reads the H100's on both GPUs (the older rule).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from diagnose_check import SMALL_GAP, diagnose_rows  # noqa: E402

from advisor.advice import diagnose_loop as dl  # noqa: E402

CHOICES = {"clock": ("load", "measured", "anchors"), "ramp": ("further", "first"), "probe": ("own", "h100")}
CURRENT = {"clock": "load", "ramp": "further", "probe": "own"}
OLDER = {"clock": "anchors", "ramp": "first", "probe": "h100"}


def split_of(source: str) -> str:
    return "held out" if "collect" in source else "fit"


def apply(choice: dict) -> None:
    """Read the probe files as `choice` says (patches advisor.advice.diagnose_loop for this process)."""
    files = dl._probe_files

    @functools.lru_cache(maxsize=8)
    def probe_files(arch: int) -> tuple[dict, ...]:
        docs = []
        for doc in files(arch):
            if choice["probe"] == "h100" and "H100" not in doc["gpu"]:
                continue
            doc = dict(doc)
            if choice["clock"] == "anchors":
                doc["clock"] = {}
            elif choice["clock"] == "measured":
                doc["clock"] = {k: v for k, v in doc["clock"].items() if k != "sweep_protocol_tensor_load"}
            if choice["ramp"] == "first":
                doc["loops"] = {k: {kk: vv for kk, vv in v.items() if kk != "us_r2"} for k, v in doc["loops"].items()}
            docs.append(doc)
        return tuple(docs)

    dl._probe_files = probe_files


def accuracy(gpu_names: list[str]) -> dict:
    """(gpu, split) -> [estimated / gap] over the rows with a gap."""
    out: dict[tuple, list[float]] = {}
    for gpu_name in gpu_names:
        for source, _spec, _config, dx in diagnose_rows(gpu_name):
            if dx.gap_us < SMALL_GAP * dx.time_us or dx.gap_us <= 0:
                continue
            named = sum(c.estimate_us for c in dx.causes if c.name != "unexplained")
            out.setdefault((gpu_name, split_of(source)), []).append(named / dx.gap_us)
    return out


def within(ratios: list[float]) -> float:
    return sum(0.8 <= r <= 1.25 for r in ratios) / len(ratios)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", default="h100,h200")
    ap.add_argument("--choices", default="all", help="'all' (every clock and ramp rule, and the older rule) or "
                    "'current'")
    args = ap.parse_args(argv)
    gpus = args.gpus.split(",")
    # Every clock and ramp rule on each GPU's own probe, then the older rule on the H100's probe.
    combos = ([CURRENT] if args.choices == "current" else
              [dict(zip(("clock", "ramp"), c, strict=True), probe="own")
               for c in itertools.product(CHOICES["clock"], CHOICES["ramp"])] + [OLDER])
    original = dl._probe_files
    print(f"{'clock':<9}{'ramp':<8}{'probe':<6}" + "".join(
        f"{g + ' ' + s + ': within (median)':>34}" for g in gpus for s in ("fit", "held out")))
    for choice in combos:
        dl._probe_files = original
        apply(choice)
        acc = accuracy(gpus)
        cells = "".join(f"{within(acc[(g, s)]):>24.1%} ({statistics.median(acc[(g, s)]):.2f}, n={len(acc[(g, s)])})"
                        for g in gpus for s in ("fit", "held out"))
        print(f"{choice['clock']:<9}{choice['ramp']:<8}{choice['probe']:<6}{cells}", flush=True)
    dl._probe_files = original
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
