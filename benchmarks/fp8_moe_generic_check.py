"""The generic path on the fp8 fused-MoE GEMMs, a kernel family no model or count rule was fitted on (issues 14-16).

    python benchmarks/fp8_moe_generic_check.py --gpus h100 --out benchmarks/data/fp8_moe_generic_check_h100.json
    python benchmarks/fp8_moe_generic_check.py --diagnose-gemm2 --out benchmarks/data/fp8_gemm2_diagnose.json
    python benchmarks/fp8_moe_generic_check.py --diagnose-gemm1 --out benchmarks/data/fp8_gemm1_diagnose.json

Every GEMM1 config timed alone in RESULTS 40 (`benchmarks/data/h100_moe_fp8_run5.json`,
`h200_moe_fp8_run6.json`: 13 cases x 2 scaling schemes x their tiles, `gemm_us`, CUDA-graph medians) is
captured as a user would capture it without a GPU: `advisor predict` on this file with `--call "gemm_only(...)"`,
the host function below, which builds the launch's tensors without data except the routing (top-k of random
scores on the CPU: ids with data, so the align runs in Triton's interpreter and the GEMM's guards read its
counts). The routing is drawn here, not the run's own (same rule, another generator), so per-expert counts
differ by sampling. Reported per GPU: measured / ceiling (a floor must stay >= 0.97), the prediction's error,
Spearman of predicted against measured over each case's tiles, and the top-1 regret (measured time of the
predicted best over the measured best). Writes the rows as JSON and prints a short table last.

`--diagnose-gemm2`: `advisor diagnose` of each fp8 GEMM2 that benchmarks/atomic_probe.py timed alone (both
forms, the top-k sum by atomics or rows stored), at its measured time, captured the same way (`gemm2_only`):
how much of each gap named causes explain, and what the atomics cause says against the two forms' difference.
`--diagnose-gemm1`: the same for the block-scaled GEMM1 that benchmarks/fp8_tile_scales.py --all-counts timed alone
in both forms (`gemm_only(..., tile_scales)`), at each M >= 1024 and the config shipped then, and for every
per-channel GEMM1 tile RESULTS 40 timed at M >= 1024.
All on this machine's CPU, no GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import moe_fp8  # noqa: E402
import moe_fusion  # noqa: E402

RUNS = {"h100": "benchmarks/data/h100_moe_fp8_run5.json", "h200": "benchmarks/data/h200_moe_fp8_run6.json"}
# (E, top_k, H, I) of the fp8 runs' cases (benchmarks/moe_fp8.py's), by the runs' shape label and by case name.
_CASES = [(name, (e, top_k, h, inter)) for name, e, top_k, h, inter, _ in moe_fusion.shapes(False, moe_fp8.CASES)]
SHAPES = {moe_fp8.label(*shape): shape for _, shape in _CASES}
DIAGNOSED_SHAPES = dict(_CASES)


def gemm_only(m, e, top_k, h, inter, scaling, label, tile_scales=False):
    """fp8 GEMM1 of the layer alone (A already quantised), its routing from random scores on the CPU;
    tile_scales=False: the per-column form RESULTS 40 timed (RESULTS 47 made tile scales the default since)."""
    import torch
    import triton

    from kernels import fused_moe_fp8 as f8
    from kernels.moe_align import moe_align_triton

    config = moe_fusion.parse_label(label)
    ids = torch.rand(m, e, generator=torch.Generator().manual_seed(0)).topk(top_k, dim=1).indices.to(torch.int32)
    block = scaling == "block"
    kg = triton.cdiv(h, f8.SCALE_BLOCK) if block else 1
    a = torch.empty(m, h, dtype=f8.FP8, device="cuda")
    a_s = torch.empty(m, kg, dtype=torch.float32, device="cuda")
    w = torch.empty(e, 2 * inter, h, dtype=f8.FP8, device="cuda")
    w_s = torch.empty(e, triton.cdiv(2 * inter, f8.SCALE_BLOCK) if block else 2 * inter, kg, dtype=torch.float32,
                      device="cuda")
    c = torch.empty(m * top_k, inter, dtype=torch.bfloat16, device="cuda")
    weights = torch.empty(m, top_k, dtype=torch.float32, device="cuda")
    align = moe_align_triton(ids, (config["BLOCK_SIZE_M"],), e)[0]
    f8.invoke_fp8_gemm(a, a_s, w, w_s, c, weights, *align, top_k=top_k, config=config, gated=True, scaling=scaling,
                       tile_scales=tile_scales)


def gemm2_only(m, e, top_k, h, inter, scaling, label, fuse_sum):
    """fp8 GEMM2 of the layer alone in one of its forms (the top-k sum by atomics, or rows stored)."""
    import torch
    import triton

    from kernels import fused_moe_fp8 as f8
    from kernels.moe_align import moe_align_triton

    config = moe_fusion.parse_label(label)
    ids = torch.rand(m, e, generator=torch.Generator().manual_seed(0)).topk(top_k, dim=1).indices.to(torch.int32)
    block = scaling == "block"
    kg = triton.cdiv(inter, f8.SCALE_BLOCK) if block else 1
    a = torch.empty(m * top_k, inter, dtype=f8.FP8, device="cuda")
    a_s = torch.empty(m * top_k, kg, dtype=torch.float32, device="cuda")
    w = torch.empty(e, h, inter, dtype=f8.FP8, device="cuda")
    w_s = torch.empty(e, triton.cdiv(h, f8.SCALE_BLOCK) if block else h, kg, dtype=torch.float32, device="cuda")
    c = torch.empty((m, h) if fuse_sum else (m * top_k, h), dtype=torch.float32 if fuse_sum else torch.bfloat16,
                    device="cuda")
    weights = torch.empty(m, top_k, dtype=torch.float32, device="cuda")
    align = moe_align_triton(ids, (config["BLOCK_SIZE_M"],), e)[0]
    f8.invoke_fp8_gemm(a, a_s, w, w_s, c, weights, *align, top_k=top_k, config=config, gated=False, scaling=scaling,
                       sum_topk=fuse_sum, tile_scales=False)  # the form benchmarks/atomic_probe.py timed


def diagnosis(gpu: str, call: str, measured_us: float) -> dict:
    """`advisor diagnose` of the fp8 kernel's launch that `call` makes, at its measured time: ideal, ceiling, share
    of the gap named, each cause's us (or the error line)."""
    from advisor.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["diagnose", __file__, "--kernel", "fused_moe_fp8_kernel", "--call", call, "--gpu", gpu,
                   "--measured", str(measured_us), "--format", "json"])
    doc = json.loads(out.getvalue()) if rc == 0 else {"error": err.getvalue().strip()[-300:]}
    doc = doc[0] if isinstance(doc, list) else doc
    named = [c for c in doc.get("causes", []) if c["name"] != "unexplained"]
    # The causes' estimates before the cap to the gap: over 1, they name more than the gap (one overestimates).
    over = sum(c["estimate_us"] for c in named) / doc["gap_us"] if doc.get("gap_us") else None
    return {"ideal_us": doc.get("ideal_us"), "ceiling_us": doc.get("ceiling_us"),
            "explained_share": doc.get("explained_share"), "estimates_over_gap": over and round(over, 3),
            "causes": {c["name"]: round(c["us"], 2) for c in doc.get("causes", [])},
            "estimates": {c["name"]: round(c["estimate_us"], 2) for c in named}, "error": doc.get("error")}


