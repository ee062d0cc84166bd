"""Decode-time fp8 MoE GEMVs against the tiled fp8 kernels, the bf16 layers and the engine (issue 16; RESULTS 41).

    python3 benchmarks/moe_fp8_gemv.py --out $OUT [--workers 15] [--deadline 480] [--only qwen3] [--ms 1,2]
    TRITON_INTERPRET=1 python benchmarks/moe_fp8_gemv.py --dry-run --out /tmp/x      # CPU: tiny shapes

Per shape of ANCHORS section 3, scaling scheme and token count (MS, ascending, up to and including the first
where the GEMV layer is slower than a tiled fp8 layer: past it pairs share experts more): GEMM1 and GEMM2 of
`kernels.fused_moe_fp8_gemv` over CONFIGS, each output poisoned with NaN and checked against its float32
reference over bf16 activations and the dequantised weights (< 1e-2); then the layers, each checked against
its float32 reference and timed whole (routing given, align included where the layer aligns): the GEMV layer
at this run's best configs, the tiled w8a8 fp8 layer at its tuned files, the tiled weight-only layer at the
weight-only run's best configs (`--wo-json`, optional), the shipped bf16 layer (`fused_moe_fused`, its files)
and the previous layer (`kernels.fused_moe`). Uniform random top-k routing (seeded), random data, and the best
GEMV layer checked again under 2 hot experts; CUDA graphs of 10 launches after 3 warm-ups, median of 20
replays. --cold: each timed call after a 256 MB buffer is zeroed inside the same graph, the zeroing's own
graph time subtracted (L2 holds none of the weights, as when each layer of a model runs once per token;
without it the weights of a small case stay in L2 across replays), the GEMVs at the shipped files' configs
only, and the shipped bf16 GEMM1 (fused-il, its tuned config) timed the same way beside them.
Writes OUT/moe_fp8_gemv.json (`python benchmarks/moe_fp8.py --write-from` makes the GEMV config files of
it, with each token count's best GEMM1 and GEMM2 and their times) and prints a short table last.
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

MS = (1, 2, 4, 8, 16, 24, 32, 48, 64)  # the engines' token counts, walked up while the GEMV layer wins
# (BLOCK_ROWS, BLOCK_K, warps, stages): more rows per program reuse the activation load, fewer make more
# programs (the one-token layer has only top_k x 2I rows); longer K steps put more bytes in flight.
CONFIGS = tuple((r, k, w, s) for r in (8, 16, 32) for k in (256, 512, 1024) for w in (4, 8) for s in (1, 3)) + (
    (16, 128, 4, 1), (4, 512, 2, 1), (8, 2048, 8, 1), (4, 1024, 4, 1))
DRY_CONFIGS = ((16, 128, 4, 1), (8, 256, 2, 1))


def gemv_configs(scaling: str, dry: bool) -> list:
    from kernels import fused_moe_fp8_gemv as gv

    out = []
    for rows, bk, warps, stages in (DRY_CONFIGS if dry else CONFIGS):
        config = parse_label(f"M1 N{rows} K{bk} G1 w{warps} s{stages}")
        try:
            gv.check_config(config, scaling)
            out.append(config)
        except Exception:  # a tile the scheme cannot take is not timed
            pass
    return out


def _stand_in(e, h, inter, scaling, device):
    """Fp8Weights-shaped empty tensors (what the GEMVs read), for compiling with the real strides."""
    from types import SimpleNamespace

    import torch

    from kernels import fused_moe_fp8 as f8

    def scales(rows, cols):
        if scaling == "channel":
            return torch.empty(e, rows, 1, device=device)
        return torch.empty(e, -(-rows // 128), -(-cols // 128), device=device)

    return SimpleNamespace(w1_il=torch.empty(e, 2 * inter, h, dtype=f8.FP8, device=device),
                           w1_scales=scales(2 * inter, h), w2=torch.empty(e, h, inter, dtype=f8.FP8, device=device),
                           w2_scales=scales(h, inter),
                           scaling=scaling, two_i=2 * inter, hidden=h, num_experts=e)


def _compile(h, inter, top_k, config, scaling, gemm) -> tuple[bool, str]:
    """Compile one GEMV of one (shape, config, scheme) by launching it on one expert's empty weights."""
    try:
        import torch

        from kernels import fused_moe_fp8_gemv as gv

        w = _stand_in(1, h, inter, scaling, "cuda")
        ids = torch.zeros(1, top_k, dtype=torch.int32, device="cuda")
        if gemm == 1:
            gv.gemv_gemm1(torch.zeros(1, h, dtype=torch.bfloat16, device="cuda"), w, ids, config)
        else:
            act = torch.zeros(top_k, inter, dtype=torch.bfloat16, device="cuda")
            gv.gemv_gemm2(act, w, torch.ones(1, top_k, device="cuda"), ids, torch.bfloat16, config)
        torch.cuda.synchronize()
        return True, ""
    except Exception as exc:  # a config that does not compile is a result, not a crash
        return False, f"{type(exc).__name__}: {' '.join(str(exc).split())[:240]}"


