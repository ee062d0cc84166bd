"""fp8 w8a8 fused-MoE GEMM1 and layer, two scaling schemes, against bf16 and the engine (issue 16; RESULTS 40).

    python benchmarks/moe_fp8.py --plan                                   # no GPU: the prediction, before measuring
    python3 benchmarks/moe_fp8.py --out $OUT [--workers 15] [--deadline 400] [--only mixtral] [--ms 1024] [--layer]
    TRITON_INTERPRET=1 python benchmarks/moe_fp8.py --dry-run --out /tmp/x --layer   # CPU: tiny shapes

GEMM1 cases: every (shape, M) of ANCHORS section 3. Uniform random top-k routing (seeded), random bf16 data;
w1 quantised once per case and scheme (`kernels.fused_moe_fp8`: "block" 128 x 128, "channel" per row). Per
case, in one process: the bf16 fused-il GEMM1 at its tuned config (the shipped kernel), `torch._scaled_mm`
(row-wise fp8, [pairs, K] x [K, 2I]: the same FLOPs in a dense library GEMM); per scheme, the activation
quantiser alone (checked bit for bit against the torch quantiser), the fp8 GEMM1 over the scheme's TILES (SMALL
where experts get under 16 rows), each output poisoned with NaN and checked against the float32 GEMM over the
values the fp8 operands stand for (relative error < 1e-2; the error against the bf16 GEMM is recorded: what
fp8 costs), then the best config timed with its quantiser in one graph (what a layer pays) and checked again
under 2 hot experts. CUDA graphs of 10 launches after 3 warm-ups, median of 20 replays, no L2 flush. --layer:
at M >= 1024, the previous layer (`kernels.fused_moe`, its tuned configs), the shipped bf16 layer
(`fused_moe_fused`, its tuned files) and per scheme the fp8 layer (GEMM1 at this run's best config, GEMM2 at the
best of GEMM2_TILES timed alone), each checked against its float32 reference (LAYER_TOLERANCE says why the
channel layer's differs). Writes OUT/moe_fp8.json and prints a short table last.
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

CASES = (("mixtral-8x7b", 2, (1, 16, 256, 1024, 4096)), ("qwen2-57b-a14b", 2, (1, 256, 1024, 4096)),
         ("qwen3-30b-a3b", 4, (1, 256, 1024, 4096)))
DRY_SHAPES = (("dry-a", 8, 2, 256, 96, (37,)), ("dry-b", 16, 4, 128, 64, (29,)))
# Tiles per scaling scheme. Block scales keep a second accumulator-sized tile per K step in registers, so
# their tiles stay near 64 x 128 per warpgroup (RESULTS 40's first run: 128 x 256 on 8 warps ran 1.5x slower);
# channel scales run the bf16 kernel's K loop, so they take its tiles.
TILES = {
    "block": ("M64 N128 K128 G64 w4 s4", "M64 N128 K128 G16 w4 s3", "M64 N128 K128 G1 w4 s4",
              "M64 N128 K64 G64 w4 s5",
              "M128 N128 K128 G16 w8 s4", "M128 N128 K128 G64 w8 s3", "M64 N256 K128 G16 w8 s4",
              "M64 N256 K128 G64 w8 s3", "M64 N64 K128 G1 w4 s4", "M128 N256 K128 G16 w8 s3"),
    "channel": ("M128 N256 K128 G1 w8 s3", "M128 N256 K128 G16 w8 s4", "M128 N256 K128 G64 w8 s4",
                "M128 N256 K64 G16 w8 s4", "M256 N128 K128 G16 w8 s3", "M128 N128 K128 G16 w4 s4",
                "M128 N128 K128 G16 w8 s4", "M128 N128 K256 G16 w8 s3", "M64 N256 K128 G16 w4 s4",
                "M64 N128 K128 G64 w4 s4", "M64 N64 K128 G1 w4 s4"),
}
SMALL = ("M16 N64 K128 G1 w4 s3", "M16 N128 K128 G1 w4 s4", "M16 N32 K128 G1 w4 s4", "M32 N64 K128 G1 w4 s4",
         "M32 N128 K128 G1 w4 s3", "M64 N64 K128 G1 w4 s4")
GEMM2_TILES = {
    "block": ("M64 N128 K128 G64 w4 s4", "M64 N64 K128 G1 w4 s4", "M128 N128 K128 G16 w8 s4",
              "M64 N256 K128 G16 w8 s4"),
    "channel": ("M128 N256 K128 G1 w8 s3", "M128 N256 K128 G16 w8 s4", "M128 N128 K128 G16 w4 s4",
                "M64 N128 K128 G64 w4 s4", "M256 N128 K128 G16 w8 s3", "M128 N128 K64 G16 w4 s3"),
}
SCALINGS = ("block", "channel")
# The fp8 layers' check against their float32 reference (over the values the fp8 operands stand for). The
# channel scheme's K loop accumulates in the tensor core's fp8 accumulator (Triton's sm_90 default for fp8
# dots, unpromoted over all of K), which the first H100 run measured at 1.1-1.6% off that reference at the
# layer (GEMM1 alone 0.21-0.27%); the block scheme adds each 128-column product in float32 (0.42-0.45%).
# Against the bf16 layer both are 6.3-6.6% off: the rounding to 3 mantissa bits, not the accumulation.
LAYER_TOLERANCE = {"block": 1e-2, "channel": 2e-2}
DRY_TILES = ("M16 N64 K64 G1 w4 s2", "M32 N32 K128 G2 w4 s2")
# ANCHORS section 3: the engine's best bf16 GEMM1 time and the bf16 roofline floor (us), per GPU.
ANCHORS = {
    "H100": {("E8_top2_K4096_N14336", 1): (81.8, 77.9), ("E8_top2_K4096_N14336", 16): (310.3, 311.8),
             ("E8_top2_K4096_N14336", 256): (332.4, 317.1), ("E8_top2_K4096_N14336", 1024): (510.9, 333.7),
             ("E8_top2_K4096_N14336", 4096): (1672.9, 1238.6), ("E64_top8_K3584_N2560", 1): (53.2, 48.7),
             ("E64_top8_K3584_N2560", 256): (405.4, 393.5), ("E64_top8_K3584_N2560", 1024): (480.5, 405.7),
             ("E64_top8_K3584_N2560", 4096): (1215.0, 774.1), ("E128_top8_K2048_N384", 1): (6.8, 4.2),
             ("E128_top8_K2048_N384", 256): (74.6, 67.6), ("E128_top8_K2048_N384", 1024): (82.8, 70.2),
             ("E128_top8_K2048_N384", 4096): (133.0, 80.7)},
    "H200": {("E8_top2_K4096_N14336", 1): (57.3, 55.3), ("E8_top2_K4096_N14336", 16): (212.7, 221.4),
             ("E8_top2_K4096_N14336", 256): (241.6, 225.2), ("E8_top2_K4096_N14336", 1024): (526.6, 297.5),
             ("E8_top2_K4096_N14336", 4096): (1679.4, 1190.1), ("E64_top8_K3584_N2560", 1): (37.2, 34.6),
             ("E64_top8_K3584_N2560", 256): (276.1, 279.4), ("E64_top8_K3584_N2560", 1024): (384.4, 288.1),
             ("E64_top8_K3584_N2560", 4096): (1166.8, 743.8), ("E128_top8_K2048_N384", 1): (6.1, 3.0),
             ("E128_top8_K2048_N384", 256): (51.1, 48.0), ("E128_top8_K2048_N384", 1024): (61.3, 49.9),
             ("E128_top8_K2048_N384", 4096): (114.1, 63.8)},
}
# ANCHORS section 3's measured bf16 peak (TFLOP/s) and copy bandwidth (TB/s); fp8 at twice the bf16 rate (the
# spec sheets' ratio, as ceilings/hardware.py takes it where no fp8 rate was measured).
PEAKS = {"H100": (777.0, 3.02), "H200": (808.0, 4.25)}


def label(e, top_k, h, inter) -> str:
    return f"E{e}_top{top_k}_K{h}_N{2 * inter}"


def gpu_key(name: str | None) -> str | None:
    return next((k for k in ANCHORS if name and k in name), None)


def expected_rows(m, e, top_k) -> float:
    return m * top_k / e


def case_configs(m, e, top_k, dry, scaling: str, gemm: int = 1) -> list:
    """The tiles timed for one case (the tune run of 2026-11-24 also timed QUANT_A=1, A quantised in GEMM1's K
    loop: 2.3-10x slower on every case, so the option was removed; benchmarks/data/h100_moe_fp8_tune.json)."""
    small = expected_rows(m, e, top_k) < 16
    if dry:
        return [parse_label(t) for t in DRY_TILES]
    return [parse_label(t) for t in (SMALL if small else (GEMM2_TILES if gemm == 2 else TILES)[scaling])]


def floors(e, top_k, h, inter, m, gpu: str) -> tuple[float, float]:
    """(bf16 floor, fp8 floor) in us by ANCHORS section 3's rule: max(FLOPs / peak, compulsory bytes / bandwidth),
    compulsory bytes = weights of the experts routed to (expected under uniform routing) + A + C; fp8: 1-byte
    weights and A plus their float32 scales, C in bf16."""
    tflops, tbs = PEAKS[gpu]
    pairs = m * top_k
    experts_hit = e * (1 - (1 - top_k / e) ** m)
    flops = 2 * pairs * h * 2 * inter
    out = [pairs * inter * 2]
    w_elems, a_elems = experts_hit * 2 * inter * h, m * h
    bf16 = max(flops / (tflops * 1e6), (2 * (w_elems + a_elems) + out[0]) / (tbs * 1e6))
    fp8_bytes = w_elems * (1 + 4 / 128 ** 2) + a_elems * (1 + 4 / 128) + out[0]
    return bf16, max(flops / (2 * tflops * 1e6), fp8_bytes / (tbs * 1e6))


def plan() -> int:
    """The prediction made before measuring: the fp8 kernel reaches the fraction of its floor that the engine's
    bf16 kernel reached of the bf16 floor (ANCHORS 3), so predicted = fp8 floor x engine best / bf16 floor."""
    from kernels.moe_presets import get_preset

    print(f"{'GPU':<5}{'case':<22}{'M':>5}{'bf16 floor':>11}{'fp8 floor':>10}{'engine':>8}{'predicted':>10}{'gain':>7}")
    for gpu in ANCHORS:
        gains = []
        for name, tp, ms in CASES:
            s = get_preset(name).shape(tp)
            for m in ms:
                key = (label(s.num_experts, s.top_k, s.hidden, s.intermediate), m)
                engine, _ = ANCHORS[gpu][key]
                bf16, fp8 = floors(s.num_experts, s.top_k, s.hidden, s.intermediate, m, gpu)
                predicted = fp8 * engine / bf16
                if m >= 1024:
                    gains.append(engine / predicted)
                print(f"{gpu:<5}{key[0]:<22}{m:>5}{bf16:>11.1f}{fp8:>10.1f}{engine:>8.1f}{predicted:>10.1f}"
                      f"{engine / predicted:>7.2f}")
        print(f"{gpu}: predicted geomean gain over the engine's bf16 best at M >= 1024: "
              f"{math.exp(sum(map(math.log, gains)) / len(gains)):.2f}")
    return 0


def _compile(e, top_k, h, inter, m, config, gated: bool, scaling: str, weight_only: bool = False,
             fuse_sum: bool = True, tile_scales: bool | None = None) -> tuple[bool, str]:
    """Compile one (shape, config, form, scaling, A's type, GEMM2's form) of the fp8 kernel with tiny stand-ins
    and the real integer arguments."""
    try:
        warm_fp8(e, top_k, h, inter, m, config, gated, scaling, weight_only, fuse_sum, tile_scales)
        return True, ""
    except Exception as exc:  # a config that does not compile is a result, not a crash
        return False, f"{type(exc).__name__}: {' '.join(str(exc).split())[:240]}"


def warm_fp8(e, top_k, h, inter, m, config, gated: bool, scaling: str, weight_only: bool = False,
             fuse_sum: bool = True, tile_scales: bool | None = None):
    """The compiled fp8 kernel of one (shape, config, form, ...), by `warmup` with tiny stand-ins and the real
    integer arguments (so the launches that follow find it in Triton's cache)."""
    import torch
    import triton

    from kernels import fused_moe as fm
    from kernels import fused_moe_fp8 as f8
    from kernels import fused_moe_fused as ff

    dev = "cuda"
    k, rows_b = (h, 2 * inter) if gated else (inter, h)
    n_out = inter if gated else h
    a = torch.empty(16, 16, dtype=torch.bfloat16 if weight_only else f8.FP8, device=dev)
    w = torch.empty(1, 128, 16, dtype=f8.FP8, device=dev)
    s = torch.empty(16, dtype=torch.float32, device=dev)
    accumulate = not gated and fuse_sum
    c = torch.empty(16, 16, dtype=torch.float32 if accumulate else torch.bfloat16, device=dev)
    ids = torch.empty(16, dtype=torch.int32, device=dev)
    desc = fm.TensorDescriptor(w, [128, 16], [16, 1], [config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]])
    em = triton.cdiv(fm.max_padded_tokens(m * top_k, e, config["BLOCK_SIZE_M"]), config["BLOCK_SIZE_M"])
    em *= config["BLOCK_SIZE_M"]
    grid = ff.gemm_grid(em, n_out, config, gated)
    block = scaling == "block"
    if tile_scales is None:  # as `invoke_fp8_gemm` takes it
        tile_scales = f8.tile_scales_default(config, gated, n_out, scaling)
    kg = triton.cdiv(k, f8.SCALE_BLOCK) if block else 1
    rg = triton.cdiv(rows_b, f8.SCALE_BLOCK) if block else rows_b
    return f8.fused_moe_fp8_kernel.warmup(
        a, None if weight_only else s, w, desc, s, c, s, ids, ids, ids, n_out, k, em, m * top_k,
        top_k if gated else 1, top_k if accumulate else 1, grid[0], k, kg, rows_b * k, k, rg * kg, kg, n_out,
        grid=(1,), GATED=gated, ACCUMULATE=accumulate, PERSISTENT=False, EVEN_K=k % config["BLOCK_SIZE_K"] == 0,
        B_TMA=True, BLOCK_SCALED=block, A_FP8=not weight_only, compute_type=fm._TL_DTYPES[torch.bfloat16],
        TILE_SCALES=tile_scales, num_warps=config.num_warps, num_stages=config.num_stages, **config.params)


