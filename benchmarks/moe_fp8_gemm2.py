"""The fp8 layer's GEMM2 in its two forms: the top-k sum by float32 atomics, or weighted rows stored and summed.

    python3 benchmarks/moe_fp8_gemm2.py --out $OUT [--workers 15] [--deadline 420] [--only qwen3] [--ms 1024,4096]
    python benchmarks/moe_fp8_gemm2.py --write-from benchmarks/data/h100_moe_fp8_gemm2.json   # config files
    TRITON_INTERPRET=1 python benchmarks/moe_fp8_gemm2.py --dry-run --out /tmp/x                # CPU: tiny shapes

The bf16 layer measured the stored-rows form of GEMM2 faster than the atomics at every ANCHORS-3 shape and
M >= 1024 (RESULTS 20: 0-17%; float32 atomics into [M, H] move twice the bytes of bf16 stores and need the
output zeroed and cast), while the fp8 layer had only the atomics. Per shape, scaling scheme and the engines'
token counts: each of `moe_fp8`'s GEMM2 candidate tiles in both forms, each timed as the layer runs it
(atomics: zero the float32 [M, H], GEMM2, cast to bf16; stores: GEMM2 into [M * top_k, H] bf16, one torch
sum), each output checked against the float32 reference over the values the fp8 operands stand for
(relative error < 1e-2). Random bf16 activation quantised as the layer quantises it; uniform random top-k
routing (seeded). Then (--layer-ms, default 1024 and 4096) the whole fp8 layer with GEMM1 from the shipped
files and GEMM2 at the run's best config of each form, checked against `layer_reference`. CUDA graphs of 10
launches after 3 warm-ups, median of 20 replays, no L2 flush. Writes OUT/moe_fp8_gemm2.json and prints a short
table last; `--write-from` writes both GEMM2 folders' files (`kernels/configs/fp8/<scheme>/gemm2[_stores]/`)
with the measured times in their side files, so `kernels.fused_moe_fp8.choose_fuse_sum` compares like with like.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import moe_fp8  # noqa: E402
import moe_fusion  # noqa: E402
from moe_fusion import parse_label  # noqa: E402

FORMS = {True: "atomics", False: "stores"}


class Gemm2Case:
    """One (shape, M, scheme): routing, a quantised random activation, fp8 w2 and the float32 reference."""

    def __init__(self, e, top_k, h, inter, m, device, scaling, seed=0):
        import math

        import torch

        from kernels import fused_moe as fm
        from kernels import fused_moe_fp8 as f8

        _, _, _, weights, self.ids = moe_fusion.layer_tensors(e, top_k, 64, 1, m, device, seed)
        self.weights = weights.float()
        gen = torch.Generator(device=device).manual_seed(seed + 7)
        act = torch.randn(m * top_k, inter, device=device, generator=gen).to(torch.bfloat16)
        w2 = (torch.randn(e, h, inter, device=device, generator=gen) / math.sqrt(inter)).to(torch.bfloat16)
        self.act_q, self.act_s = f8.quantize_rows(act, scaling)
        self.w2_q, self.w2_s = f8.quantize_weights(w2, scaling)
        rows = fm.fused_moe_gemm_reference(f8.dequantize_rows(self.act_q, self.act_s),
                                           f8.dequantize_weights(self.w2_q, self.w2_s), self.ids, 1, self.weights)
        self.ref = rows.view(m, top_k, -1).sum(dim=1)
        self.e, self.top_k, self.h, self.m, self.scaling = e, top_k, h, m, scaling
        self.acc = torch.zeros((m, h), dtype=torch.float32, device=device)
        self.rows = torch.empty((m * top_k, h), dtype=torch.bfloat16, device=device)

    def runner(self, config, fuse_sum: bool):
        """GEMM2 as the layer runs it in that form, returning the [M, H] bf16 result."""
        from kernels import fused_moe_fp8 as f8
        from kernels.moe_align import moe_align_triton

        align = moe_align_triton(self.ids, (config["BLOCK_SIZE_M"],), self.e)[0]
        args = (self.act_q, self.act_s, self.w2_q, self.w2_s)
        kw = {"top_k": self.top_k, "config": config, "gated": False, "scaling": self.scaling}
        if fuse_sum:
            def run():
                self.acc.zero_()
                f8.invoke_fp8_gemm(*args, self.acc, self.weights, *align, **kw)
                return self.acc.to(self.rows.dtype)
        else:
            def run():
                f8.invoke_fp8_gemm(*args, self.rows, self.weights, *align, **kw, sum_topk=False)
                return self.rows.view(self.m, self.top_k, self.h).sum(dim=1)
        return run


def time_forms(case, configs, failed, lab, deadline, timer) -> dict:
    """{form: rows} of every config in both forms, checked then timed."""
    out = {}
    for fuse_sum, form in FORMS.items():
        rows = out[form] = []
        for config in configs:
            row = {"config": config.label()}
            why = failed.get((lab, config, False, case.scaling, False, fuse_sum))
            if why or time.monotonic() > deadline:
                rows.append({**row, "status": "compile failed" if why else "deadline", "why": why or ""})
                continue
            try:
                run = case.runner(config, fuse_sum)
                case.rows.fill_(float("nan"))
                err = moe_fp8.relative(run(), case.ref)
                rows.append({**row, "status": "ok", "rel_error": err, "us": round(timer(run), 2)} if err < 1e-2
                            else {**row, "status": "wrong", "rel_error": err})
            except Exception as exc:  # a launch failure is recorded, not fatal
                rows.append({**row, "status": "failed", "why": f"{type(exc).__name__}: {exc}"[:300]})
    return out


def run_layer(shape, m, scaling, best: dict, device, device_name, timer) -> dict:
    """The fp8 layer, GEMM1 from the shipped files, GEMM2 at this run's best config of each form."""
    from kernels import fused_moe_fp8 as f8

    name, e, top_k, h, inter, _ = shape
    hidden, w1, w2, weights, ids = moe_fusion.layer_tensors(e, top_k, h, inter, m, device, seed=1)
    fp8 = f8.Fp8Weights(w1, w2, scaling)
    (c1, _), _ = f8.layer_configs(m, e, inter, top_k, device_name, scaling)
    ref = f8.layer_reference(hidden, fp8, weights, ids)
    result = {"case": name, "m": m, "scaling": scaling, "gemm1": c1.label(), "runs": {}}
    for form, config2 in best.items():
        def fn(c2=config2, fused=form == "atomics"):
            return f8.fused_moe_fp8(hidden, fp8, weights, ids, c1, c2, form="w8a8", fuse_sum=fused)
        err = moe_fp8.relative(fn(), ref)
        ok = err < moe_fp8.LAYER_TOLERANCE[scaling]
        result["runs"][form] = {"gemm2": config2.label(), "rel_error": err, "us": round(timer(fn), 2) if ok else None}
    return result


