"""Block-scaled fp8 GEMMs with one scale per A row and tile against per-column scales (issue 16; RESULTS 47).

    python3 benchmarks/fp8_tile_scales.py --out $OUT [--workers 15] [--only qwen3] [--ms 1024,4096] [--all-counts]
    TRITON_INTERPRET=1 python benchmarks/fp8_tile_scales.py --out /tmp/x --dry-run           # CPU: tiny shapes

With 128 x 128 block scales the fp8 kernel scales each K step's product by the outer product of A's row scales
and the weight rows' scales: an FMUL and an FFMA per accumulator element a step, on the FMA pipe beside the MMAs.
Where a tile's weight rows share one scale group (`kernels.fused_moe_fp8.tile_scales_fit`; GEMM1: its gate half
and its up half), the scale is one number per A row: one FFMA an element (`tile_scales=True`). Per shape of
ANCHORS section 3 and token count (M >= 256 unless --ms), block scheme: GEMM1 (A quantised beforehand) at the
shipped config and every block tile of `moe_fp8.TILES` that fits, GEMM2 (router weight and top-k sum fused, float32
out zeroed) at `moe_fp8.GEMM2_TILES`' fitting tiles and the shipped one; each config in both forms, compiled
first in worker processes, each output checked against its float32 reference (< 1e-2), then timed alternately
per-column, tile, per-column, tile (CUDA graphs of 10 launches, median of 20 replays; the faster of each form's
two). --all-counts: also every other token count of the GPU's shipped block config files, at their shipped
configs only (does the form help or hurt where the layer would use it?). Writes OUT/fp8_tile_scales.json and
prints, per case, the best time of each form and their ratio.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import moe_fp8  # noqa: E402
import moe_fusion  # noqa: E402
from moe_fusion import parse_label  # noqa: E402


def candidates(m, e, top_k, h, inter, device_name, dry, gemm: int, shipped_only: bool = False) -> list:
    """The shipped config of this count (when the GPU has files) and (unless shipped_only) the block tiles of
    the tuning runs, those that fit tile scales, the shipped first."""
    from kernels import fused_moe_fp8 as f8

    n_out = inter if gemm == 1 else h
    labels = ("M16 N64 K64 G1 w4 s1", "M16 N32 K32 G1 w4 s1") if dry else (
        moe_fp8.TILES["block"] if gemm == 1 else moe_fp8.GEMM2_TILES["block"])
    out = [] if shipped_only and not dry else [parse_label(x) for x in labels]
    if device_name and not dry:
        (c1, _), (c2, _) = f8.layer_configs(m, e, inter, top_k, device_name, "block", "w8a8", True)
        out.insert(0, c1 if gemm == 1 else c2)
    return [c for c in dict.fromkeys(out) if f8.tile_scales_fit(c, gemm == 1, n_out, "block")]


def both_forms(run, check, timer) -> dict:
    """Check, then time alternately per-column and tile scales (twice each); the faster of each form's two."""
    errs = {form: check(lambda f=form: run(f)) for form in (False, True)}
    row = {"rel_error_columns": errs[False], "rel_error_tile": errs[True]}
    if max(errs.values()) >= 1e-2:
        return {**row, "status": "wrong"}
    best = moe_fusion.fastest_alternately({form: (lambda f=form: run(f)) for form in (False, True)}, timer)
    cols, tile = best[False], best[True]
    return {**row, "status": "ok", "columns_us": round(cols, 3), "tile_us": round(tile, 3),
            "ratio": round(tile / cols, 4)}


def gemm1_rows(case, configs, timer) -> list[dict]:
    rows = []
    for config in configs:
        runs = {tile: case.fp8_runner(config, tile_scales=tile) for tile in (False, True)}

        def run(tile, r=runs):
            r[tile]()

        def check(fn):
            return moe_fp8._checked(case, fn, case.ref)

        try:
            rows.append({"gemm": 1, "config": config.label(), **both_forms(run, check, timer)})
        except Exception as exc:  # a launch failure is recorded, not fatal
            rows.append({"gemm": 1, "config": config.label(), "status": "failed", "why": f"{exc}"[:300]})
    return rows