def compile_all(tasks, workers: int) -> dict:
    """{(shape label, config, gated, scaling): why} of the tasks whose compile failed."""
    unique = {(label(*t[:4]), *t[5:]): t for t in tasks}
    return moe_fusion.compile_in_workers(_compile, unique, workers)


class Gemm1Case:
    """One GEMM1 case: routing, bf16 inputs, fp8 w1 (interleaved, w1-order scales), references."""

    def __init__(self, e, top_k, h, inter, m, device, scaling: str, seed=0, hot=0):
        import torch

        from kernels import fused_moe_fp8 as f8
        from kernels import fused_moe_gemm1 as g1
        from kernels.fused_moe_fused import interleave_gate_up

        hidden, w1, _, self.weights, self.ids = moe_fusion.layer_tensors(e, top_k, h, 1, m, device, seed, hot)
        gen = torch.Generator(device=device).manual_seed(seed + 100)
        w1 = (torch.randn(e, 2 * inter, h, device=device, generator=gen) / math.sqrt(h)).to(torch.bfloat16)
        self.a = hidden
        self.scaling = scaling
        w1_q, self.w1_scales = f8.quantize_weights(w1, scaling)
        self.w1_il_q = f8.interleave_fp8(w1_q)
        self.a_q, self.a_s = f8.quantize_rows(hidden, scaling)
        q_ref, s_ref = f8.quantize_rows_reference(hidden, scaling)
        self.quant_mismatch = int((self.a_q.float() != q_ref.float()).sum()) + int((self.a_s != s_ref).sum())
        self.ref = f8.gemm1_reference(q_ref, s_ref, f8.dequantize_weights(w1_q, self.w1_scales), self.ids)
        self.ref_bf16 = g1.reference(hidden, w1, self.ids)
        self.w1_il = interleave_gate_up(w1)
        del w1, w1_q
        self.e, self.top_k, self.inter, self.m = e, top_k, inter, m
        self.out = torch.empty(m * top_k, inter, dtype=torch.bfloat16, device=device)
        self._align = {}

    def aligned(self, block: int):
        from kernels.moe_align import moe_align_triton

        if block not in self._align:
            self._align[block] = moe_align_triton(self.ids, (block,), self.e)[0]
        return self._align[block]

    def fp8_runner(self, config, with_quant: bool = False, weight_only: bool = False, tile_scales: bool | None = None):
        """GEMM1 on A quantised beforehand, or (with_quant) with its quantiser launch before it, or (weight_only)
        on the bf16 A itself; tile_scales as `invoke_fp8_gemm` takes it (None: its default)."""
        from kernels import fused_moe_fp8 as f8

        align = self.aligned(config["BLOCK_SIZE_M"])
        if weight_only:
            return lambda: f8.invoke_fp8_gemm(self.a, None, self.w1_il_q, self.w1_scales, self.out, self.weights,
                                              *align, top_k=self.top_k, config=config, gated=True,
                                              scaling=self.scaling, tile_scales=tile_scales)
        if not with_quant:
            return lambda: f8.invoke_fp8_gemm(self.a_q, self.a_s, self.w1_il_q, self.w1_scales, self.out, self.weights,
                                              *align, top_k=self.top_k, config=config, gated=True,
                                              scaling=self.scaling, tile_scales=tile_scales)

        def run():
            a_q, a_s = f8.quantize_rows(self.a, self.scaling)
            f8.invoke_fp8_gemm(a_q, a_s, self.w1_il_q, self.w1_scales, self.out, self.weights, *align,
                               top_k=self.top_k, config=config, gated=True, scaling=self.scaling,
                               tile_scales=tile_scales)
        return run

    def bf16_runner(self, config):
        from kernels import fused_moe_fused as ff

        align = self.aligned(config["BLOCK_SIZE_M"])
        return lambda: ff.invoke_fused_gemm(self.a, self.w1_il, self.out, self.weights, *align, top_k=self.top_k,
                                            config=config, gated=True, accumulate=False, interleaved=True)


