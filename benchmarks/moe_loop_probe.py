"""Microbenchmarks for `advisor diagnose`'s loop causes (issue 16), on a GPU: the fused-MoE GEMM's K loop
fed from L2, and DRAM reads in the weight slabs' access pattern.

    python benchmarks/moe_loop_probe.py --out $OUT [--workers 15] [--deadline 200]
    TRITON_INTERPRET=1 python benchmarks/moe_loop_probe.py --dry-run --out /tmp/x   # CPU: tiny, same code

1. **Loop probe.** For every loop shape (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) the measured
   GEMM1 data of benchmarks/data/ hold, the shipped kernel (`kernels/fused_moe.py`, GEMM1, weights
   through TMA as in the sweeps) runs a synthetic launch that no sweep row has: one expert, top-1, M =
   BLOCK_M x 11 x c tokens and N = BLOCK_N x 12, where c is the CTAs one SM holds for this config (from
   the compiled kernel's registers and shared memory): 132 x c CTAs with real rows, one wave, no padding
   rows (the align's one spare M block of CTAs only exits). A, W and C together stay under ~41 MB, so
   graph replays serve the operands from L2. Each config runs at K = 512 and K = 2048 (same compiled
   kernel: both multiples of every BLOCK_K and of 16): the difference over the difference in K steps is
   the time of one K step of c co-resident CTAs (the loop's achievable rate fed from L2: MMA issue,
   waits, barriers, operand loads); the intercept minus nothing is the per-CTA fixed cost plus the
   launch (index loads, pipeline fill, drain, epilogue, exit). The K = 2048 output is checked against
   the float32 reference (relative error < 1e-2).
2. **DRAM slab probe.** A 1 GiB bf16 matrix [R, 4096] read by CTAs of 64 rows walking K in steps of
   BLOCK_K (64, 128, 256: row segments of 128, 256, 512 bytes 8 KB apart, as a weight slab's K steps
   are), against the same bytes read as contiguous 64 x 64 tiles.
Timing: CUDA graph of 2 launches after 1 warm-up, median of 20 replays, no L2 flush (the sweeps' rule).
Writes OUT/moe_loop_probe.json and prints a short table last.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from moe_fusion import _timer  # noqa: E402

from ceilings.launch import Config  # noqa: E402
from kernels.moe_bench import MoEGemmSpec  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
K_STEPS = (512, 2048)
SMS = 132
M_BLOCKS, N_BLOCKS = 11, 12   # 132 = 11 x 12 CTAs per CTA slot of an SM


def loop_shapes() -> list[tuple[int, int, int, int, int]]:
    """Every (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages) of a timed GEMM1 row in benchmarks/data/."""
    shapes = set()
    for path in sorted(DATA.glob("h*_moe_*.csv.gz")):
        if "kernel_v1" in path.name:
            continue
        with gzip.open(path, "rt") as fh:
            for r in csv.DictReader(fh):
                if r["status"] == "ok" and r["gemm"] == "1":
                    shapes.add(tuple(int(r[k]) for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K",
                                                         "num_warps", "num_stages")))
    for path in sorted(DATA.glob("h*_moe_fusion_run*.json")):
        for r in json.loads(path.read_text())["gemm1"]:
            p = {part[0]: int(part[1:]) for part in r["config"].split()}
            shapes.add((p["M"], p["N"], p["K"], p["w"], p["s"]))
    return sorted(shapes)


def config_of(shape) -> Config:
    bm, bn, bk, w, s = shape
    return Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 1},
                  num_warps=w, num_stages=s)


def probe_spec(shape, ctas_per_sm: int, k: int) -> MoEGemmSpec:
    bm, bn = shape[0], shape[1]
    return MoEGemmSpec(1, 1, k, bn * N_BLOCKS, bm * M_BLOCKS * ctas_per_sm, gemm=1)


def _compile(shape) -> tuple[tuple, dict | None, str]:
    from kernels import moe_bench

    try:
        return shape, moe_bench.compile_config(probe_spec(shape, 1, K_STEPS[-1]), config_of(shape)), ""
    except Exception as exc:  # a config that does not compile or load is a result, not a crash
        return shape, None, f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"


def compile_all(shapes, workers: int) -> dict:
    import multiprocessing as mp

    out = {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        for future in as_completed([pool.submit(_compile, s) for s in shapes]):
            shape, res, why = future.result()
            out[shape] = (res, why)
    return out


def ctas_per_sm(shape, resources: dict) -> int:
    from ceilings.hardware import resolve_gpu
    from ceilings.roofline import occupancy

    return occupancy(resolve_gpu("h100").spec, shape[3], resources.get("n_regs"), resources.get("shared"))


def timer(dry: bool):
    """moe_fusion's timer with this probe's counts: 2 launches a graph, 1 warm-up."""
    return _timer(dry, launches_per_graph=2, warmup=1)


def run_loop_probe(shapes, compiled, device: str, dry: bool, deadline: float) -> list[dict]:
    from advisor.measure.timing import check_output
    from kernels.moe_bench import MoEGemmCase

    time_it, rows, cases = timer(dry), [], {}
    for shape in shapes:
        res, why = compiled.get(shape, (None, "not compiled"))
        row = {"shape": list(shape), "config": config_of(shape).label()}
        if res is None or time.monotonic() > deadline:
            rows.append({**row, "status": "compile failed" if res is None else "deadline", "why": why})
            continue
        c = max(1, ctas_per_sm(shape, res)) if not dry else 1
        row.update(ctas_per_sm=c, n_regs=res.get("n_regs"), shared=res.get("shared"))
        try:
            for k in K_STEPS:
                spec = probe_spec(shape, c, k)
                key = (spec.m, spec.n, k)
                if key not in cases:
                    cases.clear() if len(cases) > 8 else None
                    cases[key] = MoEGemmCase(spec, device=device)
                case = cases[key]
                run = case.runner(config_of(shape))
                if k == K_STEPS[-1]:
                    case.out.fill_(float("nan"))
                    run()
                    row["rel_error"] = check_output(case.out.float(), case.reference, 1e-2, row["config"])
                row[f"us_k{k}"] = round(time_it(run), 3)
            row.update(status="ok", m=probe_spec(shape, c, 16).m, n=probe_spec(shape, c, 16).n)
        except Exception as exc:  # a wrong result or a launch failure is recorded, not fatal
            row.update(status="failed", why=f"{type(exc).__name__}: {exc}"[:300])
        rows.append(row)
        print("loop:", json.dumps(row), flush=True)
    return rows


def run_dram_probe(device: str, dry: bool) -> list[dict]:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def slab_read(w_ptr, out_ptr, K, stride_r, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
        pid = tl.program_id(0)
        rows = (pid * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
        acc = tl.zeros((BLOCK_R,), tl.float32)
        for k in range(0, K, BLOCK_K):
            cols = k + tl.arange(0, BLOCK_K)
            acc += tl.sum(tl.load(w_ptr + rows[:, None] * stride_r + cols[None, :]).to(tl.float32), axis=1)
        tl.store(out_ptr + pid, tl.sum(acc))

    k_full = 256 if dry else 4096
    total = (1 << 16) if dry else (1 << 29)  # elements: 1 GiB of bf16 on a GPU
    w = torch.randn(total, device=device).to(torch.bfloat16)
    time_it, rows = timer(dry), []
    for label, k, block_k in (("contiguous 64x64 tiles", 64, 64), ("slab 128 B segments", k_full, 64),
                              ("slab 256 B segments", k_full, 128), ("slab 512 B segments", k_full, 256)):
        r = total // k
        grid = (r // 64,)
        out = torch.empty(grid[0], device=device, dtype=torch.float32)

        def run(w=w, out=out, k=k, block_k=block_k, grid=grid):
            slab_read[grid](w, out, k, k, BLOCK_R=64, BLOCK_K=block_k, num_warps=8, num_stages=3)
        run()
        ref = w.view(r, k).float().sum(dim=1).view(-1, 64).sum(dim=1)
        err = float((out - ref).abs().max() / ref.abs().max())
        us = time_it(run)
        rows.append({"probe": label, "K": k, "BLOCK_K": block_k, "bytes": total * 2, "us": round(us, 3),
                     "tbs": round(total * 2 / us / 1e6, 3), "max_rel_error": err})
        print("dram:", json.dumps(rows[-1]), flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--workers", type=int, default=15)
    ap.add_argument("--deadline", type=float, default=200.0, help="seconds for the loop probe's timing")
    ap.add_argument("--dry-run", action="store_true", help="CPU interpreter, two tiny shapes")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    doc = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": " ".join(sys.argv)}
    if args.dry_run:
        global K_STEPS, M_BLOCKS, N_BLOCKS
        K_STEPS, M_BLOCKS, N_BLOCKS = (32, 64), 1, 2
        sys.path.insert(0, str(ROOT / "tests"))
        import interpreter_bf16  # the CPU interpreter's bf16 dot needs the tests' patch

        interpreter_bf16.install()
        shapes = [(16, 32, 32, 4, 2), (32, 64, 32, 4, 2)]
        compiled = {s: ({"n_regs": None, "shared": None}, "") for s in shapes}
        device = "cpu"
    else:
        import torch
        import triton

        shapes = loop_shapes()
        doc.update(gpu=torch.cuda.get_device_name(), triton=triton.__version__, torch=torch.__version__,
                   sms=torch.cuda.get_device_properties(0).multi_processor_count)
        compiled = compile_all(shapes, args.workers)
        doc["compile_s"] = round(time.monotonic() - start, 1)
        print(f"compiled {len(shapes)} loop shapes in {doc['compile_s']} s", flush=True)
        device = "cuda"
    doc["dram"] = run_dram_probe(device, args.dry_run)
    doc["loop"] = run_loop_probe(shapes, compiled, device, args.dry_run, start + args.deadline)
    doc["wall_s"] = round(time.monotonic() - start, 1)
    (out / "moe_loop_probe.json").write_text(json.dumps(doc, indent=1))
    ok = [r for r in doc["loop"] if r.get("status") == "ok"]
    print(f"\n{len(ok)} of {len(doc['loop'])} loop shapes timed; {doc['wall_s']} s; {doc.get('gpu', 'cpu')}")
    for r in doc["dram"]:
        print(f"dram {r['probe']:<26} {r['us']:10.1f} us  {r['tbs']:.2f} TB/s  err {r['max_rel_error']:.1e}")
    for r in ok[:: max(1, len(ok) // 12)]:
        k1, k2 = K_STEPS
        step = (r[f"us_k{k2}"] - r[f"us_k{k1}"]) / ((k2 - k1) / r["shape"][2])
        print(f"loop {r['config']:<22} c={r['ctas_per_sm']}  K{k1} {r[f'us_k{k1}']:8.2f}  K{k2} {r[f'us_k{k2}']:8.2f} "
              f"us  step {step * 1e3:7.1f} ns")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
