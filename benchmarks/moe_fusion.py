"""The fused-MoE kernel's fused variants (issue 16) against the previous kernel, on a GPU.

    python benchmarks/moe_fusion.py --out $OUT [--workers 15] [--deadline 280]
    python benchmarks/moe_fusion.py --predict --out benchmarks/data   # CPU: predicted gains, before measuring
    TRITON_INTERPRET=1 python benchmarks/moe_fusion.py --dry-run --out /tmp/x   # CPU: tiny shapes, same code

Cases: ANCHORS section 3's shapes (Mixtral-8x7B TP2, Qwen2-57B-A14B TP2, Qwen3-30B-A3B TP4) at
M = 1, 256, 1024, 4096 (and 16 for Mixtral), uniform random top-k routing, random bf16 data.

1. GEMM1 per kernel variant (`kernels.moe_bench.VARIANTS`: previous; fused = SiLU-and-mul in the
   epilogue; fused-il = the same on gate/up-interleaved w1; persistent = tile loop over the real
   tiles; and the fused forms in that loop) at a few strong configs: the
   shipped tuned config for that M, the same with BLOCK_SIZE_N doubled (the fused kernel splits a tile
   into gate and up halves), and LARGE_TILES. All (shape, variant, config) compile first in parallel
   worker processes. Each config's output is poisoned, checked against the float32 reference (relative
   error < 1e-2), then timed.
2. The whole layer, align -> GEMM1 -> act -> GEMM2 -> sum: the previous `kernels.fused_moe.fused_moe`
   and `kernels.fused_moe_fused.fused_moe_fused` with the fusions combined (LAYERS: act = SiLU-and-mul
   in GEMM1, -il on interleaved w1, +sum = router weight and top-k sum in GEMM2, +persistent = both
   GEMMs persistent), each at the shipped config and at its GEMM1 variant's best config of step 1
   (GEMM2 at the shipped config); the faster is reported. Outputs checked against the float32 layer.
   The activation and the top-k sum of the previous layer are also timed alone. Each layer variant is
   also checked (not timed) under a routing with a few hot experts.
Timing: CUDA graph of 10 launches after 3 warm-ups, median of 20 replays, no L2 flush.
Writes OUT/moe_fusion.json (everything) and prints a short table last.

--predict (no GPU): the predicted gain of each change before measuring, from `advisor diagnose` of the
previous GEMM1 (epilogue, tail wave and exit-only CTAs; at the times of RESULTS section 1 where given)
and a byte count of the kernels a fusion removes at a stated bandwidth; writes OUT/moe_fusion_predictions.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ceilings.launch import Config  # noqa: E402
from kernels.moe_bench import VARIANTS, MoEGemmSpec  # noqa: E402

CASES = (("mixtral-8x7b", 2, (1, 16, 256, 1024, 4096)), ("qwen2-57b-a14b", 2, (1, 256, 1024, 4096)),
         ("qwen3-30b-a3b", 4, (1, 256, 1024, 4096)))
# Tiny (E, top_k, H, I, Ms) for --dry-run under the CPU interpreter.
DRY_SHAPES = (("dry-a", 8, 2, 64, 48, (1, 37)), ("dry-b", 16, 4, 96, 64, (29,)))
LARGE_TILES = ("M128 N256 K64 G32 w8 s3", "M128 N256 K64 G1 w8 s4", "M128 N128 K64 G16 w4 s3",
               "M256 N128 K64 G16 w8 s3", "M64 N256 K64 G16 w4 s4")
DRY_TILES = ("M16 N32 K32 G1 w4 s2", "M32 N64 K32 G4 w4 s2")
LAYERS = ("previous", "act", "act+sum", "act+sum+persistent", "act-il", "act-il+sum", "act-il+persistent",
          "act-il+sum+persistent")
# The layer variant -> the GEMM1 variant whose best config it takes, and fused_moe_fused's flags
# (fuse_act, fuse_sum, persistent, w1_interleaved). "+persistent" without "+sum" makes GEMM1 alone
# persistent (the unfused GEMM2 is the previous kernel).
LAYER_GEMM1 = {"previous": "previous", "act": "fused", "act+sum": "fused", "act+sum+persistent": "fused-persistent",
               "act-il": "fused-il", "act-il+sum": "fused-il", "act-il+persistent": "fused-il-persistent",
               "act-il+sum+persistent": "fused-il-persistent"}
LAYER_FLAGS = {v: (True, "+sum" in v, v.endswith("persistent"), "-il" in v) for v in LAYERS[1:]}
# RESULTS section 1: the previous GEMM1's measured best time (us) at the shipped config, H100, for the
# diagnosis's gap in --predict; other M are diagnosed at the model's predicted time.
RESULTS1_US = {("mixtral-8x7b", 1024): 538.9, ("mixtral-8x7b", 4096): 1669.3, ("qwen2-57b-a14b", 1024): 480.2,
               ("qwen2-57b-a14b", 4096): 1133.3, ("qwen3-30b-a3b", 1024): 79.8, ("qwen3-30b-a3b", 4096): 131.8}
# Bytes per (pair, intermediate column) that `kernels.fused_moe.silu_and_mul` moves in its five torch
# kernels: gate and up to float32 (read 2, write 4, each), silu (4 + 4), mul (8 + 4), to bf16 (4 + 2).
ACT_BYTES = 38


def parse_label(label: str) -> Config:
    """'M128 N256 K64 G32 w8 s3' -> Config."""
    p = dict((part[0], int(part[1:])) for part in label.split())
    return Config({"BLOCK_SIZE_M": p["M"], "BLOCK_SIZE_N": p["N"], "BLOCK_SIZE_K": p["K"], "GROUP_SIZE_M": p["G"]},
                  num_warps=p["w"], num_stages=p["s"])


def shapes(dry: bool, cases=CASES, dry_shapes=DRY_SHAPES):
    """(name, E, top_k, H, I, Ms) per case of `cases` ((preset, TP, Ms) each; `dry_shapes` under --dry-run)."""
    if dry:
        return dry_shapes
    from kernels.moe_presets import get_preset

    out = []
    for name, tp, ms in cases:
        s = get_preset(name).shape(tp)
        out.append((f"{name} TP{tp}", s.num_experts, s.top_k, s.hidden, s.intermediate, ms))
    return out


def gemm1_configs(shipped: Config, dry: bool) -> list[Config]:
    configs = [shipped]
    if shipped["BLOCK_SIZE_N"] <= 128:
        configs.append(Config({**shipped.params, "BLOCK_SIZE_N": 2 * shipped["BLOCK_SIZE_N"]},
                              num_warps=shipped.num_warps, num_stages=shipped.num_stages))
    configs += [parse_label(t) for t in (DRY_TILES if dry else LARGE_TILES)]
    return list(dict.fromkeys(configs))


def _compile(spec: MoEGemmSpec, config: Config, variant: str) -> tuple[bool, str]:
    from kernels import moe_bench

    try:
        if variant == "previous":
            moe_bench.compile_config(spec, config)
        else:
            moe_bench.compile_fused_config(spec, config, variant)
        return True, ""
    except Exception as exc:  # a config that does not compile is a result, not a crash
        return False, f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


def compile_all(tasks, workers: int) -> dict:
    """Compile each (spec, config, variant) once per shape in spawned workers (the JIT's disk cache then
    serves the timing process)."""
    unique = {}
    for spec, config, variant in tasks:
        unique.setdefault((spec.shape_label, config, variant), (spec, config, variant))
    return compile_in_workers(_compile, unique, workers)


def compile_in_workers(compile_one, unique: dict, workers: int) -> dict:
    """Run `compile_one(*args)` -> (ok, why) for each {key: args} in spawned workers; {key: why} of the
    failures. `compile_one` is a module-level function (the workers import it by name)."""
    import multiprocessing as mp

    failed = {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        futures = {pool.submit(compile_one, *args): key for key, args in unique.items()}
        for future in as_completed(futures):
            ok, why = future.result()
            if not ok:
                failed[futures[future]] = why
    return failed


def fastest_alternately(runs: dict, timer, rounds: int = 2) -> dict:
    """{key: least time} of each `runs[key]()` timed in turn, `rounds` times over, so that a clock drift during
    the comparison hits every one of them alike."""
    times: dict = {key: [] for key in runs}
    for _ in range(rounds):
        for key, run in runs.items():
            times[key].append(timer(run))
    return {key: min(t) for key, t in times.items()}


def _timer(dry: bool, launches_per_graph: int = 10, warmup: int = 3):
    """CUDA-graph median on a GPU; on the CPU interpreter, one wall-clock call (only to run the code)."""
    if dry:
        def wall(fn):
            start = time.perf_counter()
            fn()
            return (time.perf_counter() - start) * 1e6
        return wall
    from advisor.measure.timing import time_launch
    return lambda fn: time_launch(fn, launches_per_graph=launches_per_graph, replays=20, warmup=warmup).us


def bench_gemm1(spec_rows, device: str, dry: bool, failed: dict, deadline: float,
                variants=VARIANTS) -> list[dict]:
    from advisor.measure.timing import check_output
    from kernels.moe_bench import MoEGemmCase

    timer = _timer(dry)
    rows = []
    for spec, configs in spec_rows:
        case = MoEGemmCase(spec, device=device)
        for variant in variants:
            for config in configs:
                row = {"case": spec.shape_label, "m": spec.m, "variant": variant, "config": config.label()}
                why = failed.get((spec.shape_label, config, variant))
                if why or time.monotonic() > deadline:
                    rows.append({**row, "status": "compile failed" if why else "deadline", "why": why or ""})
                    continue
                out, ref = case.variant_output(variant)
                run = case.variant_runner(config, variant)
                try:
                    out.fill_(float("nan"))
                    run()
                    err = check_output(out.float(), ref, 1e-2, f"{variant} {config.label()}")
                    rows.append({**row, "status": "ok", "us": round(timer(run), 2), "rel_error": err})
                except Exception as exc:  # a wrong result or a launch failure is recorded and reported
                    rows.append({**row, "status": "failed", "why": f"{type(exc).__name__}: {exc}"[:300]})
                print("gemm1:", json.dumps(rows[-1]), flush=True)
        del case
    return rows


def layer_tensors(e, top_k, h, inter, m, device, seed, hot: int = 0):
    import torch

    from kernels import fused_moe as fm

    gen = torch.Generator(device=device).manual_seed(seed)
    if hot:
        # A few hot experts: their logits lifted so most tokens pick them, as real traffic skews.
        logits = torch.randn(m, e, device=device, generator=gen)
        logits[:, :hot] += 3.0
        weights, ids = torch.topk(logits, top_k, dim=1)
        weights, ids = torch.softmax(weights, dim=1), ids.to(torch.int32)
    else:
        weights, ids = fm.route(m, e, top_k, device=device, generator=gen)
    hidden = torch.randn(m, h, device=device, generator=gen).to(torch.bfloat16)
    w1 = (torch.randn(e, 2 * inter, h, device=device, generator=gen) / math.sqrt(h)).to(torch.bfloat16)
    w2 = (torch.randn(e, h, inter, device=device, generator=gen) / math.sqrt(inter)).to(torch.bfloat16)
    return hidden, w1, w2, weights, ids


def layer_fn(variant: str, tensors, w1_interleaved, config: Config, config2: Config):
    """The layer call of `variant`; interleaved variants take w1_interleaved (prepared once, untimed)."""
    from kernels.fused_moe import fused_moe
    from kernels.fused_moe_fused import fused_moe_fused

    if variant == "previous":
        return lambda: fused_moe(*tensors, config=config, config2=config2)
    act, fsum, persistent, il = LAYER_FLAGS[variant]
    hidden, w1, *rest = tensors
    args = (hidden, w1_interleaved if il else w1, *rest)
    return lambda: fused_moe_fused(*args, config=config, config2=config2, fuse_act=act, fuse_sum=fsum,
                                   persistent=persistent, w1_interleaved=il)


def bench_layers(shape, m, shipped: Config, best_gemm1: dict, device, dry, deadline) -> dict:
    import torch

    from advisor.measure.timing import relative_error
    from kernels import fused_moe as fm
    from kernels.fused_moe_fused import interleave_gate_up

    name, e, top_k, h, inter, _ = shape
    timer = _timer(dry)
    tensors = layer_tensors(e, top_k, h, inter, m, device, seed=1)
    w1_il = interleave_gate_up(tensors[1])
    ref = fm.fused_moe_reference(*tensors)
    result = {"case": name, "m": m, "shipped": shipped.label(), "variants": {}}
    # The previous layer's activation and top-k sum alone: what fusing them can remove at most.
    gate_up = torch.randn(m * top_k, 2 * inter, device=device).to(torch.bfloat16)
    per_k = torch.randn(m, top_k, h, device=device).to(torch.bfloat16)
    result["act_alone_us"] = round(timer(lambda: fm.silu_and_mul(gate_up)), 2)
    result["sum_alone_us"] = round(timer(lambda: per_k.sum(dim=1, dtype=torch.float32).to(torch.bfloat16)), 2)
    for variant in LAYERS:
        tried = {}
        for config in dict.fromkeys([shipped, best_gemm1.get(LAYER_GEMM1[variant], shipped)]):
            if time.monotonic() > deadline:
                break
            fn = layer_fn(variant, tensors, w1_il, config, shipped)
            err = relative_error(fn().float(), ref)
            if not err < 1e-2:
                tried[config.label()] = {"status": "wrong", "rel_error": err}
                continue
            tried[config.label()] = {"status": "ok", "rel_error": err, "us": round(timer(fn), 2)}
        ok = {k: v for k, v in tried.items() if v["status"] == "ok"}
        best = min(ok, key=lambda k: ok[k]["us"]) if ok else None
        result["variants"][variant] = {"tried": tried, "best_config": best,
                                       "us": ok[best]["us"] if best else None}
        print("layer:", name, m, variant, json.dumps(result["variants"][variant]), flush=True)
    # Uneven routing: every layer variant once more under a few hot experts (checked, not timed).
    hot = layer_tensors(e, top_k, h, inter, m, device, seed=2, hot=2)
    hot_il = interleave_gate_up(hot[1])
    hot_ref = fm.fused_moe_reference(*hot)
    result["hot_routing_rel_error"] = {
        v: relative_error(layer_fn(v, hot, hot_il, shipped, shipped)().float(), hot_ref) for v in LAYERS}
    return result


def predict(out: Path, bandwidth_tbs: float) -> dict:
    """Predicted gains before measuring (no GPU): diagnosis of the previous GEMM1 and GEMM2, byte counts."""
    preds = []
    for name, _, top_k, h, inter, ms in shapes(False):
        preset, tp = name.split()[0], int(name.split("TP")[1])
        for m in ms:
            if m < 256:
                continue
            dx = {}
            for gemm in (1, 2):
                cmd = ["diagnose", "kernels/fused_moe.py", "--preset", preset, "--tp", str(tp), "--tokens", str(m),
                       "--gemm", str(gemm), "--gpu", "h100", "--compile", "--format", "json"]
                measured = RESULTS1_US.get((preset, m)) if gemm == 1 else None
                if measured:
                    cmd += ["--measured", str(measured)]
                done = subprocess.run([sys.executable, "-c", "from advisor.cli import main; raise SystemExit(main())",
                                       *cmd], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
                doc = json.loads(done.stdout)
                dx[gemm] = {"time_us": doc["time_us"], "basis": doc["basis"],
                            **{c["name"]: c["estimate_us"] for c in doc["causes"]}}
            pairs = m * top_k
            act_us = ACT_BYTES * pairs * inter / (bandwidth_tbs * 1e6)
            # Previous sum: read [pairs, H] bf16, write [M, H] fp32, cast (read fp32, write bf16).
            # Fused: zero [M, H] fp32 and the same cast; GEMM2's atomics move 4 B per element to L2
            # where its store moved 2 B, so its epilogue term doubles.
            sum_us = (2 * pairs * h + 4 * m * h) / (bandwidth_tbs * 1e6)
            zero_us = 4 * m * h / (bandwidth_tbs * 1e6)
            preds.append({
                "case": name, "m": m, "diagnosis": dx, "bandwidth_tbs": bandwidth_tbs,
                "gemm1_fused_gain_us": round(dx[1]["epilogue"] / 2, 2),
                "gemm1_persistent_gain_us": round(dx[1]["tail wave"] + dx[1]["exit-only CTAs"], 2),
                "layer_act_gain_us": round(act_us + dx[1]["epilogue"] / 2, 2),
                "layer_sum_gain_us": round(sum_us - zero_us - dx[2]["epilogue"], 2),
                "layer_persistent_gain_us": round(sum(dx[g]["tail wave"] + dx[g]["exit-only CTAs"] for g in (1, 2)), 2),
            })
            print("predict:", json.dumps(preds[-1]), flush=True)
    doc = {"date": time.strftime("%Y-%m-%d"), "gpu": "h100 (diagnosis)", "predictions": preds}
    (out / "moe_fusion_predictions.json").write_text(json.dumps(doc, indent=1) + "\n")
    return doc



def target_device(dry: bool) -> str:
    """"cuda", or for a dry run "cpu" with Triton's interpreter patched for bf16 (it multiplies bf16 bit
    patterns unless patched: advisor/capture/interpreter_fixes.py says why)."""
    if not dry:
        return "cuda"
    from advisor.capture import interpreter_fixes

    interpreter_fixes.install()
    return "cpu"

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU interpreter")
    parser.add_argument("--predict", action="store_true", help="predicted gains only (no GPU)")
    parser.add_argument("--bandwidth", type=float, default=3.11,
                        help="TB/s for --predict's byte counts (RESULTS section 1's read probe on an H100)")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--deadline", type=float, default=1e9, help="stop timing after this many seconds")
    parser.add_argument("--only", help="case name prefix to keep, e.g. mixtral")
    parser.add_argument("--no-layer", action="store_true")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.predict:
        predict(out, args.bandwidth)
        return 0

    import torch

    from advisor.measure.timing import versions
    from kernels.moe_configs import get_config

    started = time.monotonic()
    deadline = started + args.deadline
    dry = args.dry_run
    device = target_device(dry)
    device_name = None if dry else torch.cuda.get_device_name()
    cases = [s for s in shapes(dry) if not args.only or s[0].startswith(args.only)]
    spec_rows, shipped = [], {}
    for name, e, top_k, h, inter, ms in cases:
        for m in ms:
            cfg, _ = get_config(m, e, inter, top_k, device_name)
            spec = MoEGemmSpec(e, top_k, h, 2 * inter, m, gemm=1, b_tma=False if dry else None)
            shipped[(name, m)] = shipped[spec] = cfg
            spec_rows.append((spec, gemm1_configs(cfg, dry)))
    failed = {}
    if not dry:
        # GEMM1 of every variant at its configs, and GEMM2 at the shipped config in the layer's three forms.
        tasks = [(s, c, v) for s, configs in spec_rows for c in configs for v in VARIANTS]
        for spec, _ in spec_rows:
            g2 = MoEGemmSpec(spec.num_experts, spec.top_k, spec.n // 2, spec.k, spec.m, gemm=2)
            tasks += [(g2, shipped[spec], v) for v in ("previous", "fused", "fused-persistent")]
        failed = compile_all(tasks, args.workers)
        print(f"compiled {len(tasks)} (spec, config, variant) in {time.monotonic() - started:.0f} s; "
              f"{len(failed)} failed", flush=True)
    gemm1 = bench_gemm1(spec_rows, device, dry, failed, deadline)
    layers = []
    if not args.no_layer:
        for shape in cases:
            for m in shape[5]:
                label = MoEGemmSpec(shape[1], shape[2], shape[3], 2 * shape[4], m).shape_label
                best = {}
                for variant in VARIANTS:
                    ok = [r for r in gemm1 if r["case"] == label and r["m"] == m and r["variant"] == variant
                          and r["status"] == "ok"]
                    if ok:
                        best[variant] = parse_label(min(ok, key=lambda r: r["us"])["config"])
                layers.append(bench_layers(shape, m, shipped[(shape[0], m)], best, device, dry, deadline))
    doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "gpu": device_name or "cpu (interpreter, dry run)",
           **(versions() if not dry else {}), "command": " ".join(sys.argv), "gemm1": gemm1, "layers": layers,
           "wall_s": round(time.monotonic() - started, 1)}
    (out / "moe_fusion.json").write_text(json.dumps(doc, indent=1) + "\n")
    print_table(doc, cases)
    return 0


def print_table(doc: dict, cases) -> None:
    print(f"\n{doc['gpu']}  triton {doc.get('triton', '-')}  torch {doc.get('torch', '-')}")
    print(f"{'case':<24}{'M':>6}" + "".join(f"{v:>20}" for v in VARIANTS) + "   GEMM1 best us (config of prev)")
    by = {}
    for r in doc["gemm1"]:
        if r["status"] == "ok":
            key = (r["case"], r["m"], r["variant"])
            if key not in by or r["us"] < by[key]["us"]:
                by[key] = r
    for case, m in dict.fromkeys((r["case"], r["m"]) for r in doc["gemm1"]):
        cells = [by.get((case, m, v)) for v in VARIANTS]
        print(f"{case:<24}{m:>6}" + "".join(f"{c['us']:>20.1f}" if c else f"{'-':>20}" for c in cells)
              + (f"   {cells[0]['config']}" if cells[0] else ""))
    if doc["layers"]:
        print(f"\n{'layer':<20}{'M':>6}" + "".join(f"{v:>22}" for v in LAYERS) + f"{'prev/best':>11}")
        for lay in doc["layers"]:
            us = [lay["variants"][v]["us"] for v in LAYERS]
            new = [u for u in us[1:] if u]
            ratio = f"{us[0] / min(new):.3f}" if us[0] and new else "-"
            print(f"{lay['case']:<20}{lay['m']:>6}" + "".join(f"{u:>22.1f}" if u else f"{'-':>22}" for u in us)
                  + f"{ratio:>11}")
        worst = max((e for lay in doc["layers"] for e in lay["hot_routing_rel_error"].values()), default=0.0)
        print(f"hot-expert routing: worst relative error of any layer variant {worst:.2e}")


if __name__ == "__main__":
    raise SystemExit(main())