def _checked(case, run, ref) -> float:
    from advisor.measure.timing import relative_error

    case.out.fill_(float("nan"))
    run()
    return relative_error(case.out.float(), ref)


def run_gemm1(shape, m, failed, device, device_name, dry, deadline, timer) -> dict:
    """The bf16 GEMM1 and a dense fp8 GEMM once, then per scaling scheme its quantiser and its tiles."""
    import torch

    from kernels import fused_moe_fp8 as f8
    from kernels.moe_configs import FUSED_DIR, get_config

    _, e, top_k, h, inter, _ = shape
    lab = label(e, top_k, h, inter)
    result = {"case": lab, "m": m, "scalings": {}}
    for scaling in SCALINGS:
        case = Gemm1Case(e, top_k, h, inter, m, device, scaling)
        if not dry and "bf16" not in result:
            tuned, _ = get_config(m, e, inter, top_k, device_name, config_dir=FUSED_DIR)
            err = _checked(case, case.bf16_runner(tuned), case.ref_bf16)
            result["bf16"] = {"config": tuned.label(), "rel_error": err,
                              "us": round(timer(case.bf16_runner(tuned)), 2)}
            try:  # the same FLOPs in a dense fp8 library GEMM: the tensor cores without gather or block scales
                x = torch.randn(m * top_k, h, device=device).to(f8.FP8)
                wt = torch.randn(2 * inter, h, device=device).to(f8.FP8).t()
                sa = torch.rand(m * top_k, 1, device=device) + 0.5
                sb = torch.rand(1, 2 * inter, device=device) + 0.5
                result["dense_fp8_us"] = round(timer(lambda x=x, wt=wt, sa=sa, sb=sb: torch._scaled_mm(
                    x, wt, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)), 2)
                del x, wt
            except Exception as exc:  # recorded: not every torch build has row-wise scaled_mm
                result["dense_fp8_error"] = f"{type(exc).__name__}: {exc}"[:200]
        part = result["scalings"][scaling] = {"quant_mismatches": case.quant_mismatch, "rows": []}
        if not dry:
            part["quant_us"] = round(timer(lambda c=case, sc=scaling: f8.quantize_rows(c.a, sc)), 2)
            # The quantiser with IEEE division (the default uses the GPU's fast one): its time, and values off the
            # torch quantiser's (the case's own check counts the default's).
            q_ex, s_ex = f8.quantize_rows(case.a, scaling, exact=True)
            q_ref, s_ref = f8.quantize_rows_reference(case.a, scaling)
            exact_us = timer(lambda c=case, sc=scaling: f8.quantize_rows(c.a, sc, True))
            part["quant_exact_div"] = {"us": round(exact_us, 2),
                                      "mismatches": int((q_ex.float() != q_ref.float()).sum())
                                      + int((s_ex != s_ref).sum())}
        part["rows"] = time_configs(case, case_configs(m, e, top_k, dry, scaling), failed, lab, deadline, timer)
        best = fastest(part["rows"])
        if best:
            config = parse_label(best["config"])
            part["best"] = {"config": best["config"], "gemm_us": best["gemm_us"], "with_quant_us": best["us"],
                            "rel_error_vs_bf16": best["rel_error_vs_bf16"], "rel_error": best["rel_error"]}
            del case
            hot = Gemm1Case(e, top_k, h, inter, m, device, scaling, seed=1, hot=2)
            part["best"]["hot_rel_error"] = _checked(hot, hot.fp8_runner(config, with_quant=True), hot.ref)
            del hot
    return result


