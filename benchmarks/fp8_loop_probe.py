"""The loop probe of benchmarks/moe_loop_probe.py on the fp8 fused-MoE kernel (`kernels/fused_moe_fp8.py`), for
`advisor diagnose`'s K-loop rate and CTA ramp on its GEMMs (issue 16).

    python benchmarks/fp8_loop_probe.py --out $OUT [--variants fp8-g1-block-tiles,...] [--workers 15]
    python benchmarks/moe_probe_convert.py OUT/moe_loop_probe.json --tag h100   # -> advisor/advice/loop_probes/
    TRITON_INTERPRET=1 python benchmarks/fp8_loop_probe.py --dry-run --out /tmp/x   # CPU: tiny, same code

The same synthetic launches as the bf16 probe (one expert, top-1, 11 x c x R M blocks of real rows by 12 output
blocks, A, W and C about L2-sized; K = 512 and 4096 (`K_STEPS`), R = 1 and 2 rounds, each point timed --repeats
times and its median kept; the K = 4096, R = 1 output checked against the float32 reference over the dequantised
operands, relative error < 1e-2), on random data quantised as the layer quantises it. The variants (`VARIANTS`) are
the forms whose diagnoses RESULTS 43 and 47 left short: GEMM1 with block scales per column and per tile, and GEMM2
storing its rows (block and per-channel scales); and GEMM1 with per-channel scales. Loop shapes: every config those
diagnoses timed (benchmarks/data/*_fp8_tile_scales_all_counts.json at M >= 1024 for the block GEMM1,
`CHANNEL_GEMM1_RUNS` at M >= 1024 for the per-channel one, *_atomic_probe.json's stored rows for GEMM2). CTAs per SM
from each compiled kernel's registers and shared memory. The sweeps' clock is read as the bf16 probe reads it (its
heavy bf16 launch), the SM clock around each loop shape too. Timing: CUDA graph of 2 launches after 1 warm-up,
median of 20 replays, no L2 flush.
Writes OUT/moe_loop_probe.json (the bf16 probe's format, so its converter reads it) and prints a table last.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import moe_loop_probe as bf16_probe  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
# K of the two points: the bf16 probe's 512 and, past its 2048, 4096 (A, W and C stay within the L2), so that these
# launches of 8-40 us hold enough K steps between them for a step to stand above launch-to-launch jitter (1-2 us in
# a first H100 run at 2048: 2026-11-24 21:16 UTC, benchmarks/data/h100_fp8_loop_probe_k2048*.json, two runs).
K_STEPS = (512, 4096)
# variant: (gated, scaling, tile scales, top-k sum by atomics); GEMM2 stores its rows (the form diagnosed short).
VARIANTS = {"fp8-g1-block-tiles": (True, "block", True, False), "fp8-g1-block-cols": (True, "block", False, False),
            "fp8-g1-channel": (True, "channel", False, False),
            "fp8-g2-stores-block": (False, "block", False, False),
            "fp8-g2-stores-channel": (False, "channel", False, False)}
# The runs whose per-channel GEMM1 rows were timed alone (RESULTS 40; benchmarks/fp8_moe_generic_check.py reads them).
CHANNEL_GEMM1_RUNS = ("h100_moe_fp8_run5.json", "h200_moe_fp8_run6.json")


def loop_shapes(variant: str) -> list[tuple[int, int, int, int, int]]:
    """The (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages) of the configs the diagnoses of `variant` were timed at."""
    gated, scaling = VARIANTS[variant][:2]
    shapes = set()
    if gated and scaling == "channel":
        for name in CHANNEL_GEMM1_RUNS:
            for case in json.loads((DATA / name).read_text())["gemm1"]:
                part = case["scalings"].get("channel", {"rows": []}) if case["m"] >= 1024 else {"rows": []}
                shapes |= {bf16_probe._shape_of(r["config"]) for r in part["rows"]
                           if r.get("status") == "ok" and r.get("gemm_us")}
    elif gated:
        for path in sorted(DATA.glob("h*_fp8_tile_scales_all_counts.json")):
            for case in json.loads(path.read_text())["cases"]:
                shapes |= {bf16_probe._shape_of(r["config"]) for r in case["rows"]
                           if r["gemm"] == 1 and case["m"] >= 1024 and r["status"] == "ok"}
    else:
        for path in sorted(DATA.glob("h*_atomic_probe.json")):
            shapes |= {bf16_probe._shape_of(r["config"]) for r in json.loads(path.read_text())["gemm2"]
                       if r["form"] == "stores" and r["scaling"] == scaling}
    return sorted(shapes)


def probe_sizes(variant: str, shape, ctas_per_sm: int, k: int, rounds: int = 1) -> tuple[int, int, int]:
    """(rows M, output columns, K): 11 x c x R M blocks by 12 output blocks (a gated tile's output block is
    BLOCK_N / 2 wide)."""
    gated = VARIANTS[variant][0]
    bm, bn = shape[0], shape[1]
    return bm * bf16_probe.M_BLOCKS * ctas_per_sm * rounds, bn // (2 if gated else 1) * bf16_probe.N_BLOCKS, k


def _compile(job) -> tuple[tuple, dict | None, str]:
    from moe_fp8 import warm_fp8

    from kernels.warmup import loaded_resources

    variant, shape = job
    gated, scaling, tiles, atomics = VARIANTS[variant]
    m, n_out, k = probe_sizes(variant, shape, 1, K_STEPS[-1])
    h, inter = (k, n_out) if gated else (n_out, k)
    try:
        kernel = warm_fp8(1, 1, h, inter, m, bf16_probe.config_of(shape), gated, scaling, False, atomics, tiles)
        return job, loaded_resources(kernel), ""
    except Exception as exc:  # a config that does not compile or load is a result, not a crash
        return job, None, f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"


class Fp8ProbeCase:
    """One synthetic launch's operands (random, quantised as the layer quantises them) and its reference."""

    def __init__(self, variant: str, m: int, n_out: int, k: int, device: str, seed: int = 0):
        import torch

        from kernels import fused_moe_fp8 as f8
        from kernels.fp8_quant import dequantize_rows, dequantize_weights, quantize_rows, quantize_weights

        self.gated, self.scaling, self.tiles, self.atomics = VARIANTS[variant]
        g = torch.Generator(device="cpu").manual_seed(seed)
        a = torch.randn(m, k, generator=g).to(device=device, dtype=torch.bfloat16)
        rows_b = 2 * n_out if self.gated else n_out
        w = (torch.randn(1, rows_b, k, generator=g) / k ** 0.5).to(device=device, dtype=torch.bfloat16)
        self.a_q, self.a_s = quantize_rows(a, self.scaling)
        w_q, self.w_s = quantize_weights(w, self.scaling)
        self.w_q = f8.interleave_fp8(w_q) if self.gated else w_q
        self.ids = torch.zeros(m, 1, dtype=torch.int32, device=device)
        self.weights = torch.rand(m, 1, generator=g).to(device)
        self.c = torch.empty(m, n_out, dtype=torch.bfloat16, device=device)
        full = dequantize_rows(self.a_q, self.a_s) @ dequantize_weights(w_q, self.w_s)[0].T
        self.ref = (torch.nn.functional.silu(full[:, :n_out]) * full[:, n_out:] if self.gated
                    else full * self.weights.float())
        self._aligned = {}

    def runner(self, config):
        from kernels import fused_moe_fp8 as f8
        from kernels.moe_align import moe_align_triton

        bm = config["BLOCK_SIZE_M"]
        if bm not in self._aligned:
            self._aligned[bm] = moe_align_triton(self.ids, (bm,), 1)[0]
        align = self._aligned[bm]

        def run():
            f8.invoke_fp8_gemm(self.a_q, self.a_s, self.w_q, self.w_s, self.c, self.weights, *align, top_k=1,
                               config=config, gated=self.gated, scaling=self.scaling, sum_topk=self.atomics,
                               tile_scales=self.tiles)
        return run


