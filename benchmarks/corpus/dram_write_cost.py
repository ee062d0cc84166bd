"""Does a written DRAM byte cost more than a read one? (RESULTS 63) From the corpus's own timings, no GPU run.

The DRAM floor charges every compulsory byte at the read probe's rate (`advisor calibrate`'s `dram_read_tbs`).
The calibration's copy probe (torch's `copy_`) runs slower, 0.78x of it on the H100 and 0.63x on the H200, which
read as a cost per written byte of 2 / copy - 1 / read (a write rate near 2.0 TB/s on both; `advisor diagnose`'s
"DRAM writes" cause used it until RESULTS 64, which prices it by a read/write stream instead). Were that a
property of the DRAM, a floor of R / read + (W - L2) / write (the written bytes past what the L2 can hold dirty,
`ceilings.roofline.written_back_bytes`'s argument) would hold and be tighter. This takes the read and written
bytes of each evaluated corpus point (`advisor ceiling --detail`'s `dram_read` / `dram_written`, stored in the
check's ceilings file) and the measured times of a GPU's check, and reports:

- per point that writes more than the L2 holds and is not bound by the empty kernel's time: the rate of all its
  bytes, (R + W) / t, and the write rate its time leaves after the reads at the read rate, W / (t - R / read);
- per write rate (none, the copy probe's, and any given): the share of points at measured >= 0.97 x the ceiling
  that floor would give, its lowest ratio, and the median of each launch's best config.

    python benchmarks/corpus/dram_write_cost.py --ceilings data/ceilings_triton3.6.0.jsonl \
        --check data/ceiling_check_triton3.6.0.csv --gpu h100 [--write-tbs 2.6 3.0]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ceilings.hardware import load_calibration, resolve_gpu  # noqa: E402
from ceilings.roofline import _bind  # noqa: E402  (the roofline's own rule for which terms bind)


def rebound(doc: dict, read_tbs: float, write_tbs: float | None, l2: float, launch_us: float) -> float:
    """The stored point's ceiling with its DRAM floor split into reads and writes (None: as stored)."""
    pipes = dict(doc["pipelines"])
    floor = ((doc.get("detail") or {}).get("floor") or {}).get("bytes") or {}
    if write_tbs and pipes.get("dram") and floor.get("dram_written"):
        split = floor["dram_read"] / (read_tbs * 1e12) + max(0.0, floor["dram_written"] - l2) / (write_tbs * 1e12)
        pipes["dram"] = max(pipes["dram"], split * 1e6)
    # A stored launch term above the launch floor is the empty kernel's time of the grid (`roofline._bind`).
    dispatch = pipes["launch"] if (pipes.get("launch") or 0.0) > launch_us else None
    return _bind(pipes, launch_us, dispatch)[1]


def timed_points(ceilings: Path, check: Path) -> list[tuple[dict, dict]]:
    """(check row, ceiling document) of every point the check timed (`ok`) whose ceiling the file holds."""
    docs = {}
    for line in ceilings.read_text().splitlines():
        doc = json.loads(line)
        if "ceiling_us" in doc:
            docs[(doc["library"], doc["launch_id"], doc["label"])] = doc
    with open(check) as f:
        rows = [(r, docs.get((r["library"], r["launch_id"], r["config"]))) for r in csv.DictReader(f)
                if r["status"] == "ok" and r["measured_us"]]
    return [(r, d) for r, d in rows if d is not None]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ceilings", required=True, type=Path, help="a check's ceilings file (with --detail bytes)")
    ap.add_argument("--check", required=True, type=Path, help="the same GPU's check CSV (measured_us per point)")
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--write-tbs", type=float, nargs="*", default=[])
    args = ap.parse_args(argv)
    gpu = resolve_gpu(args.gpu)
    read, l2, launch = gpu.rates.dram_tbs, gpu.spec.l2_bytes, gpu.rates.launch_us
    cal, _ = load_calibration(gpu.name)
    copy = cal.values["dram_copy_tbs"]
    copy_write = 1.0 / (2.0 / copy - 1.0 / read)
    rows = timed_points(args.ceilings, args.check)
    print(f"{gpu.name}: {len(rows)} points; read probe {read} TB/s, copy probe {copy} TB/s (a written byte at "
          f"{copy_write:.2f} TB/s by it), L2 {l2 >> 20} MiB, launch {launch} us")

    mixes = []
    for r, d in rows:
        b = d["detail"]["floor"]["bytes"]
        t = (float(r["measured_us"]) - launch) * 1e-6
        if b.get("dram_written", 0) > l2 and d["pipelines"]["dram"] and d["binding_pipe"] != "launch":
            left = t - b["dram_read"] / (read * 1e12)
            mixes.append({"kernel": d["kernel"], "read_mb": b["dram_read"] / 1e6, "written_mb": b["dram_written"] / 1e6,
                          "us": float(r["measured_us"]), "total_tbs": (b["dram_read"] + b["dram_written"]) / t / 1e12,
                          "write_tbs": b["dram_written"] / left / 1e12 if left > 0 else float("inf")})
    mixes.sort(key=lambda m: -m["total_tbs"])
    print(f"\n{len(mixes)} points write more than the L2 holds; the fastest by the rate of all their bytes:")
    print("| kernel | read MB | written MB | measured us | (R + W) / t TB/s | W / (t - R / read) TB/s |")
    print("|---|---|---|---|---|---|")
    seen = set()
    for m in mixes:
        if m["kernel"] in seen:
            continue
        seen.add(m["kernel"])
        print(f"| {m['kernel']} | {m['read_mb']:.0f} | {m['written_mb']:.0f} | {m['us']:.1f} | {m['total_tbs']:.2f} | "
              f"{m['write_tbs']:.2f} |")
        if len(seen) == 8:
            break

    print("\n| write rate TB/s | points >= 0.97 x ceiling | lowest | median of best configs | launches moved |")
    print("|---|---|---|---|---|")
    for write in [None, round(copy_write, 3), *args.write_tbs]:
        ratios, best, moved = [], {}, set()
        for r, d in rows:
            ceiling = rebound(d, read, write, l2, launch)
            key = (r["library"], r["launch_id"])
            if ceiling > d["ceiling_us"] * 1.001:
                moved.add(key)
            us = float(r["measured_us"])
            ratios.append(us / ceiling)
            if key not in best or us < best[key][0]:
                best[key] = (us, us / ceiling)
        sound = sum(x >= 0.97 for x in ratios)
        label = "none (as shipped)" if write is None else (f"{write} (copy probe)" if write == round(copy_write, 3)
                                                           else str(write))
        print(f"| {label} | {sound} / {len(ratios)} ({100 * sound / len(ratios):.2f}%) | {min(ratios):.3f} | "
              f"{statistics.median(v[1] for v in best.values()):.4f} ({len(best)} launches) | {len(moved)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