def gemm2_rows(e, top_k, h, inter, m, ids, weights, configs, device, timer) -> list[dict]:
    import math

    import torch

    from kernels import fused_moe as fm
    from kernels import fused_moe_fp8 as f8
    from kernels.moe_align import moe_align_triton

    gen = torch.Generator(device=device).manual_seed(7)
    act = torch.randn(m * top_k, inter, device=device, generator=gen).to(torch.bfloat16)
    w2 = (torch.randn(e, h, inter, device=device, generator=gen) / math.sqrt(inter)).to(torch.bfloat16)
    act_q, act_s = f8.quantize_rows(act, "block")
    w2_q, w2_s = f8.quantize_weights(w2, "block")
    rows_ref = fm.fused_moe_gemm_reference(f8.dequantize_rows(act_q, act_s), f8.dequantize_weights(w2_q, w2_s),
                                           ids, 1, weights)
    ref = rows_ref.view(m, top_k, -1).sum(dim=1)
    out = torch.zeros((m, h), dtype=torch.float32, device=device)
    rows = []
    for config in configs:
        align = moe_align_triton(ids, (config["BLOCK_SIZE_M"],), e)[0]

        def run(tile, c=config, a=align):
            out.zero_()
            f8.invoke_fp8_gemm(act_q, act_s, w2_q, w2_s, out, weights, *a, top_k=top_k, config=c, gated=False,
                               scaling="block", tile_scales=tile)

        def check(fn):
            fn()
            return moe_fp8.relative(out, ref)

        try:
            rows.append({"gemm": 2, "config": config.label(), **both_forms(run, check, timer)})
        except Exception as exc:  # a launch failure is recorded, not fatal
            rows.append({"gemm": 2, "config": config.label(), "status": "failed", "why": f"{exc}"[:300]})
    return rows


def quantised_gemm1_row(case, config, timer) -> dict:
    """GEMM1 with its activation quantiser launch before it (as RESULTS 40's "+q" and the layer run it)."""
    runs = {tile: case.fp8_runner(config, with_quant=True, tile_scales=tile) for tile in (False, True)}

    def run(tile):
        runs[tile]()

    def check(fn):
        return moe_fp8._checked(case, fn, case.ref)

    return {"gemm": "1+q", "config": config.label(), **both_forms(run, check, timer)}


def layer_row(e, top_k, h, inter, m, device, timer) -> dict:
    """The fp8 layer (block scales, w8a8, its tuned configs and GEMM2 form) with tile scales off and as shipped."""
    from kernels import fused_moe_fp8 as f8

    hidden, w1, w2, weights, ids = moe_fusion.layer_tensors(e, top_k, h, inter, m, device, seed=1)
    fp8 = f8.Fp8Weights(w1, w2, "block")
    ref = f8.layer_reference(hidden, fp8, weights, ids)
    del w1, w2

    def run(tile):
        return f8.fused_moe_fp8(hidden, fp8, weights, ids, form="w8a8", tile_scales=None if tile else False)

    def check(fn):
        return moe_fp8.relative(fn(), ref)

    # checked at the 1e-2 of every GEMM here, which is the block layer's own tolerance (moe_fp8.LAYER_TOLERANCE)
    return {"gemm": "layer", "config": "tuned files", **both_forms(run, check, timer)}