class Case:
    """One (shape, M, scheme): routing, bf16 data, fp8 weights and the weight-only references."""

    def __init__(self, shape, m, scaling, device, seed=0, hot=0):
        import torch

        from kernels import fused_moe as fm
        from kernels import fused_moe_fp8 as f8

        _, e, top_k, h, inter, _ = shape
        self.tensors = moe_fusion.layer_tensors(e, top_k, h, inter, m, device, seed, hot)
        self.hidden, w1, w2, self.weights, self.ids = self.tensors
        self.fp8 = f8.Fp8Weights(w1, w2, scaling)
        w1_dq, w2_dq = self.fp8.dequantized()
        self.ref1 = f8.gemm1_reference(self.hidden, None, w1_dq, self.ids)
        gen = torch.Generator(device=device).manual_seed(seed + 5)
        self.act = torch.randn(m * top_k, inter, device=device, generator=gen).to(torch.bfloat16)
        rows = fm.fused_moe_gemm_reference(self.act.float(), w2_dq, self.ids, 1, self.weights.float())
        self.ref2 = rows.view(m, top_k, -1).sum(dim=1)
        self.ref_layer = f8.layer_reference(self.hidden, self.fp8, self.weights, self.ids, weight_only=True)
        self.ref_w8a8 = f8.layer_reference(self.hidden, self.fp8, self.weights, self.ids)
        self.ref_bf16 = fm.fused_moe_reference(*self.tensors)
        del w1_dq, w2_dq


def time_gemvs(case, configs, failed, key, deadline, timer) -> tuple[list, list]:
    from kernels import fused_moe_fp8_gemv as gv

    rows1, rows2 = [], []
    for config in configs:
        row = {"config": config.label()}
        runs = ((1, rows1, lambda c=config: gv.gemv_gemm1(case.hidden, case.fp8, case.ids, c), case.ref1),
                (2, rows2, lambda c=config: gv.gemv_gemm2(case.act, case.fp8, case.weights, case.ids, None, c),
                 case.ref2))
        for gemm, rows, run, ref in runs:
            why = failed.get((*key, config, gemm))
            if why or time.monotonic() > deadline:
                rows.append({**row, "status": "compile failed" if why else "deadline", "why": why or ""})
                continue
            try:
                err = moe_fp8.relative(run(), ref)  # a fresh output each call: nothing left from a previous config
                rows.append({**row, "status": "ok", "rel_error": err, "us": round(timer(run), 2)} if err < 1e-2
                            else {**row, "status": "wrong", "rel_error": err})
            except Exception as exc:  # a launch failure is recorded, not fatal
                rows.append({**row, "status": "failed", "why": f"{type(exc).__name__}: {exc}"[:300]})
    return rows1, rows2


def time_layers(case, shape, m, scaling, c1, c2, wo_configs, device_name, dry, timer) -> dict:
    from kernels import fused_moe as fm
    from kernels import fused_moe_fp8 as f8
    from kernels import fused_moe_fp8_gemv as gv
    from kernels import fused_moe_fused as ff
    from kernels.moe_configs import get_config

    _, e, top_k, h, inter, _ = shape
    hidden, w1, w2, weights, ids = case.tensors
    w1_il = ff.interleave_gate_up(w1)
    previous, _ = get_config(m, e, inter, top_k, None if dry else device_name)
    layers = {"gemv": (lambda: gv.fused_moe_fp8_gemv(hidden, case.fp8, weights, ids, c1, c2), case.ref_layer),
              "fp8_w8a8_files": (lambda: f8.fused_moe_fp8(hidden, case.fp8, weights, ids, form="w8a8"),
                                 case.ref_w8a8),
              "shipped_bf16": (lambda: ff.fused_moe_fused(hidden, w1_il, w2, weights, ids, w1_interleaved=True),
                               case.ref_bf16),
              "previous": (lambda: fm.fused_moe(*case.tensors, config=previous, config2=previous), case.ref_bf16)}
    # As shipped: no form and no config, so the layer picks its form and configs from the files for this GPU.
    auto = f8.choose_form(m, e, inter, None if dry else device_name, scaling)
    layers["fp8_auto"] = (lambda: f8.fused_moe_fp8(hidden, case.fp8, weights, ids),
                          case.ref_w8a8 if auto == "w8a8" else case.ref_layer)
    if wo_configs:
        layers["fp8_w8a16_tiled"] = (lambda: f8.fused_moe_fp8(hidden, case.fp8, weights, ids, *wo_configs,
                                                               form="w8a16"), case.ref_layer)
    out = {"auto_form": auto}
    for name, (fn, ref) in layers.items():
        try:
            y = fn()
            err = moe_fp8.relative(y, ref)
            out[name] = {"rel_error": err, "rel_error_vs_bf16": moe_fp8.relative(y, case.ref_bf16),
                         "us": round(timer(fn), 2) if err < moe_fp8.LAYER_TOLERANCE["channel"] else None}
        except Exception as exc:  # a layer that fails is recorded
            out[name] = {"why": f"{type(exc).__name__}: {exc}"[:300]}
    return out