def time_configs(case, configs, failed, lab, deadline, timer, alone: bool = True) -> list[dict]:
    """Each config of GEMM1 checked (output poisoned, against the float32 reference, < 1e-2) and timed with its
    quantiser launch before it: the time a layer pays; and (alone) without it."""
    rows = []
    for config in configs:
        row = {"config": config.label()}
        why = failed.get((lab, config, True, case.scaling))
        if why or time.monotonic() > deadline:
            rows.append({**row, "status": "compile failed" if why else "deadline", "why": why or ""})
            continue
        try:
            run = case.fp8_runner(config, with_quant=True)
            err = _checked(case, run, case.ref)
            if not err < 1e-2:
                rows.append({**row, "status": "wrong", "rel_error": err})
            else:
                rows.append({**row, "status": "ok", "rel_error": err,
                             "rel_error_vs_bf16": relative(case.out, case.ref_bf16), "us": round(timer(run), 2),
                             "gemm_us": round(timer(case.fp8_runner(config)), 2) if alone else None})
        except Exception as exc:  # a launch failure is recorded, not fatal
            rows.append({**row, "status": "failed", "why": f"{type(exc).__name__}: {exc}"[:300]})
        print("gemm1:", lab, case.m, case.scaling, json.dumps(rows[-1]), flush=True)
    return rows


