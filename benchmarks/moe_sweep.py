"""Sweep the shipped fused-MoE GEMM1 over configs on a GPU; resumable; prints a short table last.

    python benchmarks/moe_sweep.py --out OUT --peaks --refine [--deadline 560] [--workers 15]

Cases: ANCHORS section 3's three shapes (Mixtral-8x7B TP2, Qwen2-57B-A14B TP2, Qwen3-30B-A3B TP4)
x M in {1, 16, 64, 256, 1024, 4096}, GEMM1 of the layer, uniform random top-k routing, random
bf16 data. Configs (`advisor.measure.moe_tune`): every tile/warps/stages combination of the 1,920-config
space that passes the resource precheck, once, with a seeded random GROUP_SIZE_M, plus the default
rule's configs; --refine then tries every GROUP_SIZE_M and num_stages for each case's 3 fastest.
Timing: CUDA graph of 10 launches, median of 20 replays, no L2 flush, after a check against the
float32 reference (relative error < 1e-2); configs whose single warm launch is over --abort-ratio
x the case's fastest single launch are recorded as "slow" and not fully timed.
Results append to OUT/moe_sweep.csv (pass it again with --results to resume); --peaks also writes
OUT/peaks.json: the measured bf16 tensor rate, copy and read bandwidth for the roofline floor.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.measure import moe_tune as tune  # noqa: E402
from advisor.measure import timing as measure  # noqa: E402
from kernels.moe_configs import default_config  # noqa: E402
from kernels.moe_family import CASES as MOE_CASES  # noqa: E402
from kernels.moe_family import MS as MOE_MS  # noqa: E402
from kernels.moe_family import parse_cases as parse_moe_cases  # noqa: E402
from kernels.moe_family import specs as moe_specs  # noqa: E402

ANCHOR_CASES, ANCHOR_MS = MOE_CASES, MOE_MS
VARIANTS = {"auto": None, "tma": True, "ptr": False}


def anchor_specs(ms=ANCHOR_MS, cases=ANCHOR_CASES, b_tma: bool | None = None, gemms=(1,)):
    return moe_specs(cases, ms, gemms, b_tma)


def measure_peaks() -> dict:
    """Sustained bf16 tensor rate (ten 8192^3 products, random data) and device copy bandwidth."""
    import torch

    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        a @ b
    end.record()
    torch.cuda.synchronize()
    tflops = 10 * 2 * n**3 / (start.elapsed_time(end) * 1e-3) / 1e12
    del a, b
    src = torch.randn(1 << 29, device="cuda", dtype=torch.float32)  # 2 GiB, far beyond L2
    dst = torch.empty_like(src)
    timing = measure.time_launch(lambda: dst.copy_(src), launches_per_graph=5, replays=20)
    copy_tbs = 2 * src.numel() * 4 / (timing.us * 1e-6) / 1e12
    total = torch.empty(1, device="cuda", dtype=torch.float32)
    timing = measure.time_launch(lambda: torch.sum(src, dim=0, out=total), launches_per_graph=5, replays=20)
    read_tbs = src.numel() * 4 / (timing.us * 1e-6) / 1e12
    return {"bf16_tflops": round(tflops, 1), "copy_tbs": round(copy_tbs, 3), "read_tbs": round(read_tbs, 3),
            "gpu": measure.gpu_name(),
            **measure.versions(), "date": time.strftime("%Y-%m-%d"),
            "method": "10 back-to-back 8192^3 bf16 matmuls (random data) after 3 warm-ups; copy of 2 GiB "
                      "fp32 counting bytes read + written, and a sum reading the same 2 GiB; "
                      "CUDA graph of 5, median of 20"}


def print_table(results: Path, specs, kernel: str):
    ranked = tune.ranked_by_case(tune.read_results(results), kernel)
    print(f"{'shape':<28}{'M':>6}{'ok':>5}{'best us':>10}  {'best config':<26}{'default us':>11}{'def/best':>9}")
    for spec in specs:
        rows = ranked.get((spec.shape_label, spec.m))
        if not rows:
            continue
        default = default_config(spec.m, spec.num_experts, spec.top_k).label()
        d = [float(r["us"]) for r in rows if r["config"] == default]
        best = float(rows[0]["us"])
        print(f"{spec.shape_label:<28}{spec.m:>6}{len(rows):>5}{best:>10.1f}  {rows[0]['config']:<26}"
              f"{(f'{d[0]:.1f}' if d else '-'):>11}{(f'{d[0] / best:.2f}' if d else '-'):>9}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    parser.add_argument("--results", help="CSV to append to / resume from (default OUT/moe_sweep.csv)")
    parser.add_argument("--sample", type=int, default=None,
                        help="draw N random configs from those that pass the precheck instead of the stratified set")
    parser.add_argument("--refine", action="store_true",
                        help="then try every GROUP_SIZE_M and num_stages for the 3 fastest configs of each case")
    parser.add_argument("--abort-ratio", type=float, default=1.5,
                        help="screen out configs whose one warm launch is over this x the case's best so far")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ms", default=",".join(map(str, ANCHOR_MS)))
    parser.add_argument("--cases", help="preset:tp list (default: ANCHORS section 3's three)")
    parser.add_argument("--gemms", default="1", help="which GEMMs of the layer: 1, 2 or 1,2")
    parser.add_argument("--deadline", type=float, default=None, help="stop measuring after this many seconds")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--peaks", action="store_true", help="measure bf16 and copy peaks first")
    parser.add_argument("--configs-only", type=int, default=None, help="keep only the first N configs (smoke)")
    parser.add_argument("--configs-from", help="instead of sampling, each case's --top fastest configs of this CSV")
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="auto",
                        help="weights through TMA descriptors (tma), pointer loads (ptr), or TMA where supported")
    args = parser.parse_args(argv)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = Path(args.results) if args.results else out / "moe_sweep.csv"
    specs = anchor_specs(tuple(int(m) for m in args.ms.split(",")),
                         parse_moe_cases(args.cases) if args.cases else ANCHOR_CASES, VARIANTS[args.variant],
                         tuple(int(g) for g in args.gemms.split(",")))
    configs = None
    if args.configs_from:
        configs = tune.default_configs(specs) + tune.top_configs(tune.read_results(args.configs_from), args.top)
        configs = list(dict.fromkeys(configs))
    elif args.configs_only:
        configs = tune.sample_configs(args.sample, args.seed, specs)[: args.configs_only]
    if args.peaks:
        peaks = measure_peaks()
        (out / "peaks.json").write_text(json.dumps(peaks, indent=2) + "\n")
        print("peaks:", json.dumps(peaks), flush=True)

    kernel = tune.KERNEL + ("" if args.variant == "auto" else f"[{args.variant}]")
    for summary in tune.tune(specs, results, configs=configs, sample=args.sample, seed=args.seed,
                             refine=args.refine, abort_ratio=args.abort_ratio, deadline_s=args.deadline,
                             workers=args.workers, kernel=kernel, show_progress=sys.stderr.isatty()):
        print("sweep:", json.dumps(summary), flush=True)
    print_table(results, specs, kernel)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