def cold_timer(flush_bytes: int = 256 << 20):
    """us of one call with L2 flushed before it: graph time of (zero a buffer larger than L2, call) minus that
    of the zeroing alone (both CUDA-graph medians)."""
    import torch

    from advisor.measure.timing import time_launch

    scratch = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda")
    flush_us = time_launch(scratch.zero_, launches_per_graph=10, replays=20, warmup=3).us

    def timed(fn):
        return time_launch(lambda: (scratch.zero_(), fn()), launches_per_graph=10, replays=20, warmup=3).us - flush_us
    return timed


def bf16_gemm1_us(case, shape, m, device_name, timer) -> float:
    """The shipped bf16 GEMM1 (SiLU fused, interleaved w1, its tuned config) on the case's data, timed alone."""
    import torch

    from kernels import fused_moe_fused as ff
    from kernels.moe_align import moe_align_triton
    from kernels.moe_configs import FUSED_DIR, get_config

    _, e, top_k, h, inter, _ = shape
    hidden, w1, _, weights, ids = case.tensors
    config, _ = get_config(m, e, inter, top_k, device_name, config_dir=FUSED_DIR)
    w1_il = ff.interleave_gate_up(w1)
    align = moe_align_triton(ids, (config["BLOCK_SIZE_M"],), e)[0]
    out = torch.empty(m * top_k, inter, dtype=torch.bfloat16, device=hidden.device)
    return round(timer(lambda: ff.invoke_fused_gemm(hidden, w1_il, out, weights, *align, top_k=top_k, config=config,
                                                    gated=True, accumulate=False, interleaved=True)), 2)


def weight_only_configs(path: Path | None, shape_label, m, scaling):
    """The weight-only run's best GEMM1 and GEMM2 configs for a case, or None."""
    if not path or not path.exists():
        return None
    for r in json.loads(path.read_text())["tune"]:
        if r.get("shape") == shape_label and r["m"] == m and r["scaling"] == scaling and "gemm1" in r:
            b1, b2 = moe_fp8.fastest(r["gemm1"]), moe_fp8.fastest(r["gemm2"])
            return (parse_label(b1["config"]), parse_label(b2["config"])) if b1 and b2 else None
    return None