def diagnose_gemm2(gpu: str) -> list[dict]:
    """`advisor diagnose` of each GEMM2 timed alone by benchmarks/atomic_probe.py, at its measured time."""
    run = json.loads(Path(f"benchmarks/data/{gpu}_atomic_probe.json").read_text())
    rows = []
    for r in run["gemm2"]:
        e, top_k, h, inter = DIAGNOSED_SHAPES[r["case"]]
        call = (f"gemm2_only({r['m']}, {e}, {top_k}, {h}, {inter}, {r['scaling']!r}, {r['config']!r}, "
                f"{r['form'] == 'atomics'})")
        rows.append({**r, "gpu": gpu, **diagnosis(gpu, call, r["gemm_us"])})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def shipped_then(gpu: str) -> dict:
    """{(case, M): row} of the GEMM1 that benchmarks/fp8_tile_scales.py --all-counts timed on `gpu` (h100, h200) at
    the config shipped then: each case's first GEMM1 row, with its time in both forms."""
    run = json.loads((Path(__file__).resolve().parent / "data" / f"{gpu}_fp8_tile_scales_all_counts.json").read_text())
    out = {}
    for case in run["cases"]:
        first = [r for r in case["rows"] if r["gemm"] == 1 and r["status"] == "ok"][:1]
        if first:
            out[(case["case"], case["m"])] = first[0]
    return out