def write_from(path: Path) -> int:
    from kernels import fused_moe_fp8 as f8
    from kernels import moe_configs

    doc = json.loads(path.read_text())
    tables: dict = {}
    for r in doc["tune"]:
        for fuse_sum, form in FORMS.items():
            rows = r.get("forms", {}).get(form, [])
            best = moe_fp8.fastest(rows)
            if best:
                compared = sum(x["status"] == "ok" for x in rows)
                tables.setdefault((r["e"], r["inter"], r["scaling"], fuse_sum), {})[r["m"]] = moe_configs.MeasuredEntry(
                    parse_label(best["config"]), best["us"], compared)
    source = {True: "benchmarks/moe_fp8_gemm2.py: fp8 GEMM2, router weight and top-k sum fused by float32 atomics, "
                    "timed with its output zeroed and cast to bf16, CUDA graph median",
              False: "benchmarks/moe_fp8_gemm2.py: fp8 GEMM2, router weight fused, weighted rows stored in bf16, "
                     "timed with the torch top-k sum after it, CUDA graph median"}
    for (e, inter, scaling, fuse_sum), measured in sorted(tables.items()):
        target = f8.config_path(e, inter, doc["gpu"], scaling, 2, "w8a8", fuse_sum)
        table = moe_configs.ConfigTable({m: entry.config for m, entry in measured.items()})
        moe_configs.write_config_file(target, table, moe_configs.ConfigMeta(doc["gpu"], doc.get("triton"), measured,
                                                                            source[fuse_sum]))
        print("wrote", target)
    return 0


