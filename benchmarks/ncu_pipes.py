"""Check the generic SASS counts against Nsight Compute's per-pipeline instruction counts.

On a GPU machine:
    python benchmarks/ncu_pipes.py --predict > OUT/predicted.json
    ncu --clock-control none -k regex:fused_moe_kernel --metrics <sm__inst_executed_pipe_*.sum> --csv \
        --log-file OUT/ncu.csv python benchmarks/ncu_pipes.py --run
then here: python benchmarks/ncu_pipes.py --compare OUT/predicted.json OUT/ncu.csv

The launches: the shipped fused-MoE GEMM (both GEMMs) over two shapes, three token counts and four
configs (warpgroup MMA with TMA weights, warpgroup MMA with pointer loads, and two warp-MMA tiles),
each launched once, in a fixed order, on routing drawn like the sweeps'. Prediction = the generic
per-CTA counts (ceilings.sass, compiled by this machine's Triton) x the CTAs that work, plus the
early-exit path x the CTAs that exit at once (their number from the exact routing).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ceilings.launch import Config  # noqa: E402
from kernels.moe_bench import MoEGemmSpec  # noqa: E402


def _cfg(bm, bn, bk, g, w, s):
    return Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": g}, w, s)


def launches() -> list[tuple[MoEGemmSpec, Config]]:
    out = []
    for (e, k, kk, n) in ((8, 2, 4096, 14336), (128, 8, 2048, 384)):
        for m in (1, 256, 4096):
            out += [(MoEGemmSpec(e, k, kk, n, m, b_tma=True), _cfg(128, 256, 64, 16, 8, 3)),
                    (MoEGemmSpec(e, k, kk, n, m, b_tma=False), _cfg(64, 128, 64, 8, 4, 4)),
                    (MoEGemmSpec(e, k, kk, n, m), _cfg(16, 64, 128, 1, 4, 4)),
                    (MoEGemmSpec(e, k, n // 2, kk, m, gemm=2), _cfg(32, 64, 128, 1, 4, 3))]
    return out


def run() -> None:
    import torch

    from advisor.measure.moe_tune import make_case

    for spec, config in launches():
        case = make_case(spec)
        case.runner(config)()
        torch.cuda.synchronize()
        del case
        torch.cuda.empty_cache()


def predict() -> list[dict]:
    from advisor.measure.moe_tune import make_case
    from ceilings.compile import compile_launch
    from ceilings.sass import count_instructions, early_exit_counts, weigh
    from ceilings.ttir_eval import loop_trip_counts
    from kernels.moe_bench import describe_launch
    from kernels.moe_demand import moe_gemm_demand

    rows = []
    for spec, config in launches():
        counts = make_case(spec).expert_counts()
        launch = describe_launch(spec, config)
        compiled = compile_launch(launch)
        trips = loop_trip_counts(compiled.ttgir, {k: v for k, v in launch.scalars if isinstance(v, int)})
        per_warp = count_instructions(compiled.sass, launch.kernel, trips)
        idle = early_exit_counts(compiled.sass, launch.kernel) or {}
        demand = moe_gemm_demand(spec, config, counts=counts)
        active, total = demand.active_ctas, demand.ctas
        warps = config.num_warps
        pipes = set(per_warp.per_pipe) | set(idle)
        predicted = {p: warps * (active * per_warp.per_pipe.get(p, 0) + (total - active) * idle.get(p, 0))
                     for p in pipes}
        code, _ = weigh(compiled.sass, launch.kernel, trips)
        by_opcode: dict[str, float] = {}
        for ins, times in code.instructions():
            by_opcode[ins.opcode] = by_opcode.get(ins.opcode, 0.0) + warps * active * times
        rows.append({"shape": spec.shape_label, "M": spec.m, "gemm": spec.gemm, "b_tma": spec.b_tma,
                     "config": config.label(), "active_ctas": active, "ctas": total, "predicted": predicted,
                     "by_opcode_active": by_opcode, "idle_by_pipe": idle,
                     "mma_kinds": dict(per_warp.mma_kinds), "notes": per_warp.notes})
    return rows


# ncu metric -> our pipeline name. `pipe_tensor` is the tensor pipe's total: its sub-counters overlap
# (on a Hopper warpgroup MMA launch `tensor_op_gmma` = `tensor_op_hmma` = `pipe_tensor`, and HFMA2.MMA
# is in `tensor_op_hmma_type_hfma2` and `tensor_op_hmma` too), so summing them counted an HGMMA twice.
NCU_PIPES = {"tensor": "tensor", "fma": "fma", "alu": "alu", "xu": "xu", "lsu": "lsu", "uniform": "uniform",
             "cbu": "cbu", "adu": "adu", "tma": "tma"}
PIPES = ("tensor", "fma", "alu", "xu", "lsu", "uniform", "cbu", "adu", "tma")
# Every opcode, warp MMAs and warpgroup MMAs included, counts once per warp that executes it in
# `sm__inst_executed_pipe_tensor` (a warpgroup MMA: once in each of its 4 warps).
NCU_COUNT: dict[str, int] = {}


def _idle_opcodes(row: dict, spec: MoEGemmSpec, config: Config) -> dict[str, float]:
    """Opcodes of the early-exit path, from the row (device compile) or compiled here."""
    if "idle_by_opcode" in row:
        return row["idle_by_opcode"]
    from ceilings.compile import compile_launch
    from ceilings.sass import parse_sass
    from kernels.moe_bench import describe_launch

    ops: dict[str, float] = {}
    for ins in parse_sass(compile_launch(describe_launch(spec, config)).sass)["fused_moe_kernel"].instructions:
        ops[ins.opcode] = ops.get(ins.opcode, 0) + 1
        if ins.opcode == "EXIT":
            break
    return ops


def predicted_pipes(row: dict, idle_ops: dict[str, float]) -> dict[str, float]:
    from ceilings.sass import PIPE_OF_OPCODE

    warps = int(row["config"].split(" w")[1].split()[0])
    idle_warps = (row["ctas"] - row["active_ctas"]) * warps
    out: dict[str, float] = {}
    for ops, scale in ((row["by_opcode_active"], 1.0), (idle_ops, idle_warps)):
        for op, count in ops.items():
            pipe = PIPE_OF_OPCODE.get(op, "other")
            out[pipe] = out.get(pipe, 0.0) + count * scale * NCU_COUNT.get(op, 1)
    return out


def compare(predicted_path: Path, ncu_csv: Path, fit_launches: int = 12) -> str:
    import gzip

    def text(path: Path) -> str:
        return gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text()

    predicted = json.loads(text(predicted_path))
    lines = [line for line in text(ncu_csv).splitlines(keepends=True) if line.startswith('"')]
    measured: dict[int, dict[str, float]] = {}
    for r in csv.DictReader(lines):
        metric = r["Metric Name"]
        name = metric[len("sm__inst_executed_pipe_"):].removesuffix(".sum")
        if not metric.startswith("sm__inst_executed_pipe_") or name not in NCU_PIPES:
            continue
        per_launch = measured.setdefault(int(r["ID"]), {})
        per_launch[NCU_PIPES[name]] = per_launch.get(NCU_PIPES[name], 0) + float(r["Metric Value"].replace(",", ""))
    ids = sorted(measured)
    specs = launches()
    table = ["| # | set | shape | M | GEMM | config | weights | " + " | ".join(PIPES) + " |",
             "|---|---|---|---|---|---|---|" + "---|" * len(PIPES)]
    score = {"fit": [0, 0], "held-out": [0, 0]}
    per_pipe = {p: [0, 0] for p in PIPES}
    for i, row in enumerate(predicted[: len(ids)]):
        spec, config = specs[i]
        got = measured[ids[i]]
        pred = predicted_pipes(row, _idle_opcodes(row, spec, config))
        part = "fit" if i < fit_launches else "held-out"
        cells = []
        for pipe in PIPES:
            n = got.get(pipe, 0.0)
            if n < 1000:  # too few to compare (e.g. no TMA in a pointer-load launch)
                cells.append("-")
                continue
            ratio = pred.get(pipe, 0.0) / n
            ok = abs(ratio - 1) <= 0.10
            score[part][0] += ok
            score[part][1] += 1
            per_pipe[pipe][0] += ok
            per_pipe[pipe][1] += 1
            cells.append(f"{ratio:.2f}" if ok else f"**{ratio:.2f}**")
        weights = "tma" if row["b_tma"] else "ptr" if row["b_tma"] is False else "auto"
        table.append(f"| {i} | {part} | {row['shape']} | {row['M']} | {row['gemm']} | `{row['config']}` | {weights} | "
                     + " | ".join(cells) + " |")
    summary = [f"\npredicted / ncu per launch and pipeline (bold: off by more than 10%); {len(ids)} launches.",
               "within 10%: " + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in score.items()),
               "by pipeline: " + ", ".join(f"{p} {v[0]}/{v[1]}" for p, v in per_pipe.items() if v[1])]
    return "\n".join(table + summary)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--run", action="store_true")
    mode.add_argument("--predict", action="store_true")
    mode.add_argument("--compare", nargs=2, type=Path, metavar=("PREDICTED_JSON", "NCU_CSV"))
    args = parser.parse_args(argv)
    if args.run:
        run()
    elif args.predict:
        print(json.dumps(predict(), indent=1))
    else:
        print(compare(*args.compare))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