def diagnose_gemm1(gpu: str) -> list[dict]:
    """`advisor diagnose` of the block-scaled GEMM1 that benchmarks/fp8_tile_scales.py --all-counts timed alone in
    both forms (scales per column, per tile) at each M >= 1024, at the config shipped then (each case's first)."""
    rows = []
    for (name, m), r in shipped_then(gpu).items():
        if m < 1024:
            continue
        e, top_k, h, inter = DIAGNOSED_SHAPES[name]
        for form, tiles, measured in (("columns", False, r["columns_us"]), ("tile", True, r["tile_us"])):
            call = f"gemm_only({m}, {e}, {top_k}, {h}, {inter}, 'block', {r['config']!r}, {tiles})"
            rows.append({"case": name, "m": m, "scaling": "block", "form": form,
                         "config": r["config"], "gemm_us": measured, "gpu": gpu, **diagnosis(gpu, call, measured)})
            print(json.dumps(rows[-1]), flush=True)
    # Per-channel scales (one scale per row, applied once after the loop): every tile RESULTS 40 timed at M >= 1024.
    for case in json.loads(Path(RUNS[gpu]).read_text())["gemm1"]:
        e, top_k, h, inter = SHAPES[case["case"]]
        for r in case["scalings"].get("channel", {"rows": []})["rows"] if case["m"] >= 1024 else []:
            if r.get("status") != "ok" or not r.get("gemm_us"):
                continue
            call = f"gemm_only({case['m']}, {e}, {top_k}, {h}, {inter}, 'channel', {r['config']!r}, False)"
            rows.append({"case": case["case"], "m": case["m"], "scaling": "channel", "form": "channel",
                         "config": r["config"], "gemm_us": r["gemm_us"], "gpu": gpu,
                         **diagnosis(gpu, call, r["gemm_us"])})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def predict(gpu: str, m, e, top_k, h, inter, scaling, label) -> dict:
    from advisor.cli import main

    call = f"gemm_only({m}, {e}, {top_k}, {h}, {inter}, {scaling!r}, {label!r})"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["predict", __file__, "--kernel", "fused_moe_fp8_kernel", "--call", call, "--gpu", gpu,
                   "--format", "json"])
    if rc != 0:
        return {"error": err.getvalue().strip()[-300:]}
    doc = json.loads(out.getvalue())
    doc = doc[-1] if isinstance(doc, list) else doc
    return {"ceiling_us": doc["ceiling_us"], "predicted_us": doc["predicted_us"], "binding": doc.get("binding"),
            "interval": doc.get("predicted_interval_us")}


def spearman(xs, ys) -> float:
    def ranks(v):
        order = sorted(range(len(v)), key=v.__getitem__)
        r = [0.0] * len(v)
        for i, j in enumerate(order):
            r[j] = float(i)
        return r
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    den = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return num / den if den else float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--gpus", default="h100,h200")
    parser.add_argument("--diagnose-gemm2", action="store_true",
                        help="diagnose the GEMM2 forms timed by benchmarks/atomic_probe.py instead")
    parser.add_argument("--diagnose-gemm1", action="store_true",
                        help="diagnose the block-scaled GEMM1 forms timed by benchmarks/fp8_tile_scales.py instead")
    args = parser.parse_args(argv)
    if args.diagnose_gemm2 or args.diagnose_gemm1:
        diagnose_one = diagnose_gemm2 if args.diagnose_gemm2 else diagnose_gemm1
        doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(sys.argv),
               "rows": [r for gpu in args.gpus.split(",") for r in diagnose_one(gpu)]}
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
        print_diagnoses(doc) if args.diagnose_gemm2 else print_shares(doc)
        return 0
    rows, started = [], time.monotonic()
    for gpu in args.gpus.split(","):
        run = json.loads(Path(RUNS[gpu]).read_text())
        for case in run["gemm1"]:
            e, top_k, h, inter = SHAPES[case["case"]]
            for scaling, part in case["scalings"].items():
                for r in part["rows"]:
                    if r.get("status") != "ok" or not r.get("gemm_us"):
                        continue
                    got = predict(gpu, case["m"], e, top_k, h, inter, scaling, r["config"])
                    rows.append({"gpu": gpu, "case": case["case"], "m": case["m"], "scaling": scaling,
                                 "config": r["config"], "measured_us": r["gemm_us"], **got})
                    print(json.dumps(rows[-1]), flush=True)
    doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(sys.argv), "runs": RUNS, "rows": rows,
           "wall_s": round(time.monotonic() - started, 1)}
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print_table(doc)
    return 0


