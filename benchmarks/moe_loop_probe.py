"""Microbenchmarks for `advisor diagnose`'s loop causes (issue 16), on a GPU: the fused-MoE GEMM1 kernels' K
loop fed from L2, the fixed cost of a first and of a further round of CTAs (or, in the persistent kernels, of
tiles), DRAM reads in the weight slabs' access pattern, and the SM clock all of it ran at.

    python benchmarks/moe_loop_probe.py --out $OUT [--variants previous,fused-il,...] [--workers 15] [--deadline 200]
    python benchmarks/moe_probe_convert.py RAW.json --tag h100   # -> advisor/advice/loop_probes/
    TRITON_INTERPRET=1 python benchmarks/moe_loop_probe.py --dry-run --out /tmp/x   # CPU: tiny, same code

1. **Loop probe.** For every kernel variant (`kernels.moe_bench.VARIANTS`: the previous kernel of
   `kernels/fused_moe.py` and the GEMM1 forms of `kernels/fused_moe_fused.py`, persistent ones included) and
   every loop shape (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) the measured GEMM1 data of
   benchmarks/data/ hold for that variant, the kernel runs a synthetic launch that no sweep row has: one expert,
   top-1, M = BLOCK_M x 11 x c x R tokens and N = BLOCK_N x 12 (12 output blocks, gated or not), where c is the
   CTAs one SM holds for this config (from the compiled kernel's registers and shared memory) or, for a
   persistent variant, the programs per SM its grid launches (`fused_moe_fused.ctas_per_sm`): 132 x c x R
   tiles with real rows, R rounds of them, no padding rows. A, W and C stay about L2-sized, so graph replays
   serve the operands from L2. Each config runs at K = 512 and 2048 and at R = 1 and 2 (same compiled kernel):
   with trips = K / BLOCK_K, time = launch + first + (R - 1) x next + R x trips x step, so the K slope gives one
   K step of a round, the intercept at R = 1 the fixed cost of a first round (CTA launch, index loads, fill,
   drain, epilogue, exit), and the R = 2 times the fixed cost of each further round: another wave of CTAs in
   a grid the hardware refills, another tile of the same programs in a persistent loop. The K = 2048, R = 1
   output is checked against the float32 reference (relative error < 1e-2).
2. **SM clock** (benchmarks/moe_probe_clock.py): clock64 against event time just before and after each loop
   shape, nvidia-smi every 20 ms in the background (its log comes back beside the JSON), and the clock the
   sweeps' protocol runs at on a heavy GEMM1 launch (Mixtral TP2 M = 1024): the probe's times are scaled by
   the ratio of the two before the advisor compares them with sweep times.
3. **DRAM slab probe.** A 1 GiB bf16 matrix [R, 4096] read by CTAs of 64 rows walking K in steps of
   BLOCK_K (64, 128, 256: row segments of 128, 256, 512 bytes 8 KB apart, as a weight slab's K steps
   are), against the same bytes read as contiguous 64 x 64 tiles.
Timing: CUDA graph of 2 launches after 1 warm-up, median of 20 replays, no L2 flush (the sweeps' rule).
Writes OUT/moe_loop_probe.json (and OUT/smi_clock.csv) and prints a short table last;
benchmarks/moe_probe_convert.py turns it into the files the advisor reads, one per (GPU, kernel variant).
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
ROUNDS = (1, 2)
SMS = 132
M_BLOCKS, N_BLOCKS = 11, 12   # 132 = 11 x 12 CTAs per CTA slot of an SM
GEMM1_VARIANTS = ("previous", "fused", "fused-il", "persistent", "fused-persistent", "fused-il-persistent")


def _shape_of(label: str) -> tuple[int, int, int, int, int]:
    p = {part[0]: int(part[1:]) for part in label.split()}
    return p["M"], p["N"], p["K"], p["w"], p["s"]


def loop_shapes(variant: str = "previous", fusion_only: bool = False) -> list[tuple[int, int, int, int, int]]:
    """Every (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages) of a timed GEMM1 row of `variant` in benchmarks/data/:
    the sweeps and collections (previous kernel) and the fusion runs and tuning runs (every variant); with
    `fusion_only`, the fusion runs' alone (the configs every variant was timed at)."""
    shapes = set()
    if variant == "previous" and not fusion_only:
        for path in sorted(DATA.glob("h*_moe_*.csv.gz")):
            if "kernel_v1" in path.name:
                continue
            with gzip.open(path, "rt") as fh:
                for r in csv.DictReader(fh):
                    if r["status"] == "ok" and r["gemm"] == "1":
                        shapes.add(tuple(int(r[k]) for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K",
                                                             "num_warps", "num_stages")))
    for path in sorted(DATA.glob("h*_moe_fusion_run*.json" if fusion_only else "h*_moe_fusion_*.json")):
        for r in json.loads(path.read_text()).get("gemm1", []):
            if r.get("variant", "previous") == variant and r.get("status", "ok") == "ok":
                shapes.add(_shape_of(r["config"]))
    return sorted(shapes)


