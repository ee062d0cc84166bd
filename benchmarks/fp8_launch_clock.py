"""The SM clock the fp8 GEMM1 runs at under the sweeps' timing protocol, against the clock `advisor diagnose` takes
for it when it brings the loop probe's times to the launch's (issue 16).

    python benchmarks/fp8_launch_clock.py --out $OUT [--ms 1024,4096]

For each ANCHORS section 3 shape and M, the block-scaled GEMM1 alone (A quantised beforehand) at the config
benchmarks/fp8_tile_scales.py --all-counts timed on this GPU (each case's first), in both forms (scales per column,
per tile): benchmarks/moe_probe_clock.sweep_clock (clock64 against event time after time_launch's graph of 10
launches and 20 replays, and after 1 s of the same graph back to back), outputs checked against the float32
reference; then the bf16 heavy launch the loop probes' clock reference is read on. Writes OUT/fp8_launch_clock.json
and prints a table last.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import moe_fp8  # noqa: E402
import moe_fusion  # noqa: E402


def main(argv=None) -> int:
    parser = moe_fp8.common_parser(__doc__)
    args = parser.parse_args(argv)
    out, started, device, device_name, shapes = moe_fp8.start(args)
    if args.dry_run:
        raise SystemExit("fp8_launch_clock reads the GPU's clock; it has no dry run")
    from fp8_moe_generic_check import shipped_then
    from moe_loop_probe import measure_sweep_clock
    from moe_probe_clock import sweep_clock

    from advisor.measure.timing import versions

    configs = shipped_then("h200" if "H200" in device_name else "h100")
    rows = []
    for name, e, top_k, h, inter, ms in shapes:
        for m in moe_fp8.token_counts(args, tuple(x for x in ms if x >= 1024)):
            if (name, m) not in configs:
                continue
            label = configs[(name, m)]["config"]
            case = moe_fp8.Gemm1Case(e, top_k, h, inter, m, device, "block")
            config = moe_fusion.parse_label(label)
            for form, tile in (("columns", False), ("tile", True)):
                run = case.fp8_runner(config, tile_scales=tile)
                rel = moe_fp8._checked(case, run, case.ref)
                rows.append({"case": name, "m": m, "config": label, "form": form, "rel_error": rel,
                             **sweep_clock(run)})
                print(json.dumps(rows[-1]), flush=True)
    doc = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "gpu": device_name, **versions(),
           "command": " ".join(sys.argv), "rows": rows, "reference": measure_sweep_clock(device),
           "wall_s": round(time.monotonic() - started, 1)}
    (out / "fp8_launch_clock.json").write_text(json.dumps(doc, indent=1))
    print(f"\n{device_name}; {doc['wall_s']} s; bf16 heavy launch: {json.dumps(doc['reference'])}")
    print("| case | M | config | form | us | MHz after protocol | MHz after 1 s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['m']} | {r['config']} | {r['form']} | {r['us']} | {r['after_protocol_mhz']} | "
              f"{r['after_sustained_mhz']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