def time_gemm2(e, top_k, h, inter, m, ids, weights, scaling, configs, failed, lab, deadline, timer, device,
               weight_only: bool = False) -> list:
    """GEMM2 (router weight and top-k sum fused, float32 out zeroed each call) per config on a random activation
    (quantised beforehand, or as it is for weight_only), checked against its float32 reference (< 1e-2) and
    timed with the zeroing."""
    import torch

    from kernels import fused_moe as fm
    from kernels import fused_moe_fp8 as f8
    from kernels.moe_align import moe_align_triton

    gen = torch.Generator(device=device).manual_seed(7)
    act = torch.randn(m * top_k, inter, device=device, generator=gen).to(torch.bfloat16)
    w2 = (torch.randn(e, h, inter, device=device, generator=gen) / math.sqrt(inter)).to(torch.bfloat16)
    act_q, act_s = (act, None) if weight_only else f8.quantize_rows(act, scaling)
    w2_q, w2_s = f8.quantize_weights(w2, scaling)
    a_ref = act.float() if weight_only else f8.dequantize_rows(act_q, act_s)
    rows = fm.fused_moe_gemm_reference(a_ref, f8.dequantize_weights(w2_q, w2_s), ids, 1, weights)
    ref = rows.view(m, top_k, -1).sum(dim=1)
    out = torch.zeros((m, h), dtype=torch.float32, device=device)
    results = []
    for config in configs:
        row = {"config": config.label()}
        why = failed.get((lab, config, False, scaling))
        if why or time.monotonic() > deadline:
            results.append({**row, "status": "compile failed" if why else "deadline", "why": why or ""})
            continue
        align = moe_align_triton(ids, (config["BLOCK_SIZE_M"],), e)[0]

        def run(c=config, a=align):
            out.zero_()
            f8.invoke_fp8_gemm(act_q, act_s, w2_q, w2_s, out, weights, *a, top_k=top_k, config=c, gated=False,
                               scaling=scaling)
        try:
            run()
            err = relative(out, ref)
            results.append({**row, "status": "ok", "rel_error": err, "us": round(timer(run), 2)} if err < 1e-2
                           else {**row, "status": "wrong", "rel_error": err})
        except Exception as exc:  # a launch failure is recorded, not fatal
            results.append({**row, "status": "failed", "why": f"{type(exc).__name__}: {exc}"[:300]})
    return results


def tune(shapes, ms, failed, device, device_name, dry, deadline, timer) -> list[dict]:
    """Both GEMMs of the fp8 layer per shape, scaling scheme and token count: every candidate checked and timed
    (GEMM1 with its quantiser); `--write-from` turns the fastest into config files."""
    rows = []
    for shape in shapes:
        name, e, top_k, h, inter, _ = shape
        lab = label(e, top_k, h, inter)
        for scaling in SCALINGS:
            for m in ms:
                if time.monotonic() > deadline:
                    rows.append({"case": name, "shape": lab, "m": m, "scaling": scaling, "status": "deadline"})
                    continue
                case = Gemm1Case(e, top_k, h, inter, m, device, scaling)
                g1 = time_configs(case, case_configs(m, e, top_k, dry, scaling), failed, lab, deadline, timer,
                                  alone=False)
                g2 = time_gemm2(e, top_k, h, inter, m, case.ids, case.weights.float(), scaling,
                                case_configs(m, e, top_k, dry, scaling, gemm=2), failed, lab, deadline, timer, device)
                rows.append({"case": name, "shape": lab, "e": e, "inter": inter, "m": m, "scaling": scaling,
                             "gemm1": g1, "gemm2": g2})
                del case
    return rows