def main(argv=None) -> int:
    parser = moe_fp8.common_parser(__doc__)
    parser.add_argument("--wo-json", type=Path, help="a moe_fp8_weight_only.py JSON of the same GPU")
    parser.add_argument("--table", type=Path, help="print the table of a run's JSON and stop (no GPU)")
    parser.add_argument("--cold", action="store_true", help="L2 flushed before each timed call (see above)")
    args = parser.parse_args(argv)
    if args.table:
        print_table(json.loads(args.table.read_text()))
        return 0
    out, started, device, device_name, shapes = moe_fp8.start(args)
    dry = args.dry_run
    from advisor.measure.timing import versions
    from kernels import fused_moe_fp8 as f8

    ms = moe_fp8.token_counts(args, (3,) if dry else MS)
    failed = {}
    if not dry:
        unique = {(s[3], s[4], s[2], sc, c, g): (s[3], s[4], s[2], c, sc, g) for s in shapes
                  for sc in moe_fp8.SCALINGS for c in gemv_configs(sc, dry) for g in (1, 2)}
        failed = moe_fusion.compile_in_workers(_compile, unique, args.workers)
        print(f"compiled {len(unique)} in {time.monotonic() - started:.0f} s; {len(failed)} failed", flush=True)
        for key, why in list(failed.items())[:4]:
            print("  failed:", key[:4], key[4].label(), "gemm", key[5], why, flush=True)
    timer = cold_timer() if args.cold and not dry else moe_fusion._timer(dry)
    doc = {"cold_l2": bool(args.cold), "date": time.strftime("%Y-%m-%d %H:%M"),
           "gpu": device_name or "cpu (interpreter, dry run)",
           **(versions() if not dry else {}), "command": " ".join(sys.argv),
           "form": "gemv", "tune": [],
           "compile_failed": [f"{k[:4]} {k[4].label()} gemm{k[5]}: {v}" for k, v in failed.items()]}
    deadline = started + args.deadline
    for shape in shapes:
        name, e, top_k, h, inter, _ = shape
        lab = moe_fp8.label(e, top_k, h, inter)
        for scaling in moe_fp8.SCALINGS:
            for m in ms:
                row = {"case": name, "shape": lab, "e": e, "inter": inter, "m": m, "scaling": scaling}
                if time.monotonic() > deadline:
                    doc["tune"].append({**row, "status": "deadline"})
                    break
                case = Case(shape, m, scaling, device)
                configs = gemv_configs(scaling, dry)
                if args.cold:  # the shipped files' tiles (both GEMMs' configs timed for each GEMM)
                    (s1, _), (s2, _) = f8.layer_configs(m, e, inter, top_k, device_name, scaling, "gemv")
                    configs = [c for c in configs if c in (s1, s2)] or configs[:1]
                row["gemm1"], row["gemm2"] = time_gemvs(case, configs, failed, (h, inter, top_k, scaling),
                                                        deadline, timer)
                if not dry:
                    row["bf16_gemm1_us"] = bf16_gemm1_us(case, shape, m, device_name, timer)
                b1, b2 = moe_fp8.fastest(row["gemm1"]), moe_fp8.fastest(row["gemm2"])
                if b1 and b2:
                    c1, c2 = parse_label(b1["config"]), parse_label(b2["config"])
                    wo = weight_only_configs(args.wo_json, lab, m, scaling)
                    row["layers"] = time_layers(case, shape, m, scaling, c1, c2, wo, device_name, dry, timer)
                    del case
                    hot = Case(shape, m, scaling, device, seed=1, hot=2)
                    from kernels import fused_moe_fp8_gemv as gv

                    row["hot_rel_error"] = moe_fp8.relative(gv.fused_moe_fp8_gemv(
                        hot.hidden, hot.fp8, hot.weights, hot.ids, c1, c2), hot.ref_layer)
                    del hot
                doc["tune"].append(row)
                print("case:", name, m, scaling, json.dumps(row.get("layers")), flush=True)
                doc["wall_s"] = round(time.monotonic() - started, 1)
                (out / "moe_fp8_gemv.json").write_text(json.dumps(doc, indent=1) + "\n")
                if not args.cold and not moe_fp8.gemv_wins(row):
                    break
    print_table(doc)
    return 0


def gemm1_floor(row, gpu: str) -> float:
    """GEMM1's DRAM floor in us: the fp8 w1 rows of the experts routed to (expected under uniform routing)
    at ANCHORS section 3's measured copy bandwidth (activations and outputs are under 0.1% of it here)."""
    tbs = moe_fp8.PEAKS.get(moe_fp8.gpu_key(gpu), (0, 0))[1]
    e, top_k = int(row["shape"].split("_")[0][1:]), int(row["shape"].split("_")[1][3:])
    rows_k = int(row["shape"].split("_")[2][1:]) * int(row["shape"].split("_")[3][1:])
    return e * (1 - (1 - top_k / e) ** row["m"]) * rows_k / (tbs * 1e6) if tbs else 0.0


def print_table(doc: dict) -> None:
    anchors = moe_fp8.ANCHORS.get(moe_fp8.gpu_key(doc["gpu"]), {})
    print(f"\n{doc['gpu']}  triton {doc.get('triton', '-')}  torch {doc.get('torch', '-')}  (us"
          + ("; L2 flushed before each call)" if doc.get("cold_l2") else "; no L2 flush)"))
    names = ("gemv", "fp8_auto", "fp8_w8a16_tiled", "fp8_w8a8_files", "shipped_bf16", "previous")
    print(f"{'case':<22}{'M':>4}{'sc':>4}{'engine g1':>10}{'bf16 g1':>9}{'gemv g1':>9}{'floor':>7}{'gemv g2':>9}"
          + "".join(f"{n[:14]:>15}" for n in names) + "  auto's form: best GEMV configs")
    ratios = []
    for r in doc["tune"]:
        if "layers" not in r:
            continue
        engine = anchors.get((r["shape"], r["m"]), (None,))[0]
        b1, b2 = moe_fp8.fastest(r["gemm1"]), moe_fp8.fastest(r["gemm2"])
        if engine:
            ratios.append(engine / b1["us"])
        layers = r["layers"]
        print(f"{r['shape']:<22}{r['m']:>4}{r['scaling'][:2]:>4}{engine or 0:>10.1f}{r.get('bf16_gemm1_us', 0):>9.2f}"
              f"{b1['us']:>9.2f}"
              f"{gemm1_floor(r, doc['gpu']):>7.2f}{b2['us']:>9.2f}"
              + "".join(f"{(layers.get(n) or {}).get('us') or 0:>15.2f}" for n in names)
              + f"  {layers.get('auto_form', '-')}: {b1['config']} | {b2['config']}")
    if ratios:
        print(f"engine (bf16) GEMM1 / GEMV GEMM1 at ANCHORS' token counts: min {min(ratios):.3f}, geomean "
              f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