def print_table(doc) -> None:
    print("\n| GPU | points | measured >= 0.97 x ceiling | measured / ceiling: min, median | MAPE % | "
          "median Spearman per case | top-1 regret <= 1.05 | 80% interval covers |")
    print("|---|---|---|---|---|---|---|---|")
    for gpu in sorted({r["gpu"] for r in doc["rows"]}):
        ok = [r for r in doc["rows"] if r["gpu"] == gpu and "ceiling_us" in r]
        ratio = [r["measured_us"] / r["ceiling_us"] for r in ok]
        ape = [abs(r["predicted_us"] - r["measured_us"]) / r["measured_us"] * 100 for r in ok]
        cover = [r["interval"][0] <= r["measured_us"] <= r["interval"][1] for r in ok if r.get("interval")]
        cases: dict = {}
        for r in ok:
            cases.setdefault((r["case"], r["m"], r["scaling"]), []).append(r)
        rho = [spearman([x["predicted_us"] for x in c], [x["measured_us"] for x in c]) for c in cases.values()
               if len(c) >= 3]
        regret = [min(c, key=lambda x: x["predicted_us"])["measured_us"] / min(x["measured_us"] for x in c)
                  for c in cases.values()]
        print(f"| {gpu} | {len(ok)} | {sum(x >= 0.97 for x in ratio)} of {len(ratio)} | {min(ratio):.2f}, "
              f"{statistics.median(ratio):.2f} | {statistics.mean(ape):.1f} | "
              f"{statistics.median([x for x in rho if x == x]):.2f} | {sum(x <= 1.05 for x in regret)} of "
              f"{len(regret)} | {sum(cover)} of {len(cover)} |")


def print_shares(doc) -> None:
    """Per GPU and form: the median share of the gap named, its range, and the causes' median us."""
    print("\n| GPU | form | launches | share of the gap named: median (min-max) | causes' estimates / gap: median "
          "(min-max) | median us of the largest causes |")
    print("|---|---|---|---|---|---|")
    groups: dict = {}
    for r in doc["rows"]:
        if not r.get("error"):
            groups.setdefault((r["gpu"], r["form"]), []).append(r)
    for (gpu, form), rows in groups.items():
        shares = [r["explained_share"] for r in rows]
        over = sorted(r["estimates_over_gap"] for r in rows if r.get("estimates_over_gap") is not None)
        names = {n for r in rows for n in r["causes"]}
        med = {n: statistics.median(r["causes"].get(n, 0.0) for r in rows) for n in names}
        top = ", ".join(f"{n} {us:.1f}" for n, us in sorted(med.items(), key=lambda x: -x[1])[:4])
        print(f"| {gpu} | {form} | {len(rows)} | {statistics.median(shares):.1%} ({min(shares):.0%}-{max(shares):.0%})"
              f" | {statistics.median(over):.2f} ({over[0]:.2f}-{over[-1]:.2f}) | {top} |")


def print_diagnoses(doc) -> None:
    print("\n| GPU | case | scheme | M | atomics: measured, atomics cause, explained | stores: measured, DRAM writes, "
          "explained | measured difference |")
    print("|---|---|---|---|---|---|---|")
    by = {(r["gpu"], r["case"], r["scaling"], r["m"], r["form"]): r for r in doc["rows"]}
    for (gpu, case, scaling, m, form), a in by.items():
        s = by.get((gpu, case, scaling, m, "stores"))
        if form != "atomics" or not s or a.get("error") or s.get("error"):
            continue
        print(f"| {gpu} | {case} | {scaling} | {m} | {a['gemm_us']}, {a['causes'].get('atomics', 0)}, "
              f"{a['explained_share']:.0%} | {s['gemm_us']}, {s['causes'].get('DRAM writes', 0)}, "
              f"{s['explained_share']:.0%} | {a['gemm_us'] - s['gemm_us']:.1f} |")


if __name__ == "__main__":
    sys.exit(main())