def config_of(shape) -> Config:
    bm, bn, bk, w, s = shape
    return Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 1},
                  num_warps=w, num_stages=s)


def probe_spec(shape, ctas_per_sm: int, k: int, rounds: int = 1) -> MoEGemmSpec:
    """One expert, top-1: 11 x c x R M blocks by 12 N blocks (a gated variant's output blocks are
    BLOCK_N / 2 wide over N / 2 columns: 12 of them too)."""
    bm, bn = shape[0], shape[1]
    return MoEGemmSpec(1, 1, k, bn * N_BLOCKS, bm * M_BLOCKS * ctas_per_sm * rounds, gemm=1)


def persistent(variant: str) -> bool:
    return variant.endswith("persistent")


def _compile(job) -> tuple[tuple, dict | None, str]:
    from kernels import moe_bench

    variant, shape = job
    spec = probe_spec(shape, 1, K_STEPS[-1])
    try:
        res = (moe_bench.compile_config(spec, config_of(shape)) if variant == "previous"
               else moe_bench.compile_fused_config(spec, config_of(shape), variant))
        return job, res, ""
    except Exception as exc:  # a config that does not compile or load is a result, not a crash
        return job, None, f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"


def compile_all(jobs, workers: int, compile_one=None) -> dict:
    """{job: (resources, why)} of `compile_one(job)` (a module-level function; default this probe's) in
    spawned workers."""
    import multiprocessing as mp

    out = {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        for future in as_completed([pool.submit(compile_one or _compile, j) for j in jobs]):
            job, res, why = future.result()
            out[job] = (res, why)
    return out


def ctas_per_sm(variant: str, shape, resources: dict) -> int:
    """Tiles one SM takes per round: the CTAs it holds (hardware-scheduled grid), or the programs per SM the
    persistent grid launches (the kernel's own estimate, whatever the SM then holds at once)."""
    from ceilings.hardware import resolve_gpu
    from ceilings.roofline import occupancy
    from kernels import fused_moe_fused as ff

    if persistent(variant):
        return ff.ctas_per_sm(config_of(shape))
    return occupancy(resolve_gpu("h100").spec, shape[3], resources.get("n_regs"), resources.get("shared"))


def timer(dry: bool):
    """moe_fusion's timer with this probe's counts: 2 launches a graph, 1 warm-up."""
    return _timer(dry, launches_per_graph=2, warmup=1)


class Bf16Launches:
    """The bf16 probe's launches: `(run, output_and_reference)` of a variant at a loop shape, c CTAs per SM, K and
    rounds (a few cases kept: one case serves every variant of a shape), and the launch's M and N."""

    def __init__(self, device: str):
        self.device, self.cases = device, {}

    def __call__(self, variant, shape, c: int, k: int, rounds: int):
        from kernels.moe_bench import MoEGemmCase

        spec = probe_spec(shape, c, k, rounds)
        key = (spec.m, spec.n, k)
        if key not in self.cases:
            self.cases.clear() if len(self.cases) > 8 else None
            self.cases[key] = MoEGemmCase(spec, device=self.device)
        case = self.cases[key]
        return case.variant_runner(config_of(shape), variant), lambda: case.variant_output(variant)

    @staticmethod
    def sizes(variant, shape, c: int) -> dict:
        spec = probe_spec(shape, c, 16)
        return {"m": spec.m, "n": spec.n}


def run_loop_probe(jobs, compiled, device: str, dry: bool, deadline: float, smi=None, repeats: int = 1,
                   launches=None, ctas=None) -> list[dict]:
    """Time every (variant, loop shape) job at K_STEPS x ROUNDS, the last K of one round checked against its
    reference. `launches`: what builds the launches (default the bf16 kernels'), `ctas`: CTAs per SM of a compiled
    job (default `ctas_per_sm`)."""
    from advisor.measure.timing import check_output

    launches = launches or Bf16Launches(device)
    ctas = ctas or ctas_per_sm
    time_it, rows = timer(dry), []
    clock = (lambda: None) if dry else _spin_clock
    for variant, shape in jobs:
        res, why = compiled.get((variant, shape), (None, "not compiled"))
        row = {"variant": variant, "shape": list(shape), "config": config_of(shape).label()}
        if res is None or time.monotonic() > deadline:
            rows.append({**row, "status": "compile failed" if res is None else "deadline", "why": why})
            continue
        c = max(1, ctas(variant, shape, res)) if not dry else 1
        row.update(ctas_per_sm=c, n_regs=res.get("n_regs"), shared=res.get("shared"))
        try:
            row["t0"], row["clock_before_mhz"] = time.time(), clock()
            for rounds in ROUNDS:
                for k in K_STEPS:
                    run, output_and_reference = launches(variant, shape, c, k, rounds)
                    if k == K_STEPS[-1] and rounds == 1:
                        out, ref = output_and_reference()
                        out.fill_(float("nan"))
                        run()
                        row["rel_error"] = check_output(out.float(), ref, 1e-2, row["config"])
                    times = [round(time_it(run), 3) for _ in range(repeats)]
                    row[f"us_k{k}_r{rounds}"] = sorted(times)[len(times) // 2]  # the median of the repeats
                    if repeats > 1:
                        row[f"us_k{k}_r{rounds}_all"] = times
            row["clock_after_mhz"], row["t1"] = clock(), time.time()
            row.update(status="ok", **launches.sizes(variant, shape, c))
        except Exception as exc:  # a wrong result or a launch failure is recorded, not fatal
            row.update(status="failed", why=f"{type(exc).__name__}: {exc}"[:300])
        rows.append(row)
        print("loop:", json.dumps(row), flush=True)
    if smi is not None:
        smi.stop()
        for row in rows:
            if row.get("status") == "ok":
                row["smi_mhz"] = smi.window(row["t0"], row["t1"])
    return rows


def _spin_clock() -> float:
    from moe_probe_clock import spin_clock_mhz

    return round(spin_clock_mhz(), 1)


def measure_sweep_clock(device: str) -> dict:
    """The clock the sweeps' protocol runs a heavy GEMM1 at (Mixtral TP2 M = 1024, the shipped kernel at the
    sweeps' fastest tile), by benchmarks/moe_probe_clock.sweep_clock."""
    from moe_probe_clock import sweep_clock

    from kernels.moe_bench import MoEGemmCase

    spec = MoEGemmSpec(8, 2, 4096, 14336, 1024, gemm=1)
    config = Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 32},
                    num_warps=8, num_stages=3)
    case = MoEGemmCase(spec, device=device)
    out = {"case": f"{spec.shape_label} M={spec.m}", "config": config.label(), **sweep_clock(case.runner(config))}
    print("clock:", json.dumps(out), flush=True)
    return out


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