class Fp8Launches:
    """The fp8 forms' launches for `moe_loop_probe.run_loop_probe`: `(run, output_and_reference)` of a form at a loop
    shape, c CTAs per SM, K and rounds, and the launch's M and N."""

    def __init__(self, device: str):
        self.device = device

    def __call__(self, variant, shape, c: int, k: int, rounds: int):
        m, n_out, _ = probe_sizes(variant, shape, c, k, rounds)
        case = Fp8ProbeCase(variant, m, n_out, k, self.device)
        return case.runner(bf16_probe.config_of(shape)), lambda: (case.c, case.ref)

    @staticmethod
    def sizes(variant, shape, c: int) -> dict:
        m, n_out, _ = probe_sizes(variant, shape, c, 16)
        return {"m": m, "n": n_out}


def main(argv=None) -> int:
    args = bf16_probe.probe_parser(__doc__, VARIANTS, 300.0, 5).parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: {', '.join(unknown)} not among {', '.join(VARIANTS)}")
    doc = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": " ".join(sys.argv),
           "k_steps": list(bf16_probe.K_STEPS), "rounds": list(bf16_probe.ROUNDS), "source": "kernels/fused_moe_fp8.py"}
    smi = None
    bf16_probe.K_STEPS = K_STEPS  # the probe's helpers read them there
    doc["k_steps"] = list(K_STEPS)
    if args.dry_run:
        bf16_probe.K_STEPS, bf16_probe.M_BLOCKS, bf16_probe.N_BLOCKS = (128, 256), 1, 2
        doc["k_steps"] = list(bf16_probe.K_STEPS)
        jobs = [(v, s) for v in variants for s in [(16, 32, 32, 4, 2), (32, 64, 64, 4, 2)]]
        compiled = {j: ({"n_regs": None, "shared": None}, "") for j in jobs}
        device = "cpu"
        doc.update(gpu="cpu", triton="interpreter", torch="cpu")
    else:
        import torch
        import triton
        from moe_probe_clock import SmiSampler

        jobs = sorted(((v, s) for v in variants for s in loop_shapes(v)), key=lambda j: (j[1], variants.index(j[0])))
        doc.update(gpu=torch.cuda.get_device_name(), triton=triton.__version__, torch=torch.__version__,
                   sms=torch.cuda.get_device_properties(0).multi_processor_count)
        if doc["sms"] != bf16_probe.SMS:
            raise SystemExit(f"{doc['gpu']} has {doc['sms']} SMs; the probe's grids are sized for {bf16_probe.SMS}")
        compiled = bf16_probe.compile_all(jobs, args.workers, _compile)
        doc["compile_s"] = round(time.monotonic() - start, 1)
        print(f"compiled {len(jobs)} (variant, loop shape) jobs in {doc['compile_s']} s", flush=True)
        device = "cuda"
        smi = SmiSampler(out / "smi_clock.csv").start()
        doc["sweep_clock"] = bf16_probe.measure_sweep_clock(device)
    doc["dram"] = []  # the slab probe is the bf16 probe's (the advisor reads it from that probe's files)
    doc["loop"] = bf16_probe.run_loop_probe(jobs, compiled, device, args.dry_run, start + args.deadline, smi,
                                            args.repeats, Fp8Launches(device))
    bf16_probe.print_rows(bf16_probe.finish(doc, out, start))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