def write_from(path: Path) -> int:
    """Config files (and side files of the measured times) from a `--tune` run's JSON, or a weight-only form's
    (`moe_fp8_weight_only.py`, `moe_fp8_gemv.py`: `fp8_w8a16` files; its `form` key says which)."""
    from kernels import fused_moe_fp8 as f8
    from kernels import moe_configs

    doc = json.loads(path.read_text())
    form = doc.get("form", "w8a8")
    tables: dict = {}
    for r in doc["tune"]:
        if form == "gemv" and not gemv_wins(r):  # the GEMV file holds the counts where its layer won
            continue
        for gemm in (1, 2):
            rows = r.get(f"gemm{gemm}", [])
            best = fastest(rows)
            if best:
                key = (r["e"], r["inter"], r["scaling"], gemm)
                compared = sum(x["status"] == "ok" for x in rows)
                tables.setdefault(key, {})[r["m"]] = moe_configs.MeasuredEntry(parse_label(best["config"]),
                                                                                best["us"], compared)
    source = {1: "benchmarks/moe_fp8.py --tune: fp8 GEMM1 (SiLU-and-mul fused, interleaved w1) with its activation "
                 f"quantiser ({doc.get('quantiser', 'IEEE division')}), CUDA graph median",
              2: "benchmarks/moe_fp8.py --tune: fp8 GEMM2 (router weight and top-k sum fused, float32 atomics) with "
                 "its output zeroed, CUDA graph median"}
    if form != "w8a8":
        script = "moe_fp8_gemv.py: GEMV" if form == "gemv" else "moe_fp8_weight_only.py: tiled"
        source = {g: f"benchmarks/{script} weight-only fp8 GEMM{g} on bf16 activations (no quantiser, no align)"
                     + (", its output zeroed" if g == 2 and form == "w8a16" else "") + ", CUDA graph median"
                  for g in (1, 2)}
    for (e, inter, scaling, gemm), measured in sorted(tables.items()):
        target = f8.config_path(e, inter, doc["gpu"], scaling, gemm, form)
        table = moe_configs.ConfigTable({m: entry.config for m, entry in measured.items()})
        meta = moe_configs.ConfigMeta(doc["gpu"], doc.get("triton"), measured, source[gemm])
        moe_configs.write_config_file(target, table, meta)
        print("wrote", target.relative_to(Path.cwd()) if target.is_relative_to(Path.cwd()) else target)
    return 0


def fastest(rows) -> dict | None:
    """The timed row ("status" ok) with the least "us", or None."""
    return min((r for r in rows if r["status"] == "ok"), key=lambda r: r["us"], default=None)


def gemv_wins(row) -> bool:
    """Whether a `moe_fp8_gemv.py` row timed the GEMV layer faster than every tiled fp8 layer beside it."""
    layers = row.get("layers", {})
    gemv = (layers.get("gemv") or {}).get("us")
    tiled = [x["us"] for k, x in layers.items() if k.startswith("fp8_w8a") and x.get("us")]
    return bool(gemv and tiled and gemv < min(tiled))


def relative(out, ref) -> float:
    from advisor.measure.timing import relative_error

    return relative_error(out.float(), ref)