def probe_parser(doc: str, variants, deadline: float, repeats: int) -> argparse.ArgumentParser:
    """The options a loop probe takes (this one and benchmarks/fp8_loop_probe.py)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--variants", default=",".join(variants))
    ap.add_argument("--workers", type=int, default=15)
    ap.add_argument("--deadline", type=float, default=deadline, help="seconds for the loop probe's timing")
    ap.add_argument("--dry-run", action="store_true", help="CPU interpreter, two tiny shapes")
    ap.add_argument("--repeats", type=int, default=repeats,
                    help="time each (K, rounds) point so many times (median kept)")
    return ap


def main(argv=None) -> int:
    global K_STEPS, M_BLOCKS, N_BLOCKS
    ap = probe_parser(__doc__, GEMM1_VARIANTS, 200.0, 1)
    ap.add_argument("--fusion-shapes", action="store_true", help="only the loop shapes of the fusion runs")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    variants = [v for v in args.variants.split(",") if v]
    doc = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": " ".join(sys.argv),
           "k_steps": list(K_STEPS), "rounds": list(ROUNDS)}
    smi = None
    if args.dry_run:
        K_STEPS, M_BLOCKS, N_BLOCKS = (32, 64), 1, 2
        doc["k_steps"] = list(K_STEPS)
        from advisor.capture import interpreter_fixes  # the CPU interpreter's bf16 dot needs the patch

        interpreter_fixes.install()
        jobs = [(v, s) for v in variants for s in [(16, 32, 32, 4, 2), (32, 64, 32, 4, 2)]]
        compiled = {j: ({"n_regs": None, "shared": None}, "") for j in jobs}
        device = "cpu"
        doc.update(gpu="cpu", triton="interpreter", torch="cpu")
    else:
        import torch
        import triton
        from moe_probe_clock import SmiSampler

        # Shape by shape, every variant of it in turn: the variants a change compares run minutes apart at most.
        jobs = sorted(((v, s) for v in variants for s in loop_shapes(v, args.fusion_shapes)),
                      key=lambda j: (j[1], variants.index(j[0])))
        doc.update(gpu=torch.cuda.get_device_name(), triton=triton.__version__, torch=torch.__version__,
                   sms=torch.cuda.get_device_properties(0).multi_processor_count)
        if doc["sms"] != SMS:
            raise SystemExit(f"{doc['gpu']} has {doc['sms']} SMs; the probe's grids are sized for {SMS}")
        compiled = compile_all(jobs, args.workers)
        doc["compile_s"] = round(time.monotonic() - start, 1)
        print(f"compiled {len(jobs)} (variant, loop shape) jobs in {doc['compile_s']} s", flush=True)
        device = "cuda"
        smi = SmiSampler(out / "smi_clock.csv").start()
        doc["sweep_clock"] = measure_sweep_clock(device)
    doc["dram"] = run_dram_probe(device, args.dry_run)
    doc["loop"] = run_loop_probe(jobs, compiled, device, args.dry_run, start + args.deadline, smi, args.repeats)
    ok = finish(doc, out, start)
    for r in doc["dram"]:
        print(f"dram {r['probe']:<26} {r['us']:10.1f} us  {r['tbs']:.2f} TB/s  err {r['max_rel_error']:.1e}")
    for variant in variants:
        mine = [r for r in ok if r["variant"] == variant]
        print_rows(mine[:: max(1, len(mine) // 3)])
    return 0


def finish(doc: dict, out: Path, start: float) -> list[dict]:
    """Write OUT/moe_loop_probe.json, print what was timed and the sweeps' clock; the rows timed."""
    doc["wall_s"] = round(time.monotonic() - start, 1)
    (out / "moe_loop_probe.json").write_text(json.dumps(doc, indent=1))
    ok = [r for r in doc["loop"] if r.get("status") == "ok"]
    print(f"\n{len(ok)} of {len(doc['loop'])} loop shapes timed; {doc['wall_s']} s; {doc.get('gpu', 'cpu')}")
    if "sweep_clock" in doc:
        print("sweep protocol clock:", json.dumps(doc["sweep_clock"]))
    return ok


def print_rows(rows: list[dict]) -> None:
    """One line per timed row: its times at the two K and two rounds, its step, its check and clocks."""
    k1, k2 = K_STEPS
    for r in rows:
        step = (r[f"us_k{k2}_r1"] - r[f"us_k{k1}_r1"]) / ((k2 - k1) / r["shape"][2])
        print(f"{r['variant']:<22} {r['config']:<22} c={r['ctas_per_sm']:<2} K{k1} {r[f'us_k{k1}_r1']:8.2f} "
              f"R2 {r[f'us_k{k1}_r2']:8.2f} K{k2} {r[f'us_k{k2}_r1']:8.2f} us step {step * 1e3:7.1f} ns "
              f"err {r.get('rel_error', float('nan')):.1e} clock {r.get('clock_before_mhz')}/"
              f"{r.get('clock_after_mhz')} smi {r.get('smi_mhz')}")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
