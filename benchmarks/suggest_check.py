"""Does `advisor suggest` pick fast configs?  And does `advisor.prune` autotune as well as plain autotuning?

    python benchmarks/suggest_check.py rank --out ranked.json          # here, no GPU: the predictions
    python benchmarks/suggest_check.py measure --ranked ranked.json --out $OUT   # on the GPU

`rank` runs the advisor's search (the whole 1,920-config space, analytic prune, predicted ranking, finalists
compiled for sm_90 to confirm they fit) for ANCHORS section 3's three shapes x six token counts (GEMM1, the
sweep's cases) and writes each case's top 8. `measure` times, in one process on the GPU, each case's top 8
and the best config of the H100 sweep (benchmarks/data/h100_moe_gemm1_sweep_v2.csv.gz), all checked
against the float32 reference, CUDA graph of 10 launches, median of 20 replays. Reported per case: the
top-1's time / the best time measured in this run, and the best of the top 8 / the same.
`autotune` (GPU) compares plain @triton.autotune with prune_configs_by=advisor.prune(top_k=4) on a
tutorial-style matmul over 16 configs: the chosen config's time and the timing cost of each.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CASES = (("mixtral-8x7b", 2), ("qwen2-57b-a14b", 2), ("qwen3-30b-a3b", 4))
MS = (1, 16, 64, 256, 1024, 4096)
SWEEP = Path(__file__).resolve().parent / "data" / "h100_moe_gemm1_sweep_v2.csv.gz"


def cmd_rank(args) -> int:
    from advisor.advice.moe import gemm_subject
    from advisor.advice.search import search
    from ceilings.hardware import resolve_gpu

    out = []
    for name, tp in CASES:
        for m in MS:
            t0 = time.perf_counter()
            advice = search(gemm_subject(name, m, tp, 1, resolve_gpu("NVIDIA H100 80GB HBM3")), top_k=8, confirm=True)
            out.append({"preset": name, "tp": tp, "m": m, "shape": advice.subject.shape.shape_label,
                        "seconds": round(time.perf_counter() - t0, 2),
                        "top": [{"config": c.config.to_dict(), "predicted_us": round(c.predicted_us, 2)}
                                for c in advice.ranked[:8]]})
            print(name, tp, m, out[-1]["seconds"], [c.config.label() for c in advice.ranked[:3]], flush=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


def cmd_measure(args) -> int:
    from advisor.advice.moe import gemm_subject
    from advisor.measure import moe_tune as tune
    from ceilings.hardware import resolve_gpu
    from ceilings.launch import Config

    ranked = json.loads(Path(args.ranked).read_text())
    best_of_sweep = {}
    for key, rows in tune.ranked_by_case(tune.read_results(SWEEP)).items():
        best_of_sweep[key] = (tune.row_config(rows[0]), float(rows[0]["us"]))
    results = []
    for case in ranked:
        subject = gemm_subject(case["preset"], case["m"], case["tp"], 1, resolve_gpu("NVIDIA H100 80GB HBM3"))
        run = subject.measurer()
        top = [Config.from_dict(t["config"]) for t in case["top"]]
        sweep_cfg, sweep_us = best_of_sweep[(case["shape"], case["m"])]
        times = {}
        for cfg in list(dict.fromkeys(top + [sweep_cfg])):
            try:
                times[cfg] = run(cfg)
            except Exception as exc:  # a wrong or failing config is a result too
                print("failed", case["preset"], case["m"], cfg.label(), type(exc).__name__, str(exc)[:120])
                times[cfg] = float("inf")
        best = min(times.values())
        row = {**{k: case[k] for k in ("preset", "tp", "m", "shape")},
               "top1": top[0].label(), "top1_us": times[top[0]], "top8_best_us": min(times[c] for c in top),
               "sweep_best": sweep_cfg.label(), "sweep_best_us_now": times[sweep_cfg], "sweep_best_us_then": sweep_us,
               "best_us": best, "top1_ratio": times[top[0]] / best, "top8_ratio": min(times[c] for c in top) / best,
               "top1_vs_sweep": times[top[0]] / times[sweep_cfg],
               "top8_vs_sweep": min(times[c] for c in top) / times[sweep_cfg]}
        results.append(row)
        print(f"{case['preset']:<16}{case['m']:>6}  top1 {row['top1_vs_sweep']:.3f}  top8 {row['top8_vs_sweep']:.3f}"
              f"  sweep-best {times[sweep_cfg]:.1f} us", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "suggest_check.json").write_text(json.dumps(results, indent=1))
    n = len(results)
    print(f"top-1 within 1.05x of the sweep's best: {sum(r['top1_vs_sweep'] <= 1.05 for r in results)}/{n}; "
          f"measure k=8 within 1.02x: {sum(r['top8_vs_sweep'] <= 1.02 for r in results)}/{n}")
    return 0


def _matmul_call(tuned, a, b, c):
    import triton

    m, k = a.shape
    n = b.shape[1]

    def call():
        grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)  # noqa: E731
        tuned[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    return call


def cmd_autotune(args) -> int:
    import torch
    import triton

    import advisor
    from advisor.measure import timing as measure
    from advisor.measure.sweep import STANDARD_TIMING
    from ceilings.compile import load_kernel

    jit = load_kernel(str(Path(__file__).resolve().parents[1] / "tests/fixtures/matmul_kernel.py"), "matmul_kernel")
    configs = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=w, num_stages=s)
               for bm, bn, bk, w, s in ((128, 256, 64, 8, 3), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4),
                                        (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (128, 32, 32, 4, 4),
                                        (64, 32, 32, 2, 5), (32, 64, 32, 2, 5), (128, 128, 64, 8, 3),
                                        (256, 128, 64, 8, 3), (64, 64, 64, 4, 3), (128, 256, 64, 8, 4),
                                        (256, 64, 64, 4, 4), (32, 32, 64, 2, 4), (64, 128, 64, 4, 3),
                                        (128, 64, 128, 4, 3))]
    results = []
    for m, n, k in ((4096, 4096, 4096), (512, 8192, 4096), (8192, 1024, 1024), (64, 4096, 4096)):
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        ref = (a.float() @ b.float())
        row = {"M": m, "N": n, "K": k}
        for mode in ("plain", "advisor.prune(top_k=4)"):
            prune = None if mode == "plain" else advisor.prune(top_k=4, grid=lambda meta: (
                triton.cdiv(meta["M"], meta["BLOCK_M"]) * triton.cdiv(meta["N"], meta["BLOCK_N"]),))
            tuned = triton.autotune(configs=configs, key=["M", "N", "K"], prune_configs_by=prune)(jit)
            c = torch.empty(m, n, device="cuda", dtype=torch.float16)
            call = _matmul_call(tuned, a, b, c)
            t0 = time.perf_counter()
            call()
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
            err = measure.relative_error(c, ref)
            us = measure.time_launch(call, **STANDARD_TIMING).us
            timed = len(tuned.configs_timings) if getattr(tuned, "configs_timings", None) else 1
            row[mode] = {"chosen": str(tuned.best_config), "us": round(us, 2), "rel_err": err,
                         "first_call_s": round(first, 2), "bench_s": round(getattr(tuned, "bench_time", 0.0), 2),
                         "configs_timed": timed,
                         "prune": None if prune is None else prune["early_config_prune"].last}
            print(m, n, k, mode, row[mode], flush=True)
        results.append(row)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "autotune_prune.json").write_text(json.dumps(results, indent=1))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("rank")
    p.add_argument("--out", default="benchmarks/data/suggest_ranked_h100.json")
    p = sub.add_parser("measure")
    p.add_argument("--ranked", default="benchmarks/data/suggest_ranked_h100.json")
    p.add_argument("--out", default="benchmarks/out")
    p = sub.add_parser("autotune")
    p.add_argument("--out", default="benchmarks/out")
    args = parser.parse_args(argv)
    return {"rank": cmd_rank, "measure": cmd_measure, "autotune": cmd_autotune}[args.cmd](args)


if __name__ == "__main__":
    raise SystemExit(main())