def run_layer(shape, m, gemm1_configs: dict, device, device_name, dry, timer) -> dict:
    """Previous layer, shipped bf16 layer, and per scaling scheme the fp8 layer (GEMM1 at this run's best config
    for the case, GEMM2 at the best of GEMM2_TILES timed alone), each checked against its float32 reference."""
    import torch

    from kernels import fused_moe as fm
    from kernels import fused_moe_fp8 as f8
    from kernels import fused_moe_fused as ff
    from kernels.moe_align import moe_align_triton
    from kernels.moe_configs import get_config

    name, e, top_k, h, inter, _ = shape
    tensors = moe_fusion.layer_tensors(e, top_k, h, inter, m, device, seed=1)
    hidden, w1, w2, weights, ids = tensors
    w1_il = ff.interleave_gate_up(w1)
    previous, _ = get_config(m, e, inter, top_k, device_name)
    ref_bf16 = fm.fused_moe_reference(*tensors)
    result = {"case": name, "m": m, "previous_config": previous.label(), "gemm2": {}, "configs": {}}
    fns = {"previous": (lambda: fm.fused_moe(*tensors, config=previous, config2=previous), ref_bf16),
           "shipped_bf16": (lambda: ff.fused_moe_fused(hidden, w1_il, w2, weights, ids, w1_interleaved=True), ref_bf16)}
    out2 = torch.zeros((m, h), dtype=torch.float32, device=device)
    for scaling, gemm1_config in gemm1_configs.items():
        fp8 = f8.Fp8Weights(w1, w2, scaling)
        act_q, act_s = f8.quantize_rows(torch.randn(m * top_k, inter, device=device).to(torch.bfloat16), scaling)
        rows = result["gemm2"][scaling] = []
        for tile in (DRY_TILES if dry else GEMM2_TILES[scaling]):
            config = parse_label(tile)
            align = moe_align_triton(ids, (config["BLOCK_SIZE_M"],), e)[0]
            try:
                run = (lambda c=config, a=align, w=fp8, q=act_q, s=act_s, sc=scaling: (out2.zero_(), f8.invoke_fp8_gemm(
                    q, s, w.w2, w.w2_scales, out2, weights.float(), *a, top_k=top_k, config=c, gated=False,
                    scaling=sc)))
                run()
                rows.append({"config": tile, "us": round(timer(run), 2)})
            except Exception as exc:  # a config that fails is recorded
                rows.append({"config": tile, "why": f"{type(exc).__name__}: {exc}"[:200]})
        timed = [r for r in rows if "us" in r]
        config2 = parse_label(min(timed, key=lambda r: r["us"])["config"]) if timed else gemm1_config
        result["configs"][scaling] = {"gemm1": gemm1_config.label(), "gemm2": config2.label()}
        ref_fp8 = f8.layer_reference(hidden, fp8, weights, ids)
        fns[f"fp8_{scaling}"] = (lambda w=fp8, c1=gemm1_config, c2=config2: f8.fused_moe_fp8(hidden, w, weights, ids,
                                                                                            c1, c2), ref_fp8)
        # As shipped: no config given, so the layer reads the tuned files for this GPU (or the default rule).
        (c1, src1), (c2, src2) = f8.layer_configs(m, e, inter, top_k, device_name, scaling)
        result["configs"][scaling].update(files=[c1.label(), c2.label()], from_files=[src1, src2])
        fns[f"fp8_{scaling}_files"] = (lambda w=fp8: f8.fused_moe_fp8(hidden, w, weights, ids), ref_fp8)
    result["runs"] = {}
    for variant, (fn, ref) in fns.items():
        out = fn()
        err = relative(out, ref)
        scheme = variant.split("_")[1] if variant.startswith("fp8") else None
        row = {"rel_error": err, "us": round(timer(fn), 2) if err < LAYER_TOLERANCE.get(scheme, 1e-2) else None}
        if variant.startswith("fp8"):
            row["rel_error_vs_bf16"] = relative(out, ref_bf16)
        result["runs"][variant] = row
    return result


def common_parser(doc: str) -> argparse.ArgumentParser:
    """The options the fp8 benchmarks share: --out, --dry-run, --workers, --deadline, --only, --ms."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--deadline", type=float, default=1e9)
    parser.add_argument("--only", help="comma-separated case prefixes to keep, e.g. mixtral,qwen3")
    parser.add_argument("--ms", help="comma-separated token counts to keep")
    return parser


def start(args) -> tuple[Path, float, str, str | None, list]:
    """(output folder, start time, device, GPU name or None, shapes kept by --only) of a run; under --dry-run,
    the interpreter's device with the torch quantiser (the interpreter's e4m3 cast rounds unlike the GPU's:
    tests/test_fused_moe_fp8.py)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    device = target_device(args.dry_run)
    import torch

    from kernels import fused_moe_fp8 as f8

    if args.dry_run:
        f8.quantize_rows = f8.quantize_rows_reference
    keep = tuple(args.only.split(",")) if args.only else ("",)
    shapes = [s for s in moe_fusion.shapes(args.dry_run, CASES, DRY_SHAPES) if s[0].startswith(keep)]
    return out, started, device, None if args.dry_run else torch.cuda.get_device_name(), shapes


def choose_scalings(parser, text: str) -> None:
    """Keep the schemes `--scalings` names (this module's SCALINGS, which every step of a run reads)."""
    global SCALINGS
    chosen = tuple(x for x in text.split(",") if x)
    if not chosen or set(chosen) - set(SCALINGS):
        parser.error(f"--scalings {text!r}: give some of {','.join(SCALINGS)}")
    SCALINGS = chosen


def token_counts(args, counts) -> list[int]:
    """`counts` less those --ms leaves out."""
    keep = {int(x) for x in args.ms.split(",")} if args.ms else None
    return [m for m in counts if keep is None or m in keep]


