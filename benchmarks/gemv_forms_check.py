"""The fp8 decode GEMVs before and after a change to their kernels, at the shipped configs (RESULTS 46).

    python3 benchmarks/gemv_forms_check.py --old PATH --out $OUT [--only qwen3] [--ms 1,2]
    TRITON_INTERPRET=1 python benchmarks/gemv_forms_check.py --old PATH --out /tmp/x --dry-run   # CPU

PATH is a copy of `kernels/fused_moe_fp8_gemv.py` as it was (the device tool carries it as an ignored file).
For each shape of ANCHORS section 3, scaling scheme and token count of this GPU's shipped GEMV config file, GEMM1
and GEMM2 of both versions at that count's tuned configs, on the same random data (uniform routing, seeded):
each output checked against the float32 reference (< 1e-2) and against the other version's (equal up to float32
summation order), then timed alternately old, new, old, new (CUDA graphs of 10 launches after warm-up, median of
20 replays each; the faster of each version's two kept), so that a clock drift hits both. Writes
OUT/gemv_forms_check.json and prints new / old per GEMM last.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import moe_fp8  # noqa: E402
import moe_fusion  # noqa: E402
from moe_fp8_gemv import MS, Case  # noqa: E402


def load_old(path: Path):
    spec = importlib.util.spec_from_file_location("gemv_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shipped_counts(e, inter, top_k, device_name, scaling, dry) -> list[tuple[int, object, object]]:
    """(M, GEMM1 config, GEMM2 config) for every count of the shipped GEMV file (dry run: M 3, the default)."""
    from kernels import fused_moe_fp8 as f8
    from kernels import moe_configs

    if dry:
        from kernels.fused_moe_fp8_gemv import DEFAULT_CONFIG

        return [(3, DEFAULT_CONFIG, DEFAULT_CONFIG)]
    table = moe_configs.cached_config_file(f8.config_path(e, inter, device_name, scaling, 1, "gemv"))
    out = []
    for m in sorted(table.configs if table else ()):
        (c1, _), (c2, _) = f8.layer_configs(m, e, inter, top_k, device_name, scaling, "gemv", True)
        out.append((m, c1, c2))
    return out


def compare(case, gemm: int, config, old, new, timer) -> dict:
    """One GEMM of one case at one config in both versions: errors, how far apart, and times."""
    if gemm == 1:
        def run(mod):
            return mod.gemv_gemm1(case.hidden, case.fp8, case.ids, config)
        ref = case.ref1
    else:
        def run(mod):
            return mod.gemv_gemm2(case.act, case.fp8, case.weights, case.ids, None, config)
        ref = case.ref2
    outs = {"old": run(old), "new": run(new)}
    row = {"gemm": gemm, "config": config.label(), "rel_error_old": moe_fp8.relative(outs["old"], ref),
           "rel_error_new": moe_fp8.relative(outs["new"], ref),
           "new_vs_old": moe_fp8.relative(outs["new"], outs["old"].float())}
    if max(row["rel_error_old"], row["rel_error_new"]) >= 1e-2:
        return {**row, "status": "wrong"}
    best = moe_fusion.fastest_alternately({"old": lambda: run(old), "new": lambda: run(new)}, timer)
    row.update(status="ok", old_us=round(best["old"], 3), new_us=round(best["new"], 3))
    return {**row, "ratio": round(row["new_us"] / row["old_us"], 4)}


def main(argv=None) -> int:
    parser = moe_fp8.common_parser(__doc__)
    parser.add_argument("--old", type=Path, required=True, help="the GEMV module as it was")
    args = parser.parse_args(argv)
    out, started, device, device_name, shapes = moe_fp8.start(args)
    dry = args.dry_run
    import torch

    from advisor.measure.timing import versions
    from kernels import fused_moe_fp8_gemv as new

    old = load_old(args.old)
    timer = moe_fusion._timer(dry)
    rows = []
    for name, e, top_k, h, inter, _ in shapes:
        for scaling in moe_fp8.SCALINGS:
            for m, c1, c2 in shipped_counts(e, inter, top_k, device_name, scaling, dry):
                if (m not in MS and not dry) or (args.ms and str(m) not in args.ms.split(",")):
                    continue
                case = Case((name, e, top_k, h, inter, None), m, scaling, device)
                for gemm, config in ((1, c1), (2, c2)):
                    row = compare(case, gemm, config, old, new, timer)
                    rows.append({"case": name, "m": m, "scaling": scaling, **row})
                    if row["status"] == "ok":
                        print(f"{name} {scaling} M={m} GEMM{gemm} {row['config']}: old {row['old_us']} new "
                              f"{row['new_us']} us ({row['ratio']:.3f}), apart {row['new_vs_old']:.1e}", flush=True)
                del case
                if device == "cuda":
                    torch.cuda.empty_cache()
    doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "gpu": device_name or "cpu (interpreter, dry run)",
           **(versions() if not dry else {}), "command": " ".join(sys.argv), "rows": rows}
    (out / "gemv_forms_check.json").write_text(json.dumps(doc, indent=1))
    ok = [r for r in rows if r["status"] == "ok"]
    print(f"\n{len(ok)} of {len(rows)} timed; {sum(r['status'] == 'wrong' for r in rows)} wrong; "
          f"{time.monotonic() - started:.0f} s")
    for gemm in (1, 2):
        ratios = [r["ratio"] for r in ok if r["gemm"] == gemm]
        if ratios:
            print(f"GEMM{gemm}: new / old median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, "
                  f"max {max(ratios):.3f} over {len(ratios)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