def main(argv=None) -> int:
    parser = moe_fp8.common_parser(__doc__)
    parser.add_argument("--all-counts", action="store_true", help="every count of the shipped files, shipped configs")
    args = parser.parse_args(argv)
    out, started, device, device_name, shapes = moe_fp8.start(args)
    dry = args.dry_run
    from advisor.measure.timing import versions
    from kernels import fused_moe_fp8 as f8
    from kernels import moe_configs

    plan = []  # (name, e, top_k, h, inter, m, shipped_only)
    for name, e, top_k, h, inter, ms in shapes:
        full = ms if dry else tuple(x for x in ms if x >= 256)
        counts = set(full)
        if args.all_counts and not dry:
            table = moe_configs.cached_config_file(f8.config_path(e, inter, device_name, "block", 1))
            counts |= set(table.configs if table else ())
        for m in moe_fp8.token_counts(args, tuple(sorted(counts))):
            plan.append((name, e, top_k, h, inter, m, m not in full))
    if not dry:
        tasks = {}
        for name, e, top_k, h, inter, m, shipped_only in plan:
            for gemm in (1, 2):
                for config in candidates(m, e, top_k, h, inter, device_name, dry, gemm, shipped_only):
                    for tile in (False, True):
                        tasks[(name, gemm, config, tile)] = (e, top_k, h, inter, m, config, gemm == 1, "block",
                                                             False, True, tile)
        failed = moe_fusion.compile_in_workers(moe_fp8._compile, tasks, args.workers)
        print(f"compiled {len(tasks)} in {time.monotonic() - started:.0f} s; {len(failed)} failed", flush=True)
    timer = moe_fusion._timer(dry)
    cases = []
    for name, e, top_k, h, inter, m, shipped_only in plan:
        case = moe_fp8.Gemm1Case(e, top_k, h, inter, m, device, "block")
        rows = gemm1_rows(case, candidates(m, e, top_k, h, inter, device_name, dry, 1, shipped_only), timer)
        rows += gemm2_rows(e, top_k, h, inter, m, case.ids, case.weights,
                           candidates(m, e, top_k, h, inter, device_name, dry, 2, shipped_only), device, timer)
        if (m >= 1024 or dry) and not shipped_only:
            shipped = candidates(m, e, top_k, h, inter, device_name, dry, 1)[:1]
            rows += [quantised_gemm1_row(case, c, timer) for c in shipped]
            rows.append(layer_row(e, top_k, h, inter, m, device, timer))
        summary = {"case": name, "m": m, "rows": rows}
        for extra in ("1+q", "layer"):
            ok = [r for r in rows if r["gemm"] == extra and r["status"] == "ok"]
            if ok:
                summary[extra] = {"columns_us": ok[0]["columns_us"], "tile_us": ok[0]["tile_us"],
                                  "ratio": ok[0]["ratio"]}
        for gemm in (1, 2):
            ok = [r for r in rows if r["gemm"] == gemm and r["status"] == "ok"]
            if ok:
                summary[f"gemm{gemm}"] = {
                    "shipped": ok[0]["config"] if device_name and not dry else None,
                    "best_columns_us": min(r["columns_us"] for r in ok),
                    "best_tile_us": min(r["tile_us"] for r in ok),
                    "median_ratio": statistics.median(r["ratio"] for r in ok)}
        cases.append(summary)
        print(json.dumps({k: v for k, v in summary.items() if k != "rows"}), flush=True)
        del case
    doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "gpu": device_name or "cpu (interpreter, dry run)",
           **(versions() if not dry else {}), "command": " ".join(sys.argv), "cases": cases}
    (out / "fp8_tile_scales.json").write_text(json.dumps(doc, indent=1))
    print(f"\n{'case':18s} {'M':>5s} | GEMM1 best: columns  tile  ratio | GEMM2 best: columns  tile  ratio")
    for c in cases:
        cells = []
        for gemm in (1, 2):
            g = c.get(f"gemm{gemm}")
            cells.append(f"{g['best_columns_us']:9.1f} {g['best_tile_us']:7.1f} "
                         f"{g['best_tile_us'] / g['best_columns_us']:6.3f}" if g else " " * 24)
        print(f"{c['case']:18s} {c['m']:5d} | {cells[0]}        | {cells[1]}")
    for c in cases:
        for extra in ("1+q", "layer"):
            if extra in c:
                g = c[extra]
                print(f"{c['case']:18s} {c['m']:5d} {extra:6s} (shipped config): columns {g['columns_us']:9.1f} "
                      f"tile {g['tile_us']:9.1f} ratio {g['ratio']:.3f}")
    print(f"{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
