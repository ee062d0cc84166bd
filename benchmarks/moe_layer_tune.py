"""The fused-MoE layer's align step and GEMM2 (issue 16): the parts timed alone, GEMM2 tuned in both of
its forms, and the whole layer, previous against new.

    python benchmarks/moe_layer_tune.py --out $OUT [--workers 15] [--deadline 400]
    python benchmarks/moe_layer_tune.py --out $OUT --confirm 5   # the layer as shipped against the previous, 5 rounds
    python benchmarks/moe_layer_tune.py --write-from benchmarks/data/h100_moe_layer_tune.json   # CPU
    TRITON_INTERPRET=1 python benchmarks/moe_layer_tune.py --dry-run --out /tmp/x   # CPU: tiny shapes

Cases: `moe_fusion`'s shapes (ANCHORS section 3) at the token counts of the previous kernel's shipped
file for this GPU, largest first; uniform random top-k routing, random bf16 data (seeded).
1. Align: `kernels.moe_align.moe_align_triton` checked equal, element for element, to the torch
   `moe_align_block_size` (uniform and hot-expert routing, both GEMMs' M blocks), and both timed.
2. GEMM2 tuned in both forms: "gemm2" = the previous kernel's GEMM2 storing [M, top_k, H] bf16 then
   one torch sum; "gemm2_sum" = router weight and top-k sum fused (float32 atomics into a zeroed [M, H],
   then the bf16 cast). Each form is timed with its sum, so the two compare. Per (shape, M), a sample
   (`moe_fusion_tune.sample_configs`, anchored on the previous kernel's tuned config), all compiled
   first in parallel worker processes, each output poisoned and checked against the float32 reference.
3. Parts of the new layer alone: align (torch, Triton), GEMM1 (SiLU-and-mul fused, interleaved w1) at
   its tuned file's config, GEMM2 + sum at the previous config and at the tuned one, per form.
4. The layer: `kernels.fused_moe.fused_moe` at its shipped config (both GEMMs) against `fused_moe_fused`
   (LAYER_VARIANTS: torch or Triton align, GEMM2 at the previous or the tuned config, sum fused or not,
   GEMM1 persistent), each checked against the float32 layer and again under a hot-expert routing.
Timing: CUDA graph of 10 launches after 3 warm-ups, median of 20 replays, no L2 flush. Writes
OUT/moe_layer_tune.json after each step and prints a short table last. --write-from writes the tuned
GEMM2 files (engine format, with `.meta` side files) to kernels/configs/fused/gemm2{,_sum}/.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import moe_fusion  # noqa: E402
import moe_fusion_tune  # noqa: E402

from kernels.moe_bench import MoEGemmSpec  # noqa: E402

FORMS = {"gemm2": ("previous", False), "gemm2_sum": ("fused", True)}  # form -> (moe_bench variant, fuse_sum)
# name -> (align, GEMM2 config "previous" or "tuned", fuse_sum, GEMM1 persistent)
LAYER_VARIANTS = {
    "torch-align/prev2": ("torch", "previous", False, False),
    "torch-align/prev2+sum": ("torch", "previous", True, False),
    "triton-align/prev2": ("triton", "previous", False, False),
    "triton-align/prev2+sum": ("triton", "previous", True, False),
    "torch-align/tuned2": ("torch", "tuned", False, False),
    "triton-align/tuned2": ("triton", "tuned", False, False),
    "triton-align/tuned2+sum": ("triton", "tuned", True, False),
    "triton-align/tuned2/persistent1": ("triton", "tuned", False, True),
}


def gemm2_spec(shape, m: int, dry: bool) -> MoEGemmSpec:
    name, e, top_k, h, inter, _ = shape
    return MoEGemmSpec(e, top_k, inter, h, m, gemm=2, b_tma=False if dry else None)


def gemm2_runner(case, config, form: str):
    """GEMM2 with its sum, as the layer runs it; returns (run, output buffer holder, reference [M, H])."""
    import torch

    variant, fused = FORMS[form]
    spec = case.spec
    ref = case.reference.view(spec.m, spec.top_k, spec.n).sum(dim=1)
    run_gemm = case.variant_runner(config, variant)
    holder = {}
    if fused:
        out, _ = case.variant_output(variant)

        def run():
            run_gemm()
            holder["out"] = out.to(torch.bfloat16)
    else:
        def run():
            run_gemm()
            holder["out"] = case.out.view(spec.m, spec.top_k, spec.n).sum(dim=1)
    return run, holder, ref


def tune_gemm2(shape, m, table, per_case, device, dry, failed, deadline) -> list[dict]:
    from advisor.measure.timing import check_output
    from kernels.moe_bench import MoEGemmCase

    timer = moe_fusion._timer(dry)
    spec = gemm2_spec(shape, m, dry)
    configs = moe_fusion_tune.sample_configs(m, shape[1], shape[2], table, per_case, dry=dry)
    case = MoEGemmCase(spec, device=device)
    rows = []
    for form, (variant, _) in FORMS.items():
        for i, config in enumerate(configs):
            row = {"case": shape[0], "m": m, "form": form, "config": config.label(), "anchor": i == 0}
            why = failed.get((spec.shape_label, config, variant))
            if why or (time.monotonic() > deadline and i > 0):
                rows.append({**row, "status": "compile failed" if why else "deadline", "why": why or ""})
                continue
            try:
                run, holder, ref = gemm2_runner(case, config, form)
                case.out.fill_(float("nan"))
                run()
                err = check_output(holder["out"].float(), ref, 1e-2, f"{form} {config.label()}")
                rows.append({**row, "status": "ok", "us": round(timer(run), 2), "rel_error": err})
            except Exception as exc:  # a wrong result or a launch failure is a result
                rows.append({**row, "status": "failed", "why": f"{type(exc).__name__}: {exc}"[:300]})
            print("gemm2:", json.dumps(rows[-1]), flush=True)
    return rows


def best_gemm2(rows, case_name, m) -> dict[str, dict]:
    best = {}
    for r in rows:
        if (r["case"] == case_name and r["m"] == m and r["status"] == "ok"
                and (r["form"] not in best or r["us"] < best[r["form"]]["us"])):
                best[r["form"]] = r
    return best


def parts(shape, m, shipped, cfg1, best2, device, dry) -> dict:
    """Align (torch, Triton; checked equal), GEMM1 fused-il at cfg1, GEMM2 + sum rows already timed."""
    import torch

    from advisor.measure.timing import check_output
    from kernels import fused_moe as fm
    from kernels.moe_align import moe_align_triton
    from kernels.moe_bench import MoEGemmCase

    name, e, top_k, h, inter, _ = shape
    timer = moe_fusion._timer(dry)
    tensors = moe_fusion.layer_tensors(e, top_k, h, inter, m, device, seed=1)
    hot = moe_fusion.layer_tensors(e, top_k, h, inter, m, device, seed=2, hot=2)
    bms = sorted({shipped["BLOCK_SIZE_M"], cfg1["BLOCK_SIZE_M"]}
                 | {moe_fusion.parse_label(r["config"])["BLOCK_SIZE_M"] for r in best2.values()})
    equal = True
    for ids in (tensors[4], hot[4]):
        for pair in [(b,) for b in bms] + [(a, b) for a in bms for b in bms if a < b]:
            for bm, got in zip(pair, moe_align_triton(ids, pair, e), strict=True):
                equal &= all(torch.equal(x, y) for x, y in zip(got, fm.moe_align_block_size(ids, bm, e), strict=True))
    ids = tensors[4]
    bm1 = cfg1["BLOCK_SIZE_M"]
    bm2 = moe_fusion.parse_label(best2["gemm2"]["config"])["BLOCK_SIZE_M"] if "gemm2" in best2 else bm1
    out = {"case": name, "m": m, "align_equal": equal, "block_ms": bms,
           "align_torch_us": round(timer(lambda: fm.moe_align_block_size(ids, shipped["BLOCK_SIZE_M"], e)), 2),
           "align_torch_two_us": round(timer(lambda: (fm.moe_align_block_size(ids, bm1, e),
                                                      fm.moe_align_block_size(ids, bm2, e))), 2),
           "align_triton_us": round(timer(lambda: moe_align_triton(ids, (bm1,), e)), 2),
           "align_triton_two_us": round(timer(lambda: moe_align_triton(ids, (bm1, bm2), e)), 2),
           "gemm2_bms": [bm1, bm2]}
    spec1 = MoEGemmSpec(e, top_k, h, 2 * inter, m, gemm=1, b_tma=False if dry else None)
    case = MoEGemmCase(spec1, device=device)
    for label, variant, cfg in (("gemm1_previous", "previous", shipped), ("gemm1_fused_il", "fused-il", cfg1)):
        buf, ref = case.variant_output(variant)
        run = case.variant_runner(cfg, variant)
        buf.fill_(float("nan"))
        run()
        out[label + "_rel_error"] = check_output(buf.float(), ref, 1e-2, label)
        out[label + "_us"] = round(timer(run), 2)
    out["gemm1_config"] = cfg1.label()
    print("parts:", json.dumps(out), flush=True)
    return out


def layer(shape, m, shipped, cfg1, best2, device, dry) -> dict:
    from advisor.measure.timing import relative_error
    from kernels import fused_moe as fm
    from kernels.fused_moe_fused import fused_moe_fused, interleave_gate_up

    name, e, top_k, h, inter, _ = shape
    timer = moe_fusion._timer(dry)
    result = {"case": name, "m": m, "previous_config": shipped.label(), "gemm1_config": cfg1.label(),
              "gemm2_tuned": {f: r["config"] for f, r in best2.items()}, "runs": {}}
    checks = {}
    for routing in ("uniform", "hot"):
        tensors = moe_fusion.layer_tensors(e, top_k, h, inter, m, device, seed=1 if routing == "uniform" else 2,
                                           hot=0 if routing == "uniform" else 2)
        w1_il = interleave_gate_up(tensors[1])
        ref = fm.fused_moe_reference(*tensors)
        fns = {"previous": lambda t=tensors: fm.fused_moe(*t, config=shipped, config2=shipped)}
        for variant, (align, g2, fsum, pers) in LAYER_VARIANTS.items():
            form = "gemm2_sum" if fsum else "gemm2"
            cfg2 = shipped if g2 == "previous" else moe_fusion.parse_label(best2.get(form, {}).get("config",
                                                                                           shipped.label()))
            fns[variant] = (lambda t=tensors, w=w1_il, c2=cfg2, a=align, s=fsum, p=pers: fused_moe_fused(
                t[0], w, *t[2:], config=cfg1, config2=c2, fuse_act=True, fuse_sum=s, persistent=p,
                w1_interleaved=True, align=a))
        for variant, fn in fns.items():
            err = relative_error(fn().float(), ref)
            checks.setdefault(variant, {})[routing] = err
            if routing == "uniform":
                result["runs"][variant] = {"rel_error": err, "us": round(timer(fn), 2) if err < 1e-2 else None}
    result["hot_rel_error"] = {v: c["hot"] for v, c in checks.items()}
    runs = result["runs"]
    new = {v: r["us"] for v, r in runs.items() if v != "previous" and r["us"]}
    if runs["previous"]["us"] and new:
        best = min(new, key=new.get)
        result["best"] = {"variant": best, "us": new[best], "speedup": round(runs["previous"]["us"] / new[best], 3)}
    print("layer:", json.dumps(result), flush=True)
    return result


def confirm(shape, m, shipped, device, repeats: int) -> dict:
    """The previous layer against `fused_moe_fused` as it ships (no config given: GEMM1 and GEMM2 from the
    tuned files, the sum fused or not as their side files measured faster), with and without the
    persistent GEMM1, timed `repeats` times in turn; checked on uniform and hot-expert routing."""
    import statistics

    import torch

    from advisor.measure.timing import relative_error
    from kernels import fused_moe as fm
    from kernels.fused_moe_fused import choose_fuse_sum, fused_moe_fused, interleave_gate_up, layer_configs

    name, e, top_k, h, inter, _ = shape
    timer = moe_fusion._timer(False)
    device_name = torch.cuda.get_device_name()
    fuse_sum = choose_fuse_sum(m, e, inter, device_name)
    (c1, src1), (c2, src2) = layer_configs(m, e, inter, top_k, device_name, fuse_sum=fuse_sum)
    result = {"case": name, "m": m, "fuse_sum": fuse_sum, "gemm1": c1.label(), "gemm1_from": src1,
              "gemm2": c2.label(), "gemm2_from": src2, "rel_error": {}, "us": {}}
    for routing in ("uniform", "hot"):
        t = moe_fusion.layer_tensors(e, top_k, h, inter, m, device, seed=1 if routing == "uniform" else 2,
                                     hot=0 if routing == "uniform" else 2)
        w1_il = interleave_gate_up(t[1])
        ref = fm.fused_moe_reference(*t)
        fns = {"previous": lambda t=t: fm.fused_moe(*t, config=shipped, config2=shipped),
               "new": lambda t=t, w=w1_il: fused_moe_fused(t[0], w, *t[2:], w1_interleaved=True),
               "new+persistent1": lambda t=t, w=w1_il: fused_moe_fused(t[0], w, *t[2:], w1_interleaved=True,
                                                                       persistent=True)}
        for v, fn in fns.items():
            result["rel_error"].setdefault(v, {})[routing] = relative_error(fn().float(), ref)
        if routing == "uniform":
            samples = {v: [] for v in fns}
            for _ in range(repeats):
                for v, fn in fns.items():
                    samples[v].append(round(timer(fn), 2))
            result["samples"] = samples
            result["us"] = {v: statistics.median(xs) for v, xs in samples.items()}
    print("confirm:", json.dumps(result), flush=True)
    return result


def write_from(run_json: Path, folder: Path | None = None) -> list[str]:
    """GEMM2's tuned files per form from a run's JSON into kernels/configs/fused/gemm2{,_sum}/ (or
    `folder`/<form>): the fastest checked config per (shape, M), its time and how many were compared."""
    from kernels.fused_moe_fused import GEMM2_FOLDERS, gemm2_dir
    from kernels.moe_configs import ConfigMeta, ConfigTable, MeasuredEntry, config_file_name, write_config_file

    doc = json.loads(run_json.read_text())
    shapes = {s[0]: s for s in moe_fusion.shapes(doc.get("dry", False))}
    written = []
    for fused, sub in GEMM2_FOLDERS.items():
        for name, shape in shapes.items():
            entries = {}
            for m in sorted({r["m"] for r in doc["gemm2"] if r["case"] == name}):
                ok = [r for r in doc["gemm2"] if r["case"] == name and r["m"] == m and r["form"] == sub
                      and r["status"] == "ok"]
                if ok:
                    best = min(ok, key=lambda r: r["us"])
                    entries[m] = MeasuredEntry(moe_fusion.parse_label(best["config"]), best["us"], len(ok))
            if not entries:
                continue
            meta = ConfigMeta(doc["gpu"], doc.get("triton"), entries,
                              f"benchmarks/moe_layer_tune.py: GEMM2 ({sub}) timed with its top-k sum, "
                              "CUDA graph median")
            target = (folder / sub) if folder else gemm2_dir(fused)
            target.mkdir(parents=True, exist_ok=True)
            path = target / config_file_name(shape[1], shape[4], doc["gpu"])
            write_config_file(path, ConfigTable({m: en.config for m, en in entries.items()}), meta)
            written.append(str(path))
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU interpreter")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--per-case", type=int, default=24, help="GEMM2 configs sampled per form at M >= 1024")
    parser.add_argument("--per-case-small", type=int, default=12, help="the same at M < 1024")
    parser.add_argument("--large-ms", default="1024,4096", help="token counts tuned and compared first")
    parser.add_argument("--deadline", type=float, default=1e9, help="seconds; later steps are then skipped")
    parser.add_argument("--confirm", type=int, metavar="REPEATS",
                        help="only the previous layer against fused_moe_fused as shipped, at --large-ms, "
                             "timed REPEATS times in turn")
    parser.add_argument("--write-from", metavar="JSON", help="no timing: write the GEMM2 files from a run's JSON")
    args = parser.parse_args(argv)
    if args.write_from:
        for path in write_from(Path(args.write_from)):
            print("wrote", path)
        return 0
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    import torch

    from advisor.measure.timing import versions
    from kernels.fused_moe_fused import layer_configs

    started = time.monotonic()
    deadline = started + args.deadline
    dry = args.dry_run
    device = moe_fusion.target_device(dry)
    device_name = "cpu-interpreter" if dry else torch.cuda.get_device_name()
    large = {int(x) for x in args.large_ms.split(",") if x}
    cases, tables = [], {}
    for shape in moe_fusion.shapes(dry):
        table = moe_fusion_tune.shipped_tables(shape, None if dry else device_name)
        ms = tuple(sorted(table)) if table else shape[5]
        cases.append((*shape[:5], ms))
        tables[shape[0]] = table
    # Large M first (the target), then the rest; each step's results saved as it ends.
    phases = [[(s, m) for s in cases for m in s[5] if (m in large) != small] for small in (False, True)]
    if dry:
        phases = [[(s, m) for s in cases for m in s[5]], []]
    doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "gpu": device_name, **({} if dry else versions()),
           "dry": dry, "command": " ".join(sys.argv), "gemm2": [], "parts": [], "layers": []}

    def save():
        doc["wall_s"] = round(time.monotonic() - started, 1)
        (out_dir / "moe_layer_tune.json").write_text(json.dumps(doc, indent=1) + "\n")

    def shipped_cfg(shape, m):
        return moe_fusion_tune.sample_configs(m, shape[1], shape[2], tables[shape[0]], 1, dry=dry)[0]

    if args.confirm:
        doc["confirm"] = [confirm(s, m, shipped_cfg(s, m), device, args.confirm) for s, m in phases[0]]
        save()
        for c in doc["confirm"]:
            us = c["us"]
            print(f"{c['case']:<22}{c['m']:>6} previous={us['previous']} new={us['new']} "
                  f"x{us['previous'] / us['new']:.3f} new+persistent1={us['new+persistent1']} "
                  f"x{us['previous'] / us['new+persistent1']:.3f} sum fused={c['fuse_sum']} "
                  f"worst err {max(max(r.values()) for r in c['rel_error'].values()):.1e} {c['gemm2_from'][-60:]}")
        return 0

    for phase_no, phase in enumerate(phases):
        if not phase or time.monotonic() > deadline:
            continue
        per_case = 4 if dry else (args.per_case if phase_no == 0 else args.per_case_small)
        failed = {}
        cfg1 = {(s[0], m): (layer_configs(m, s[1], s[4], s[2], None if dry else device_name)[0][0]
                            if not dry else shipped_cfg(s, m)) for s, m in phase}
        if not dry:
            tasks = []
            for s, m in phase:
                spec2 = gemm2_spec(s, m, dry)
                for c in moe_fusion_tune.sample_configs(m, s[1], s[2], tables[s[0]], per_case):
                    tasks += [(spec2, c, v) for v, _ in FORMS.values()]
                spec1 = MoEGemmSpec(s[1], s[2], s[3], 2 * s[4], m, gemm=1)
                tasks += [(spec1, cfg1[(s[0], m)], v) for v in ("fused-il", "fused-il-persistent")]
                tasks.append((spec1, shipped_cfg(s, m), "previous"))
            failed = moe_fusion.compile_all(tasks, args.workers)
            print(f"phase {phase_no}: compiled {len(tasks)} in {time.monotonic() - started:.0f} s; "
                  f"{len(failed)} failed", flush=True)
        for s, m in phase:
            doc["gemm2"] += tune_gemm2(s, m, tables[s[0]], per_case, device, dry, failed, deadline)
        save()
        for s, m in phase:
            if time.monotonic() > deadline:
                break
            best2 = best_gemm2(doc["gemm2"], s[0], m)
            doc["parts"].append(parts(s, m, shipped_cfg(s, m), cfg1[(s[0], m)], best2, device, dry))
            doc["layers"].append(layer(s, m, shipped_cfg(s, m), cfg1[(s[0], m)], best2, device, dry))
            save()
    save()
    print_table(doc)
    return 0


def print_table(doc: dict) -> None:
    print(f"\n{doc['gpu']}  triton {doc.get('triton', '-')}  torch {doc.get('torch', '-')}  {doc['wall_s']} s")
    print(f"{'case':<22}{'M':>6}{'align t/T':>16}{'G1':>9}" + "".join(f"{f + ' prev/tuned':>24}" for f in FORMS))
    for p in doc["parts"]:
        cells = []
        for form in FORMS:
            rows = [r for r in doc["gemm2"] if r["case"] == p["case"] and r["m"] == p["m"] and r["form"] == form
                    and r["status"] == "ok"]
            prev = next((r["us"] for r in rows if r["anchor"]), None)
            best = min((r["us"] for r in rows), default=None)
            cells.append(f"{prev or '-'}/{best or '-'}")
        print(f"{p['case']:<22}{p['m']:>6}{p['align_torch_us']:>8}/{p['align_triton_us']:<7}"
              f"{p['gemm1_fused_il_us']:>9}" + "".join(f"{c:>24}" for c in cells)
              + ("" if p["align_equal"] else "  ALIGN DIFFERS"))
    for lay in doc["layers"]:
        b = lay.get("best", {})
        worst = max(lay["hot_rel_error"].values())
        print(f"layer {lay['case']:<22}{lay['m']:>6} previous={lay['runs']['previous']['us']} "
              f"best={b.get('us')} ({b.get('variant')}) x{b.get('speedup')}  hot worst err {worst:.1e}")


if __name__ == "__main__":
    raise SystemExit(main())
