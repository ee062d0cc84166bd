"""float32 atomic-add rates for the calibration, and the fp8 GEMM2 alone in both forms (issue 16: a cause for the
atomics in `advisor diagnose`).

    python3 benchmarks/atomic_probe.py --out $OUT                          # on the GPU
    python benchmarks/atomic_probe.py --merge benchmarks/data/h100_atomic_probe.json   # into ceilings/calibration/

1. `advisor.measure.calibrate.probe_atomics`: relaxed float32 atomic adds (result unused) into a buffer of a
   quarter of L2 and into one of 1 GiB, bytes added per second (CUDA graph, median of 20 replays).
2. The fp8 GEMM2 alone (no zeroing, cast or sum around it) at each form's tuned config from the shipped files,
   for ANCHORS-3's shapes at M = 1024 and 4096, both scaling schemes: the times `advisor diagnose` is checked on.
   Outputs checked against the float32 reference first (`moe_fp8_gemm2.Gemm2Case`), then timed.
`--merge` writes the probe's two keys into the shipped calibration file of the run's GPU (other keys untouched).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

KEYS = ("atomic_add_l2_tbs", "atomic_add_dram_tbs")


def gemm2_alone(device_name, timer) -> list[dict]:
    import moe_fp8
    import moe_fusion
    from moe_fp8_gemm2 import Gemm2Case

    rows = []
    for shape in moe_fusion.shapes(False, moe_fp8.CASES, moe_fp8.DRY_SHAPES):
        name, e, top_k, h, inter, _ = shape
        for scaling in moe_fp8.SCALINGS:
            for m in (1024, 4096):
                for form in _time_forms(Gemm2Case(e, top_k, h, inter, m, "cuda", scaling), device_name, timer):
                    rows.append({"case": name, "m": m, "scaling": scaling, **form})
                    print(json.dumps(rows[-1]), flush=True)
    return rows


def _time_forms(case, device_name, timer) -> list[dict]:
    """GEMM2 alone in each form at its tuned config: checked as the layer runs it, then timed without the
    zeroing, cast or sum."""
    import moe_fp8

    from kernels import fused_moe_fp8 as f8
    from kernels.moe_align import moe_align_triton

    out = []
    for fused in (True, False):
        config = f8.layer_configs(case.m, case.e, case.act_q.shape[1], case.top_k, device_name, case.scaling,
                                  fuse_sum=fused)[1][0]
        err = moe_fp8.relative(case.runner(config, fused)(), case.ref)
        align = moe_align_triton(case.ids, (config["BLOCK_SIZE_M"],), case.e)[0]
        c = case.acc if fused else case.rows

        def gemm(config=config, align=align, c=c, fused=fused):
            f8.invoke_fp8_gemm(case.act_q, case.act_s, case.w2_q, case.w2_s, c, case.weights, *align,
                               top_k=case.top_k, config=config, gated=False, scaling=case.scaling, sum_topk=fused)
        us = timer(gemm) if err < 1e-2 else None
        out.append({"form": "atomics" if fused else "stores", "config": config.label(), "rel_error": err,
                    "gemm_us": us and round(us, 2)})
    return out


def merge(path: Path) -> int:
    from ceilings.hardware import Calibration, calibration_file_name

    doc = json.loads(path.read_text())
    target = Path(__file__).resolve().parents[1] / "ceilings" / "calibration" / calibration_file_name(doc["gpu"])
    cal = Calibration.from_json(target.read_text(), str(target))
    cal.values.update({k: round(doc["probe"][k], 4) for k in KEYS})
    cal.measured.setdefault("probes", {}).update({k: f"benchmarks/atomic_probe.py, {doc['date']}" for k in KEYS})
    target.write_text(cal.to_json())
    print("wrote", target)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--merge", type=Path, help="a run's JSON: write its probe into the shipped calibration")
    args = parser.parse_args(argv)
    if args.merge:
        return merge(args.merge)
    import moe_fusion
    import torch

    from advisor.measure.calibrate import probe_atomics
    from advisor.measure.timing import versions
    from ceilings.hardware import get_spec

    name = torch.cuda.get_device_name()
    started = time.monotonic()
    doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "gpu": name, **versions(), "command": " ".join(sys.argv),
           "probe": probe_atomics(torch, get_spec(name).l2_bytes or 50 << 20)}
    print(json.dumps(doc["probe"]), flush=True)
    doc["gemm2"] = gemm2_alone(name, moe_fusion._timer(False))
    doc["wall_s"] = round(time.monotonic() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "atomic_probe.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"\natomic adds, {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in doc["probe"].items()))
    print("| case | scheme | M | GEMM2 alone: atomics / stores (us) |\n|---|---|---|---|")
    by = {(r["case"], r["scaling"], r["m"], r["form"]): r["gemm_us"] for r in doc["gemm2"]}
    for (c, s, m, f), us in by.items():
        if f == "atomics":
            print(f"| {c} | {s} | {m} | {us} / {by.get((c, s, m, 'stores'))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
