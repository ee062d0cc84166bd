"""Could a Little's-law floor lift the DRAM-bound launches' ceilings? (RESULTS 66) From the corpus's own timings.

A floor of compulsory DRAM bytes x the least DRAM latency / the most bytes the SMs can keep in flight binds only
where a launch could not have kept enough bytes in flight for the rate it ran at. For each launch's fastest
config whose ceiling binds on DRAM, with measured / ceiling in a band: the rate it moved its compulsory bytes at,
and the bytes each resident warp must have had in flight for it at the given latency (rate x latency / SMs /
resident warps, resident warps = min(CTAs per SM, CTAs / SMs) x warps per CTA). A warp that issues one 128-bit
load per lane keeps 512 bytes in flight; where the needed bytes lie under what the kernels' loads keep in flight,
no such floor can bind.

    python benchmarks/corpus/dram_inflight.py --ceilings data/ceilings_h200.jsonl \
        --check data/ceiling_check_triton3.6.0_h200.csv --gpu h200 --latency-ns 353.97 [--band 1.3 2.0]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from dram_write_cost import timed_points  # noqa: E402

from ceilings.hardware import resolve_gpu  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ceilings", required=True, type=Path, help="a check's ceilings file (with --detail bytes)")
    ap.add_argument("--check", required=True, type=Path, help="the same GPU's check CSV (measured_us per point)")
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--latency-ns", required=True, type=float, help="the DRAM load-to-use latency to assume")
    ap.add_argument("--band", type=float, nargs=2, default=(1.3, 2.0), help="measured / ceiling of the best config")
    args = ap.parse_args(argv)
    sms = resolve_gpu(args.gpu).spec.sms
    best: dict[tuple, tuple[dict, dict]] = {}
    for r, d in timed_points(args.ceilings, args.check):
        key = (r["library"], r["launch_id"])
        if key not in best or float(r["measured_us"]) < float(best[key][0]["measured_us"]):
            best[key] = (r, d)
    out = []
    for r, d in best.values():
        ratio = float(r["measured_over_ceiling"])
        if r["binding"] != "dram" or not args.band[0] <= ratio <= args.band[1]:
            continue
        rate = d["detail"]["floor"]["bytes"]["dram"] / (float(r["measured_us"]) * 1e-6)
        warps = min(d["ctas_per_sm"], d["ctas"] / sms) * d["detail"]["warps_per_cta"]
        per_warp = rate * args.latency_ns * 1e-9 / sms / max(warps, 1.0)
        out.append((ratio, r["library"], d["kernel"], rate / 1e12, warps, per_warp))
    for ratio, lib, kernel, tbs, warps, per_warp in sorted(out):
        print(f"{ratio:5.2f} {lib:9s} {kernel[:34]:34s} {tbs:5.2f} TB/s  {warps:5.1f} warps/SM  {per_warp:6.0f} B/warp")
    if out:
        tbs, per_warp = [o[3] for o in out], [o[5] for o in out]
        print(f"{len(out)} launches at {args.band[0]}-{args.band[1]}x, DRAM-bound: {min(tbs):.2f}-{max(tbs):.2f} TB/s "
              f"(median {statistics.median(tbs):.2f}); bytes in flight per resident warp at {args.latency_ns} ns: "
              f"{min(per_warp):.0f}-{max(per_warp):.0f} (median {statistics.median(per_warp):.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