def main(argv=None) -> int:
    parser = moe_fp8.common_parser(__doc__)
    parser.add_argument("--layer-ms", default="1024,4096", help="token counts to time the whole layer at")
    parser.add_argument("--write-from", type=Path, help="a run's JSON: write both GEMM2 folders' config files")
    parser.add_argument("--scalings", default=",".join(moe_fp8.SCALINGS), help="comma-separated schemes to run")
    args = parser.parse_args(argv)
    moe_fp8.choose_scalings(parser, args.scalings)  # the cases below read moe_fp8.SCALINGS
    if args.write_from:
        return write_from(args.write_from)
    out, started, device, device_name, shapes = moe_fp8.start(args)
    dry = args.dry_run
    from advisor.measure.timing import versions
    from kernels.moe_configs import ENGINE_M_KEYS

    ms = moe_fp8.token_counts(args, (37,) if dry else ENGINE_M_KEYS)
    layer_ms = {int(x) for x in args.layer_ms.split(",") if x} if not dry else {37}
    cases = [(s, m, sc) for s in shapes for sc in moe_fp8.SCALINGS for m in ms]
    failed = {}
    if not dry:
        tasks = {(s[1], s[2], s[3], s[4], m, c, False, sc, False, fused) for s, m, sc in cases
                 for c in moe_fp8.case_configs(m, s[1], s[2], dry, sc, gemm=2) for fused in FORMS}
        tasks = list({(t[:4], t[5:]): t for t in tasks}.values())  # the token count only sizes the grid
        failed = moe_fp8.compile_all(tasks, args.workers)
        print(f"compiled {len(tasks)} in {time.monotonic() - started:.0f} s; {len(failed)} failed", flush=True)
    timer = moe_fusion._timer(dry)
    doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "gpu": device_name or "cpu (interpreter, dry run)",
           **(versions() if not dry else {}), "command": " ".join(sys.argv), "tune": [], "layers": []}
    deadline = started + args.deadline
    for shape, m, scaling in cases:
        name, e, top_k, h, inter, _ = shape
        lab = moe_fp8.label(e, top_k, h, inter)
        row = {"case": name, "shape": lab, "e": e, "inter": inter, "m": m, "scaling": scaling}
        if time.monotonic() > deadline:
            doc["tune"].append({**row, "status": "deadline"})
            continue
        case = Gemm2Case(e, top_k, h, inter, m, device, scaling)
        row["forms"] = time_forms(case, moe_fp8.case_configs(m, e, top_k, dry, scaling, gemm=2), failed, lab,
                                  deadline, timer)
        doc["tune"].append(row)
        del case
        best = {form: parse_label(b["config"]) for form, rows in row["forms"].items() if (b := moe_fp8.fastest(rows))}
        if m in layer_ms and len(best) == 2 and time.monotonic() < deadline:
            doc["layers"].append(run_layer(shape, m, scaling, best, device, device_name, timer))
        print(json.dumps({k: row[k] for k in ("case", "m", "scaling")}
                         | {f: (moe_fp8.fastest(r) or {}).get("us") for f, r in row["forms"].items()}), flush=True)
    doc["wall_s"] = round(time.monotonic() - started, 1)
    (out / "moe_fp8_gemm2.json").write_text(json.dumps(doc, indent=1) + "\n")
    print_table(doc)
    return 0


def print_table(doc: dict) -> None:
    print(f"\nfp8 GEMM2 forms, {doc['gpu']} (us; best config of each form, with its zeroing and cast or its sum)")
    print("| case | scheme | M | atomics | stores | atomics / stores |")
    print("|---|---|---|---|---|---|")
    for r in doc["tune"]:
        t = {f: (moe_fp8.fastest(rows) or {}).get("us") for f, rows in r.get("forms", {}).items()}
        if t.get("atomics") and t.get("stores"):
            print(f"| {r['case']} | {r['scaling']} | {r['m']} | {t['atomics']} | {t['stores']} | "
                  f"{t['atomics'] / t['stores']:.3f} |")
    print("\nlayer (GEMM1 from the shipped files)\n| case | scheme | M | atomics | stores | atomics / stores |")
    print("|---|---|---|---|---|---|")
    for r in doc["layers"]:
        a, s = (r["runs"].get(f, {}).get("us") for f in ("atomics", "stores"))
        print(f"| {r['case']} | {r['scaling']} | {r['m']} | {a} | {s} | {a / s:.3f} |" if a and s else
              f"| {r['case']} | {r['scaling']} | {r['m']} | {a} | {s} | - |")


if __name__ == "__main__":
    sys.exit(main())
