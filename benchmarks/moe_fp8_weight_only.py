"""Weight-only fp8 (w8a16) fused-MoE GEMMs at small token counts, against w8a8 and the engine (issue 16; RESULTS 41).

    python3 benchmarks/moe_fp8_weight_only.py --out $OUT [--workers 15] [--deadline 480] [--only qwen3] [--ms 1,16]
    python benchmarks/moe_fp8.py --write-from OUT/moe_fp8_weight_only.json      # the fp8_w8a16 config files
    TRITON_INTERPRET=1 python benchmarks/moe_fp8_weight_only.py --dry-run --out /tmp/x   # CPU: tiny shapes

At one token, w8a8 GEMM1 lost to the engine's bf16 kernel (RESULTS 40: Qwen3-MoE 8.1-12.5 us against 6.1-6.8):
the GEMM is latency-bound there and the activation quantiser's launch adds ~2 us. Weight-only keeps the
activations in bf16 and widens the fp8 weights in registers: no quantiser, half the weight bytes of bf16.
Per shape of ANCHORS section 3, scaling scheme and token count (the engines' keys up to 512): the w8a8 layer's
GEMMs at their tuned files' configs (GEMM1 with its quantiser, GEMM2 and the activation's quantiser timed
apart), then weight-only GEMM1 and GEMM2 over TILES, each output poisoned with NaN and checked against the
float32 GEMM over bf16 activations and the dequantised weights (relative error < 1e-2); the best weight-only
GEMM1 checked again under 2 hot experts. Uniform random top-k routing (seeded), random data; CUDA graphs of 10
launches after 3 warm-ups, median of 20 replays. Writes OUT/moe_fp8_weight_only.json (the `--tune` format
`moe_fp8.py --write-from` reads) and prints a short table last.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import moe_fp8  # noqa: E402
import moe_fusion  # noqa: E402
from moe_fusion import parse_label  # noqa: E402

M_KEYS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512)  # the engines' token counts up to 512
# Under 16 rows per expert: 16-row tiles, narrow N for more programs, long K steps for more bytes in flight
# per program (the one-token GEMM is latency-bound). BLOCK_SIZE_K over 128 only for channel scales (block
# scales change every 128 columns).
SMALL = ("M16 N32 K128 G1 w4 s4", "M16 N64 K128 G1 w4 s3", "M16 N64 K128 G1 w4 s5", "M16 N128 K128 G1 w4 s4",
         "M16 N32 K64 G1 w4 s6", "M16 N64 K64 G1 w2 s6", "M32 N64 K128 G1 w4 s4", "M64 N64 K128 G1 w4 s4")
SMALL_LONG_K = ("M16 N32 K256 G1 w4 s3", "M16 N64 K256 G1 w4 s3", "M16 N32 K512 G1 w4 s2")
LARGER = ("M16 N64 K128 G1 w4 s4", "M32 N64 K128 G1 w4 s4", "M64 N64 K128 G1 w4 s4", "M64 N128 K128 G1 w4 s3",
          "M64 N128 K64 G8 w4 s4", "M128 N128 K64 G16 w8 s3", "M64 N256 K64 G16 w8 s3")
DRY_TILES = ("M16 N64 K64 G1 w4 s2", "M32 N32 K128 G2 w4 s2")


def tiles(m, e, top_k, scaling, dry) -> list:
    if dry:
        return [parse_label(t) for t in DRY_TILES]
    if moe_fp8.expected_rows(m, e, top_k) < 16:
        return [parse_label(t) for t in SMALL + (SMALL_LONG_K if scaling == "channel" else ())]
    return [parse_label(t) for t in LARGER]


def w8a8_baseline(case, shape, m, device, device_name, dry, timer) -> dict:
    """The w8a8 layer's GEMMs at its tuned files' configs: GEMM1 with its quantiser, GEMM2 (output zeroed) and
    the activation quantiser apart; each checked against its float32 reference."""
    import torch

    from kernels import fused_moe_fp8 as f8

    name, e, top_k, h, inter, _ = shape
    (c1, _), (c2, _) = f8.layer_configs(m, e, inter, top_k, None if dry else device_name, case.scaling)
    run = case.fp8_runner(c1, with_quant=True)
    err = moe_fp8._checked(case, run, case.ref)
    out = {"gemm1_config": c1.label(), "gemm1_rel_error": err, "gemm1_us": round(timer(run), 2) if err < 1e-2 else None}
    g2 = moe_fp8.time_gemm2(e, top_k, h, inter, m, case.ids, case.weights.float(), case.scaling, [c2], {}, "", 1e18,
                            timer, device)[0]
    act = torch.randn(m * top_k, inter, device=device).to(torch.bfloat16)
    out.update(gemm2_config=c2.label(), gemm2_us=g2.get("us"), gemm2_status=g2["status"],
               act_quant_us=round(timer(lambda: f8.quantize_rows(act, case.scaling)), 2))
    return out


def time_gemm1(case, configs, failed, lab, deadline, timer) -> list[dict]:
    rows = []
    for config in configs:
        row = {"config": config.label()}
        why = failed.get((lab, config, True, case.scaling, True))
        if why or time.monotonic() > deadline:
            rows.append({**row, "status": "compile failed" if why else "deadline", "why": why or ""})
            continue
        try:
            run = case.fp8_runner(config, weight_only=True)
            err = moe_fp8._checked(case, run, case.ref_wo)
            rows.append({**row, "status": "ok", "rel_error": err, "rel_error_vs_bf16": moe_fp8.relative(
                case.out, case.ref_bf16), "us": round(timer(run), 2)} if err < 1e-2
                else {**row, "status": "wrong", "rel_error": err})
        except Exception as exc:  # a launch failure is recorded, not fatal
            rows.append({**row, "status": "failed", "why": f"{type(exc).__name__}: {exc}"[:300]})
    return rows


def weight_only_case(shape, m, device, scaling, seed=0, hot=0):
    from kernels import fused_moe_fp8 as f8

    _, e, top_k, h, inter, _ = shape
    case = moe_fp8.Gemm1Case(e, top_k, h, inter, m, device, scaling, seed=seed, hot=hot)
    w1_dq = f8.dequantize_weights(f8.deinterleave_fp8(case.w1_il_q), case.w1_scales)
    case.ref_wo = f8.gemm1_reference(case.a, None, w1_dq, case.ids)
    return case


def run_case(shape, m, scaling, failed, device, device_name, dry, deadline, timer) -> dict:
    name, e, top_k, h, inter, _ = shape
    lab = moe_fp8.label(e, top_k, h, inter)
    row = {"case": name, "shape": lab, "e": e, "inter": inter, "m": m, "scaling": scaling}
    if time.monotonic() > deadline:
        return {**row, "status": "deadline"}
    case = weight_only_case(shape, m, device, scaling)
    row["w8a8"] = w8a8_baseline(case, shape, m, device, device_name, dry, timer)
    row["gemm1"] = time_gemm1(case, tiles(m, e, top_k, scaling, dry), failed, lab, deadline, timer)
    wo_failed = {k[:4]: v for k, v in failed.items() if k[4]}
    row["gemm2"] = moe_fp8.time_gemm2(e, top_k, h, inter, m, case.ids, case.weights.float(), scaling,
                                      tiles(m, e, top_k, scaling, dry), wo_failed, lab, deadline, timer, device,
                                      weight_only=True)
    best = moe_fp8.fastest(row["gemm1"])
    if best:
        del case
        hot = weight_only_case(shape, m, device, scaling, seed=1, hot=2)
        row["hot_rel_error"] = moe_fp8._checked(hot, hot.fp8_runner(parse_label(best["config"]), weight_only=True),
                                                hot.ref_wo)
    print("case:", name, m, scaling, json.dumps({k: v for k, v in row.items() if k in ("w8a8", "hot_rel_error")}),
          flush=True)
    return row


def best_us(rows) -> float | None:
    return (moe_fp8.fastest(rows) or {}).get("us")


def main(argv=None) -> int:
    args = moe_fp8.common_parser(__doc__).parse_args(argv)
    out, started, device, device_name, shapes = moe_fp8.start(args)
    dry = args.dry_run
    from advisor.measure.timing import versions

    ms = moe_fp8.token_counts(args, (37,) if dry else M_KEYS)
    cases = [(s, sc, m) for s in shapes for sc in moe_fp8.SCALINGS for m in ms]
    failed = {}
    if not dry:
        unique = {}
        for s, sc, m in cases:
            for config in tiles(m, s[1], s[2], sc, dry):
                for gated in (True, False):
                    key = (moe_fp8.label(*s[1:5]), config, gated, sc, True)
                    unique.setdefault(key, (s[1], s[2], s[3], s[4], m, config, gated, sc, True))
        failed = moe_fusion.compile_in_workers(moe_fp8._compile, unique, args.workers)
        print(f"compiled {len(unique)} in {time.monotonic() - started:.0f} s; {len(failed)} failed", flush=True)
        for key, why in list(failed.items())[:6]:
            print("  failed:", key[0], key[1].label(), key[2], why, flush=True)
    timer = moe_fusion._timer(dry)
    doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "gpu": device_name or "cpu (interpreter, dry run)",
           "form": "w8a16", **(versions() if not dry else {}), "command": " ".join(sys.argv),
           "compile_failed": {f"{k[0]} {k[1].label()} {'gemm1' if k[2] else 'gemm2'} {k[3]}": v
                              for k, v in failed.items()}, "tune": []}
    deadline = started + args.deadline
    for s, sc, m in cases:
        doc["tune"].append(run_case(s, m, sc, failed, device, device_name, dry, deadline, timer))
        doc["wall_s"] = round(time.monotonic() - started, 1)
        (out / "moe_fp8_weight_only.json").write_text(json.dumps(doc, indent=1) + "\n")
    print_table(doc)
    return 0


def print_table(doc: dict) -> None:
    anchors = moe_fp8.ANCHORS.get(moe_fp8.gpu_key(doc["gpu"]), {})
    print(f"\n{doc['gpu']}  triton {doc.get('triton', '-')}  torch {doc.get('torch', '-')}  (us; w8a8 GEMM1 with its"
          " quantiser; sums: GEMM1 + GEMM2 (+ the activation's quantiser for w8a8))")
    print(f"{'case':<22}{'M':>5}{'sc':>4}{'engine':>8}{'w8a8 g1':>9}{'w8a16 g1':>9}{'eng/wo':>7}{'w8a8 sum':>10}"
          f"{'wo sum':>9}  best weight-only GEMM1")
    for r in doc["tune"]:
        if "gemm1" not in r:
            continue
        engine = anchors.get((r["shape"], r["m"]), (None,))[0]
        a8 = r["w8a8"]
        g1, g2 = best_us(r["gemm1"]), best_us(r["gemm2"])
        a8_sum = sum(x for x in (a8["gemm1_us"], a8["gemm2_us"], a8["act_quant_us"]) if x) or None
        best = moe_fp8.fastest(r["gemm1"]) or {}
        print(f"{r['shape']:<22}{r['m']:>5}{r['scaling'][:2]:>4}{engine or 0:>8.1f}{a8['gemm1_us'] or 0:>9.1f}"
              f"{g1 or 0:>9.1f}{(engine / g1 if engine and g1 else 0):>7.3f}{a8_sum or 0:>10.1f}"
              f"{(g1 + g2 if g1 and g2 else 0):>9.1f}  {best.get('config', '-')}")
    ratios = [anchors[(r["shape"], r["m"])][0] / best_us(r["gemm1"]) for r in doc["tune"]
              if "gemm1" in r and (r["shape"], r["m"]) in anchors and best_us(r["gemm1"])]
    if ratios:
        print(f"engine (bf16) / weight-only GEMM1 at ANCHORS' token counts: min {min(ratios):.3f}, geomean "
              f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
