"""GEMM1 variants of `kernels.fused_moe_gemm1` against the shipped fused-il GEMM1 and the engine (issue 16;
RESULTS 29).

    python3 benchmarks/moe_gemm1_paired.py --out $OUT [--workers 15] [--deadline 300] [--variants a,b] [--ms 1024]
    python3 benchmarks/moe_gemm1_paired.py --out $OUT --variants a,b --confirm EARLIER.json[.gz] --rounds 5
    TRITON_INTERPRET=1 python benchmarks/moe_gemm1_paired.py --dry-run --out /tmp/x   # CPU: tiny shapes

Cases: ANCHORS section 3's shapes at M = 1024 and 4096 (the GEMM1 target's cases) and Qwen3-MoE TP4 at
M = 1. Uniform random top-k routing (seeded), random bf16 data. VARIANTS (GEMM1 with SiLU-and-mul fused,
interleaved w1, weights through TMA): fused-il (`kernels.fused_moe_fused` as shipped, the baseline);
paired[-persistent, -ws] (half-block alignment, pairs of halves); whole-ws (fused-il's tile, K loop
warp-specialised); sorted-a[-persistent[-flat], -ws] (A gathered into sorted order, then through TMA; the
gather timed with the GEMM); sorted-a-gemm (the GEMM alone on A gathered beforehand: not a candidate);
whole-persistent[-flat]. Configs: the tuned fused-il file's config plus TILES (SMALL at M = 1). Everything
compiles first in spawned workers (tiny stand-ins, the real integer arguments, so the JIT's disk cache
serves the timing process). Each (variant, config): output poisoned with NaN, checked against the float32
reference (relative error < 1e-2), then a CUDA graph of 10 launches after 3 warm-ups, median of 20 replays,
no L2 flush. Also timed: `torch.mm` with the same FLOPs ([pairs, K] x [K, 2I]) and `gather_rows` alone; each
variant's best config is re-checked under 2 hot experts. Writes OUT/moe_gemm1_paired.json, prints a table.
--confirm re-times each case's best config per variant of an earlier run, --rounds times in turn
(OUT/moe_gemm1_confirm.json). A little over 400 lines: the compile worker, the case, the run and the
re-timing share the variant plumbing, which would otherwise be split across two files.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import moe_fusion  # noqa: E402
from moe_fusion import parse_label, target_device  # noqa: E402

from ceilings.launch import Config  # noqa: E402

CASES = (("mixtral-8x7b", 2, (1024, 4096)), ("qwen2-57b-a14b", 2, (1024, 4096)), ("qwen3-30b-a3b", 4, (1, 1024, 4096)))
DRY_SHAPES = (("dry-a", 8, 2, 64, 48, (37,)), ("dry-b", 16, 4, 96, 64, (29,)))
VARIANTS = ("fused-il", "paired", "paired-persistent", "paired-ws", "whole-ws", "sorted-a", "sorted-a-gemm",
            "sorted-a-ws", "whole-persistent", "whole-persistent-flat", "sorted-a-persistent",
            "sorted-a-persistent-flat")
TILES = ("M128 N256 K64 G1 w8 s3", "M128 N256 K64 G1 w8 s4", "M128 N256 K64 G16 w8 s3", "M128 N256 K64 G16 w8 s4",
         "M128 N256 K64 G64 w8 s4", "M256 N128 K64 G16 w8 s3", "M256 N128 K64 G16 w8 s4", "M256 N128 K64 G1 w8 s4",
         "M128 N128 K64 G1 w4 s3", "M128 N128 K64 G16 w4 s4", "M128 N128 K64 G16 w8 s3", "M128 N128 K128 G16 w8 s3",
         "M64 N256 K64 G16 w4 s4", "M64 N128 K64 G64 w4 s3")
SMALL = ("M32 N32 K256 G1 w4 s3", "M32 N64 K256 G1 w4 s3", "M32 N64 K128 G1 w4 s4", "M32 N128 K128 G1 w4 s3")
DRY_TILES = ("M32 N64 K32 G1 w4 s2", "M64 N32 K32 G2 w4 s2")
# ANCHORS section 3: the engine's best GEMM1 time (us) per (shape, M), H100 and H200 columns.
ENGINE_US = {
    "H100": {("E8_top2_K4096_N14336", 1024): 510.9, ("E8_top2_K4096_N14336", 4096): 1672.9,
             ("E64_top8_K3584_N2560", 1024): 480.5, ("E64_top8_K3584_N2560", 4096): 1215.0,
             ("E128_top8_K2048_N384", 1): 6.8, ("E128_top8_K2048_N384", 1024): 82.8,
             ("E128_top8_K2048_N384", 4096): 133.0},
    "H200": {("E8_top2_K4096_N14336", 1024): 526.6, ("E8_top2_K4096_N14336", 4096): 1679.4,
             ("E64_top8_K3584_N2560", 1024): 384.4, ("E64_top8_K3584_N2560", 4096): 1166.8,
             ("E128_top8_K2048_N384", 1): 6.1, ("E128_top8_K2048_N384", 1024): 61.3,
             ("E128_top8_K2048_N384", 4096): 114.1},
}
FLOOR_US = {  # ANCHORS section 3's roofline floor, same keys
    "H100": {("E8_top2_K4096_N14336", 1024): 333.7, ("E8_top2_K4096_N14336", 4096): 1238.6,
             ("E64_top8_K3584_N2560", 1024): 405.7, ("E64_top8_K3584_N2560", 4096): 774.1,
             ("E128_top8_K2048_N384", 1): 4.2, ("E128_top8_K2048_N384", 1024): 70.2,
             ("E128_top8_K2048_N384", 4096): 80.7},
    "H200": {("E8_top2_K4096_N14336", 1024): 297.5, ("E8_top2_K4096_N14336", 4096): 1190.1,
             ("E64_top8_K3584_N2560", 1024): 288.1, ("E64_top8_K3584_N2560", 4096): 743.8,
             ("E128_top8_K2048_N384", 1): 3.0, ("E128_top8_K2048_N384", 1024): 49.9,
             ("E128_top8_K2048_N384", 4096): 63.8},
}


def label(e, top_k, h, inter) -> str:
    return f"E{e}_top{top_k}_K{h}_N{2 * inter}"


def gpu_key(name: str | None) -> str | None:
    return next((k for k in ENGINE_US if name and k in name), None)


def shapes(dry: bool):
    return moe_fusion.shapes(dry, CASES, DRY_SHAPES)


def case_configs(e, top_k, inter, m, device_name, dry) -> list[Config]:
    from kernels.moe_configs import FUSED_DIR, get_config

    tuned, _ = get_config(m, e, inter, top_k, device_name, config_dir=FUSED_DIR)
    extra = DRY_TILES if dry else (SMALL if m * top_k / e < 16 else TILES)
    return list(dict.fromkeys([tuned, *(parse_label(t) for t in extra)]))


def variant_flags(variant: str) -> dict:
    return {"paired": variant.startswith("paired"), "persistent": "-persistent" in variant,
            "warp_specialize": variant.endswith("-ws"), "flatten": variant.endswith("-flat")}


def sorted_a(variant: str) -> bool:
    """Variants that read A pre-gathered in sorted order through a TMA descriptor ("-gemm": the gather
    done before, untimed; else the gather is timed with the GEMM)."""
    return variant.startswith("sorted-a")


def _compile(e, top_k, h, inter, m, config: Config, variant: str) -> tuple[bool, str]:
    """Compile one (shape, config, variant) with tiny stand-ins and the real integer arguments."""
    try:
        import torch

        from kernels import fused_moe as fm
        from kernels import fused_moe_gemm1 as g1
        from kernels import moe_bench
        from kernels.moe_bench import MoEGemmSpec

        if variant == "fused-il":
            moe_bench.compile_fused_config(MoEGemmSpec(e, top_k, h, 2 * inter, m), config, variant)
            return True, ""
        flags = variant_flags(variant)
        dev = "cuda"
        a = torch.empty(16, 16, dtype=torch.bfloat16, device=dev)
        w = torch.empty(1, 32, 16, dtype=torch.bfloat16, device=dev)
        c = torch.empty(16, 16, dtype=torch.bfloat16, device=dev)
        ids = torch.empty(16, dtype=torch.int32, device=dev)
        desc = fm.TensorDescriptor(w, [32, 16], [16, 1], [config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]])
        a_desc = None
        if sorted_a(variant):
            a_desc = fm.TensorDescriptor(a, [16, 16], [16, 1], [config["BLOCK_SIZE_M"], config["BLOCK_SIZE_K"]])
        align = g1.align_block(config, flags["paired"])
        em = math.ceil(fm.max_padded_tokens(m * top_k, e, align) / align) * align
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        programs = g1.grid(em, inter, config, flags["persistent"], sms)
        g1.gemm1_gated_kernel.warmup(
            a, a_desc, w, desc, c, ids, ids, ids, inter, h, em, m * top_k, top_k, programs[0],
            h, 1, 2 * inter * h, h, 1, inter, 1, grid=(1,),
            PAIRED=flags["paired"], PERSISTENT=flags["persistent"], FLATTEN=flags["flatten"] and flags["persistent"],
            WARP_SPECIALIZE=flags["warp_specialize"],
            EVEN_K=h % config["BLOCK_SIZE_K"] == 0, A_TMA=a_desc is not None, B_TMA=True,
            compute_type=fm._TL_DTYPES[torch.bfloat16],
            num_warps=config.num_warps, num_stages=config.num_stages, **config.params)
        return True, ""
    except Exception as exc:  # a config that does not compile is a result, not a crash
        return False, f"{type(exc).__name__}: {' '.join(str(exc).split())[:240]}"


def compile_all(tasks, workers: int) -> dict:
    unique = {}
    for shape, m, config, variant in tasks:
        _, e, top_k, h, inter, _ = shape
        unique.setdefault((label(e, top_k, h, inter), config, variant), (e, top_k, h, inter, m, config, variant))
    return moe_fusion.compile_in_workers(_compile, unique, workers)


class Case:
    """One GEMM1 case: inputs, routing, interleaved w1, float32 reference, aligned routings by block."""

    def __init__(self, e, top_k, h, inter, m, device, seed=0, hot=0):
        import torch

        from kernels import fused_moe as fm
        from kernels import fused_moe_gemm1 as g1
        from kernels.fused_moe_fused import interleave_gate_up

        gen = torch.Generator(device=device).manual_seed(seed)
        if hot:
            logits = torch.randn(m, e, device=device, generator=gen)
            logits[:, :hot] += 3.0
            values, ids = torch.topk(logits, top_k, dim=1)
            self.weights, self.ids = torch.softmax(values, dim=1), ids.to(torch.int32)
        else:
            self.weights, self.ids = fm.route(m, e, top_k, device=device, generator=gen)
        self.a = torch.randn(m, h, device=device, generator=gen).to(torch.bfloat16)
        w1 = (torch.randn(e, 2 * inter, h, device=device, generator=gen) / math.sqrt(h)).to(torch.bfloat16)
        self.ref = g1.reference(self.a, w1, self.ids)
        self.w_il = interleave_gate_up(w1)
        del w1
        self.e, self.top_k, self.inter = e, top_k, inter
        self.out = torch.empty(m * top_k, inter, dtype=torch.bfloat16, device=device)
        self._align = {}

    def counts(self) -> list[int]:
        import torch

        return torch.bincount(self.ids.reshape(-1).long(), minlength=self.e).tolist()

    def aligned(self, block: int):
        from kernels import fused_moe as fm

        if block not in self._align:
            self._align[block] = fm.moe_align_block_size(self.ids, block, self.e)
        return self._align[block]

    def gather_runner(self, block: int):
        from kernels import fused_moe_gemm1 as g1

        align = self.aligned(block)
        return lambda: g1.gather_rows(self.a, align[0], align[2], self.top_k)

    def runner(self, config: Config, variant: str):
        from kernels import fused_moe_fused as ff
        from kernels import fused_moe_gemm1 as g1

        if variant == "fused-il":
            align = self.aligned(config["BLOCK_SIZE_M"])
            return lambda: ff.invoke_fused_gemm(self.a, self.w_il, self.out, self.weights, *align, top_k=self.top_k,
                                                config=config, gated=True, accumulate=False, interleaved=True)
        flags = variant_flags(variant)
        align = self.aligned(g1.align_block(config, flags["paired"]))
        if sorted_a(variant):
            if variant.endswith("-gemm"):
                a_sorted = g1.gather_rows(self.a, align[0], align[2], self.top_k)
                return lambda: g1.invoke_gemm1(self.a, self.w_il, self.out, *align, top_k=self.top_k, config=config,
                                               a_sorted=a_sorted, **flags)

            def run():
                a_sorted = g1.gather_rows(self.a, align[0], align[2], self.top_k)
                g1.invoke_gemm1(self.a, self.w_il, self.out, *align, top_k=self.top_k, config=config,
                                a_sorted=a_sorted, **flags)
            return run
        return lambda: g1.invoke_gemm1(self.a, self.w_il, self.out, *align, top_k=self.top_k, config=config,
                                       **flags)


def run_case(shape, m, configs, failed, device, dry, deadline, timer) -> dict:
    import torch

    from advisor.measure.timing import relative_error
    from kernels import fused_moe_gemm1 as g1

    _, e, top_k, h, inter, _ = shape
    lab = label(e, top_k, h, inter)
    case = Case(e, top_k, h, inter, m, device)
    counts = case.counts()
    result = {"case": lab, "m": m, "rows": m * top_k,
              "padded_rows": {b: g1.padded_rows(counts, b) for b in (16, 32, 64, 128, 256)}, "rows_by": []}
    if not dry:
        x = torch.randn(m * top_k, h, device=device).to(torch.bfloat16)
        wt = torch.randn(h, 2 * inter, device=device).to(torch.bfloat16)
        result["dense_us"] = round(timer(lambda: torch.mm(x, wt)), 2)
        result["dense_tflops"] = round(2 * m * top_k * h * 2 * inter / result["dense_us"] / 1e6, 1)
        del x, wt
        for block in (64, 128):
            result[f"gather_us_bm{block}"] = round(timer(case.gather_runner(block)), 2)
    for variant in VARIANTS:
        for config in configs:
            row = {"variant": variant, "config": config.label()}
            if variant_flags(variant)["paired"] and config["BLOCK_SIZE_M"] < 32:
                continue  # halves under 16 rows: not a paired config
            why = failed.get((lab, config, variant))
            if why or time.monotonic() > deadline:
                result["rows_by"].append({**row, "status": "compile failed" if why else "deadline", "why": why or ""})
                continue
            try:
                run = case.runner(config, variant)
                case.out.fill_(float("nan"))
                run()
                err = relative_error(case.out.float(), case.ref)
                if not err < 1e-2:
                    result["rows_by"].append({**row, "status": "wrong", "rel_error": err})
                else:
                    result["rows_by"].append({**row, "status": "ok", "rel_error": err, "us": round(timer(run), 2)})
            except Exception as exc:  # a launch failure is recorded, not fatal
                result["rows_by"].append({**row, "status": "failed", "why": f"{type(exc).__name__}: {exc}"[:300]})
            print("gemm1:", lab, m, json.dumps(result["rows_by"][-1]), flush=True)
    # Uneven routing: each variant at its best config once more under 2 hot experts (checked, not timed).
    del case
    hot = Case(e, top_k, h, inter, m, device, seed=1, hot=2)
    result["hot_rel_error"] = {}
    for variant in VARIANTS:
        ok = [r for r in result["rows_by"] if r["variant"] == variant and r["status"] == "ok"]
        if ok:
            best = min(ok, key=lambda r: r["us"])
            hot.out.fill_(float("nan"))
            hot.runner(parse_label(best["config"]), variant)()
            result["hot_rel_error"][variant] = relative_error(hot.out.float(), hot.ref)
    return result


def confirm(earlier: dict, device, rounds: int, timer, dry: bool = False) -> dict:
    """Each case of `earlier` again: the best config of each of its variants, timed `rounds` times in turn
    (variant after variant, so drift hits all alike), checked first; median and range per variant."""
    import statistics

    from advisor.measure.timing import check_output

    shape_of = {label(s[1], s[2], s[3], s[4]): s for s in shapes(dry)}
    cases = []
    for r in earlier["cases"]:
        _, e, top_k, h, inter, _ = shape_of[r["case"]]
        best = {}
        for row in r["rows_by"]:
            if row["status"] == "ok" and row["variant"] in VARIANTS and (
                    row["variant"] not in best or row["us"] < best[row["variant"]]["us"]):
                best[row["variant"]] = row
        case = Case(e, top_k, h, inter, r["m"], device)
        runs = {}
        for v, row in best.items():
            runs[v] = case.runner(parse_label(row["config"]), v)
            case.out.fill_(float("nan"))
            runs[v]()
            check_output(case.out.float(), case.ref, 1e-2, f"{v} {row['config']}")
        times = {v: [] for v in runs}
        for _ in range(rounds):
            for v, run in runs.items():
                times[v].append(round(timer(run), 2))
        cases.append({"case": r["case"], "m": r["m"], "variants": {
            v: {"config": best[v]["config"], "earlier_us": best[v]["us"], "us": times[v],
                "median_us": statistics.median(times[v])} for v in runs}})
        del case
    return {"confirm_of": earlier.get("date"), "rounds": rounds, "cases": cases}


def main(argv=None) -> int:
    global VARIANTS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--deadline", type=float, default=1e9)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset of VARIANTS")
    parser.add_argument("--only", help="comma-separated case prefixes to keep, e.g. mixtral,qwen3 (with their Ms)")
    parser.add_argument("--ms", help="comma-separated token counts to keep")
    parser.add_argument("--confirm", help="a JSON of an earlier run: re-time each case's best config of each variant")
    parser.add_argument("--rounds", type=int, default=5, help="--confirm: timings per (case, variant), interleaved")
    args = parser.parse_args(argv)
    VARIANTS = tuple(v for v in args.variants.split(",") if v)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    dry = args.dry_run
    device = target_device(dry)
    import torch
    from moe_fusion import _timer

    from advisor.measure.timing import versions

    device_name = None if dry else torch.cuda.get_device_name()
    if args.confirm:
        import gzip

        path = Path(args.confirm)
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
        doc = confirm(json.loads(text), device, args.rounds, _timer(dry), dry)
        doc.update({"date": time.strftime("%Y-%m-%d %H:%M"), "gpu": device_name or "cpu (interpreter, dry run)",
                    **(versions() if not dry else {}), "command": " ".join(sys.argv),
                    "wall_s": round(time.monotonic() - started, 1)})
        (out / "moe_gemm1_confirm.json").write_text(json.dumps(doc, indent=1) + "\n")
        for r in doc["cases"]:
            print(f"{r['case']:<22}{r['m']:>5}  " + "  ".join(
                f"{v}: {t['median_us']:.1f} ({min(t['us']):.1f}-{max(t['us']):.1f}) {t['config']}"
                for v, t in r["variants"].items()))
        return 0
    keep = tuple(args.only.split(",")) if args.only else ("",)
    ms = {int(x) for x in args.ms.split(",")} if args.ms else None
    cases = [(s, m, case_configs(s[1], s[2], s[4], m, device_name, dry)) for s in shapes(dry) for m in s[5]
             if s[0].startswith(keep) and (ms is None or m in ms)]
    failed = {}
    if not dry:
        tasks = [(s, m, c, v) for s, m, configs in cases for c in configs for v in VARIANTS
                 if not (variant_flags(v)["paired"] and c["BLOCK_SIZE_M"] < 32)]
        failed = compile_all(tasks, args.workers)
        print(f"compiled {len(tasks)} tasks in {time.monotonic() - started:.0f} s; {len(failed)} failed", flush=True)
        for key, why in list(failed.items())[:6]:
            print("  failed:", key[0], key[1].label(), key[2], why, flush=True)
    timer = _timer(dry)
    results = [run_case(s, m, configs, failed, device, dry, started + args.deadline, timer)
               for s, m, configs in cases]
    doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "gpu": device_name or "cpu (interpreter, dry run)",
           **(versions() if not dry else {}), "command": " ".join(sys.argv), "cases": results,
           "compile_failed": {f"{k[0]} {k[1].label()} {k[2]}": v for k, v in failed.items()},
           "wall_s": round(time.monotonic() - started, 1)}
    (out / "moe_gemm1_paired.json").write_text(json.dumps(doc, indent=1) + "\n")
    print_table(doc)
    return 0


def print_table(doc: dict) -> None:
    gk = gpu_key(doc["gpu"])
    print(f"\n{doc['gpu']}  triton {doc.get('triton', '-')}  torch {doc.get('torch', '-')}")
    print(f"{'case':<22}{'M':>5}" + "".join(f"{v:>19}" for v in VARIANTS)
          + f"{'dense':>8}{'engine':>8}{'eng/best':>9}{'floor/b':>8}  best")
    ratios = []
    for r in doc["cases"]:
        best = {}
        for row in r["rows_by"]:
            if row["status"] == "ok" and (row["variant"] not in best or row["us"] < best[row["variant"]]["us"]):
                best[row["variant"]] = row
        top = min(best.values(), key=lambda x: x["us"]) if best else None
        eng = ENGINE_US.get(gk, {}).get((r["case"], r["m"]))
        floor = FLOOR_US.get(gk, {}).get((r["case"], r["m"]))
        ratio = eng / top["us"] if eng and top else None
        if ratio and r["m"] >= 1024:
            ratios.append(ratio)
        print(f"{r['case']:<22}{r['m']:>5}" + "".join(f"{best[v]['us']:>19.1f}" if v in best else f"{'-':>19}"
                                                     for v in VARIANTS)
              + f"{r.get('dense_us', 0):>8.1f}{eng or 0:>8.1f}{ratio or 0:>9.3f}"
              + f"{(floor / top['us']) if floor and top else 0:>8.2f}  "
              + (f"{top['variant']} {top['config']}" if top else "-"))
    if ratios:
        print(f"geomean engine/best over M >= 1024: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