def main(argv=None) -> int:
    parser = common_parser(__doc__)
    parser.add_argument("--plan", action="store_true", help="print the prediction (no GPU) and stop")
    parser.add_argument("--layer", action="store_true", help="also time the layer at M >= 1024")
    parser.add_argument("--tune", action="store_true",
                        help="tune both GEMMs per shape, scheme and the engines' token counts (OUT/moe_fp8_tune.json)")
    parser.add_argument("--write-from", type=Path, help="a --tune JSON: write kernels/configs/fp8/ files from it")
    parser.add_argument("--scalings", default=",".join(SCALINGS), help="comma-separated schemes to run (block,channel)")
    args = parser.parse_args(argv)
    choose_scalings(parser, args.scalings)
    if args.plan:
        return plan()
    if args.write_from:
        return write_from(args.write_from)
    out, started, device, device_name, shapes = start(args)
    dry = args.dry_run
    from advisor.measure.timing import versions

    if args.tune:
        from kernels.moe_configs import ENGINE_M_KEYS

        tune_ms = token_counts(args, (37,) if dry else ENGINE_M_KEYS)
        cases = [(s, m) for s in shapes for m in tune_ms]
    else:
        cases = [(s, m) for s in shapes for m in token_counts(args, s[5])]
    failed = {}
    if not dry:
        tasks = [(s[1], s[2], s[3], s[4], m, c, True, sc) for s, m in cases for sc in SCALINGS
                 for c in case_configs(m, s[1], s[2], dry, sc)]
        if args.layer or args.tune:
            tasks += [(s[1], s[2], s[3], s[4], m, c, False, sc) for s, m in cases if args.tune or m >= 1024
                      for sc in SCALINGS for c in case_configs(m, s[1], s[2], dry, sc, gemm=2)]
        # One compile per kernel specialisation: the token count only sizes the grid.
        tasks = list({(t[:4], t[5:]): t for t in tasks}.values())
        failed = compile_all(tasks, args.workers)
        print(f"compiled {len(set(tasks))} in {time.monotonic() - started:.0f} s; {len(failed)} failed", flush=True)
        for key, why in list(failed.items())[:6]:
            print("  failed:", key[0], key[1].label(), key[2], why, flush=True)
    timer = moe_fusion._timer(dry)
    doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "gpu": device_name or "cpu (interpreter, dry run)",
           "quantiser": "fast division",
           **(versions() if not dry else {}), "command": " ".join(sys.argv),
           "compile_failed": {f"{k[0]} {k[1].label()} {'gemm1' if k[2] else 'gemm2'} {k[3]}": v
                              for k, v in failed.items()},
           "gemm1": [], "layers": []}

    def save():
        doc["wall_s"] = round(time.monotonic() - started, 1)
        (out / "moe_fp8.json").write_text(json.dumps(doc, indent=1) + "\n")

    deadline = started + args.deadline
    if args.tune:
        doc["tune"] = tune(shapes, tune_ms, failed, device, device_name, dry, deadline, timer)
        (out / "moe_fp8_tune.json").write_text(json.dumps({**doc, "wall_s": round(time.monotonic() - started, 1)},
                                                          indent=1) + "\n")
        done = [r for r in doc["tune"] if "gemm1" in r]
        print(f"tuned {len(done)} of {len(doc['tune'])} (shape, scheme, M); "
              f"{sum(len(r['gemm1']) + len(r['gemm2']) for r in done)} configs timed; "
              f"{sum(x['status'] != 'ok' for r in done for x in r['gemm1'] + r['gemm2'])} not ok")
        return 0
    for s, m in cases:
        doc["gemm1"].append(run_gemm1(s, m, failed, device, device_name, dry, deadline, timer))
        save()
    if args.layer:
        for (s, m), g in zip(cases, doc["gemm1"], strict=True):
            best = {sc: parse_label(p["best"]["config"]) for sc, p in g["scalings"].items() if "best" in p}
            if (dry or m >= 1024) and best and time.monotonic() < deadline:
                doc["layers"].append(run_layer(s, m, best, device, device_name, dry, timer))
                save()
    save()
    print_table(doc)
    return 0


def print_table(doc: dict) -> None:
    gk = gpu_key(doc["gpu"])
    print(f"\n{doc['gpu']}  triton {doc.get('triton', '-')}  torch {doc.get('torch', '-')}  "
          "(us; +q = with its quantiser)")
    print(f"{'case':<22}{'M':>5}{'bf16':>8}{'dense8':>8}{'engine':>8}" + "".join(
        f"{sc + ' +q':>14}{'eng/' + sc[:2]:>7}" for sc in SCALINGS) + f"{'vs bf16':>8}  best configs")
    ratios = {sc: [] for sc in SCALINGS}
    for r in doc["gemm1"]:
        engine = ANCHORS.get(gk, {}).get((r["case"], r["m"]), (None, None))[0]
        line = f"{r['case']:<22}{r['m']:>5}{r.get('bf16', {}).get('us', 0):>8.1f}{r.get('dense_fp8_us', 0):>8.1f}"
        line += f"{engine or 0:>8.1f}"
        errs, configs = [], []
        for sc in SCALINGS:
            b = r["scalings"].get(sc, {}).get("best", {})
            ratio = engine / b["with_quant_us"] if engine and b else 0
            if ratio and r["m"] >= 1024:
                ratios[sc].append(ratio)
            line += f"{b.get('with_quant_us', 0):>14.1f}{ratio:>7.3f}"
            errs.append(b.get("rel_error_vs_bf16", 0))
            configs.append(b.get("config", "-"))
        print(line + f"{max(errs):>8.3f}  " + " | ".join(configs))
    for sc, rs in ratios.items():
        if rs:
            print(f"geomean engine (bf16) / fp8 {sc} GEMM1 with its quantiser, M >= 1024: "
                  f"{math.exp(sum(map(math.log, rs)) / len(rs)):.3f}")
    for r in doc["layers"]:
        runs = r["runs"]
        prev = runs["previous"]["us"]
        print(f"layer {r['case']:<20}{r['m']:>5}  " + "  ".join(
            f"{v}={x['us']}" + (f" (x{prev / x['us']:.3f}, err vs bf16 {x['rel_error_vs_bf16']:.3f})"
                                if v.startswith("fp8") and prev and x["us"] else "") for v, x in runs.items()))


if __name__ == "__main__":
    raise SystemExit(main())
