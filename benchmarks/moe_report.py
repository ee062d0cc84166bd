"""Turn a fused-MoE sweep CSV into the RESULTS.md table and the tuned config files.

    python benchmarks/moe_report.py benchmarks/data/h100_moe_gemm1_sweep.csv.gz \
        --peaks benchmarks/data/h100_peaks.json [--write-configs kernels/configs]

Per case: the best fully timed config, the default rule's time, the roofline floor from the
measured peaks (max(FLOPs / bf16 peak, compulsory bytes / read bandwidth)), and the engine
kernel's best from ANCHORS section 3 (H100, measured in this workplace the same day).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.measure.moe_tune import ranked_by_case, read_results, row_config, tuned_meta, tuned_table  # noqa: E402
from kernels.moe_bench import MoEGemmSpec  # noqa: E402
from kernels.moe_configs import config_file_name, default_config, write_config_file  # noqa: E402
from kernels.moe_presets import get_preset  # noqa: E402

# ANCHORS section 3, H100 column: the engine's fused-MoE GEMM1, best us of its sampled sweep.
ENGINE_H100_BEST_US = {
    ("E8_top2_K4096_N14336", 1): 81.8, ("E8_top2_K4096_N14336", 16): 310.3,
    ("E8_top2_K4096_N14336", 256): 332.4, ("E8_top2_K4096_N14336", 1024): 510.9,
    ("E8_top2_K4096_N14336", 4096): 1672.9,
    ("E64_top8_K3584_N2560", 1): 53.2, ("E64_top8_K3584_N2560", 256): 405.4,
    ("E64_top8_K3584_N2560", 1024): 480.5, ("E64_top8_K3584_N2560", 4096): 1215.0,
    ("E128_top8_K2048_N384", 1): 6.8, ("E128_top8_K2048_N384", 256): 74.6,
    ("E128_top8_K2048_N384", 1024): 82.8, ("E128_top8_K2048_N384", 4096): 133.0,
}
# ANCHORS section 3, H200 column.
ENGINE_H200_BEST_US = {
    ("E8_top2_K4096_N14336", 1): 57.3, ("E8_top2_K4096_N14336", 16): 212.7,
    ("E8_top2_K4096_N14336", 256): 241.6, ("E8_top2_K4096_N14336", 1024): 526.6,
    ("E8_top2_K4096_N14336", 4096): 1679.4,
    ("E64_top8_K3584_N2560", 1): 37.2, ("E64_top8_K3584_N2560", 256): 276.1,
    ("E64_top8_K3584_N2560", 1024): 384.4, ("E64_top8_K3584_N2560", 4096): 1166.8,
    ("E128_top8_K2048_N384", 1): 6.1, ("E128_top8_K2048_N384", 256): 51.1,
    ("E128_top8_K2048_N384", 1024): 61.3, ("E128_top8_K2048_N384", 4096): 114.1,
}
ENGINE_BEST_US = {"NVIDIA H100 80GB HBM3": ENGINE_H100_BEST_US, "NVIDIA H200": ENGINE_H200_BEST_US}
PRESET_OF_SHAPE = {"E8_top2_K4096_N14336": ("mixtral-8x7b", 2), "E64_top8_K3584_N2560": ("qwen2-57b-a14b", 2),
                   "E128_top8_K2048_N384": ("qwen3-30b-a3b", 4)}


def cases(rows: list[dict], kernel: str, peaks: dict) -> list[dict]:
    engine = ENGINE_BEST_US.get(peaks.get("gpu", ""), {})
    by_case = defaultdict(list)
    for r in rows:
        if r["kernel"] == kernel:
            by_case[(r["shape"], int(r["M"]))].append(r)
    out = []
    for (shape, m), case_rows in by_case.items():
        ok = [r for r in case_rows if r["status"] == "ok"]
        if not ok:
            continue
        best = min(ok, key=lambda r: float(r["us"]))
        e, top_k = int(shape.split("_")[0][1:]), int(shape.split("_")[1][3:])
        default = default_config(m, e, top_k).label()
        default_rows = [r for r in ok if r["config"] == default]
        flops, nbytes = int(best["flops"]), int(best["compulsory_bytes"])
        floor = max(flops / (peaks["bf16_tflops"] * 1e12), nbytes / (peaks["read_tbs"] * 1e12)) * 1e6
        statuses = defaultdict(int)
        for r in case_rows:
            statuses[r["status"]] += 1
        out.append({
            "shape": shape, "M": m, "best_us": float(best["us"]), "best": row_config(best),
            "default_us": float(default_rows[0]["us"]) if default_rows else None, "floor_us": floor,
            "engine_us": engine.get((shape, m)), "statuses": dict(statuses),
            "bound": "compute" if flops / (peaks["bf16_tflops"] * 1e12) * 1e6 >= floor else "memory",
        })
    return sorted(out, key=lambda c: (list(PRESET_OF_SHAPE).index(c["shape"]) if c["shape"] in PRESET_OF_SHAPE
                                      else 99, c["M"]))


def markdown(table: list[dict]) -> str:
    lines = ["| shape (E, top-k, K, N) | M | floor us | best us | best config | default/best | floor/best | "
             "engine best us | ours/engine |", "|---|---|---|---|---|---|---|---|---|"]
    for c in table:
        dflt = f"{c['default_us'] / c['best_us']:.2f}" if c["default_us"] else "-"
        eng = f"{c['engine_us']:.1f}" if c["engine_us"] else "-"
        ratio = f"**{c['best_us'] / c['engine_us']:.3f}**" if c["engine_us"] else "-"
        lines.append(f"| {c['shape']} | {c['M']} | {c['floor_us']:.1f} ({c['bound']}) | {c['best_us']:.1f} | "
                     f"`{c['best'].label()}` | {dflt} | {c['floor_us'] / c['best_us']:.2f} | {eng} | {ratio} |")
    return "\n".join(lines)


def comparison(rows: list[dict], kernels: list[str]) -> str:
    """Best fully timed us per case for each kernel variant, side by side, with the ratio to the first."""
    best = {k: {key: float(rs[0]["us"]) for key, rs in ranked_by_case(rows, k).items()} for k in kernels}
    keys = sorted(set().union(*best.values()), key=lambda key: (
        list(PRESET_OF_SHAPE).index(key[0]) if key[0] in PRESET_OF_SHAPE else 99, key[1]))
    lines = ["| shape | M | " + " | ".join(f"{k} us" for k in kernels) + " | " +
             " | ".join(f"{k} / {kernels[0]}" for k in kernels[1:]) + " |",
             "|---|---|" + "---|" * (2 * len(kernels) - 1)]
    for key in keys:
        times = [best[k].get(key) for k in kernels]
        ratios = [f"{t / times[0]:.3f}" if t and times[0] else "-" for t in times[1:]]
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(f"{t:.1f}" if t else "-" for t in times) + " | "
                     + " | ".join(ratios) + " |")
    return "\n".join(lines)


def write_configs(rows: list[dict], folder: Path, device_name: str, source: str, kernel: str) -> list[Path]:
    """Each shape's fastest config per M as an engine file (token-count keys only) and its side file
    (Triton version, the timings, the sweep they come from)."""
    paths = []
    for shape, (name, tp) in PRESET_OF_SHAPE.items():
        moe = get_preset(name).shape(tp)
        e, top_k, k, n = moe.gemm1()
        specs = [MoEGemmSpec(e, top_k, k, n, m) for m in sorted({int(r["M"]) for r in rows if r["shape"] == shape})]
        table = tuned_table(rows, specs, kernel)
        if table.configs:
            path = folder / config_file_name(moe.num_experts, moe.config_file_n, device_name)
            paths.append(write_config_file(path, table, tuned_meta(rows, specs, device_name, source, kernel)))
    return paths


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", type=Path)
    parser.add_argument("--peaks", type=Path, required=True)
    parser.add_argument("--kernel", default="fused_moe_kernel")
    parser.add_argument("--write-configs", type=Path)
    parser.add_argument("--compare", nargs="+", metavar="KERNEL",
                        help="instead: best us per case of these kernel variants side by side")
    args = parser.parse_args(argv)
    rows = read_results(args.csv)
    if args.compare:
        print(comparison(rows, args.compare))
        return 0
    peaks = json.loads(args.peaks.read_text())
    table = cases(rows, args.kernel, peaks)
    print(markdown(table))
    if args.write_configs:
        sample = next(r for r in rows if r["kernel"] == args.kernel)
        for path in write_configs(rows, args.write_configs, sample["gpu"], args.csv.as_posix(), args.kernel):
            print("wrote", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
