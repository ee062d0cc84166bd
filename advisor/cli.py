"""The `advisor` command line.

Exit codes: 0 done, 2 a user error (printed as one line on stderr). Data goes to stdout,
progress and diagnostics to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ceilings.errors import AdvisorError


def _tokens(text: str) -> list[int]:
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of token counts") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: token counts must be positive integers, e.g. 1,16,256")
    return values


def _preset_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", required=True, help="model preset, e.g. mixtral-8x7b (see `advisor presets`)")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel size: 1, 2, 4 or 8 (default 1)")


def build_parser() -> argparse.ArgumentParser:
    from advisor import __version__

    parser = argparse.ArgumentParser(
        prog="advisor", description="Ceilings, measurements and config advice for Triton kernels. "
        "The shipped target is a fused Mixture-of-Experts kernel (kernels/fused_moe.py). "
        "`advisor tui FILE` (or `advisor FILE`) opens the interactive TUI on a kernel file.")
    parser.add_argument("--version", action="version", version=f"triton-advisor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("presets", help="list the model presets and their fused-MoE shapes per TP size",
                       description="List the model presets and the fused-MoE GEMM shapes of one rank.")
    p.add_argument("--format", choices=("text", "json"), default="text")

    p = sub.add_parser("configs", help="show the configs the shipped fused-MoE kernel uses for a preset (no GPU)",
                       description="For each token count, the config the shipped fused-MoE kernel takes on a GPU: "
                                   "from a tuned JSON file (this project's kernels/configs or --config-dir) or the "
                                   "default rule. Needs no GPU.")
    _preset_args(p)
    p.add_argument("--gpu", default="NVIDIA H100 80GB HBM3",
                   help="GPU name as torch.cuda.get_device_name() gives it, or a short name (h100, h200)")
    p.add_argument("--tokens", type=_tokens, help="token counts (default: the engines' 18 keys, 1..4096)")
    p.add_argument("--config-dir", help="a folder of engine config files to look in before the shipped ones")
    p.add_argument("--format", choices=("text", "json"), default="text")

    for name, what in (("ceiling", "the per-pipeline ceiling of a launch on a GPU (no GPU needed)"),
                       ("predict", "predicted latency next to the ceiling (no GPU needed)")):
        p = sub.add_parser(name, help=what,
                           description=f"{what[0].upper()}{what[1:]}. TARGET is the shipped kernels/fused_moe.py "
                                       "(--preset, --tokens) or kernels/gemm.py (--shape), a launch JSON file, or "
                                       "any kernel file with --launch. The ceiling is the least time each GPU "
                                       "pipeline needs; the prediction is the XGBoost model of advisor/models on "
                                       "the ceiling's features.")
        _ceiling_args(p)

    p = sub.add_parser("suggest", help="ranked config suggestions per launch, for people and CI (no GPU needed)",
                       description="For each launch of TARGET: the current config, its predicted time, the best "
                                   "config found, the predicted speed-up, the binding pipeline, the headroom to the "
                                   "ceiling and why. TARGET: kernels/fused_moe.py (--preset, --tp, --tokens), a "
                                   "shipped shape kernel (--shape), a launch trace or launch JSON, a kernel file with "
                                   "--trace, or an engine fused-MoE config file (E=..,N=..,device_name=...json). "
                                   "Exit 0: no launch gains more than --min-speedup; 1: some do; 2: an error.")
    _suggest_args(p)
    p.add_argument("--format", choices=("text", "json", "github", "sarif"), default="text")
    p.add_argument("--min-speedup", type=float, default=1.05, help="report launches that gain more (default 1.05)")

    p = sub.add_parser("apply", help="write the suggested configs where they live (diff first, atomic, .bak)",
                       description="Run `advisor suggest` on TARGET and write the best configs of the launches that "
                                   "gain more than --min-speedup: fused-MoE launches into their engine config file "
                                   "(the file read, or a new one in --config-dir / kernels/configs), autotuned "
                                   "kernels into their @triton.autotune list (a minimal edit). Prints the unified "
                                   "diff first; --dry-run stops there. Writes atomically with a .bak; running it "
                                   "again changes nothing.")
    _suggest_args(p)
    p.add_argument("--min-speedup", type=float, default=1.05, help="write launches that gain more (default 1.05)")
    p.add_argument("--dry-run", action="store_true", help="print the diff and write nothing")
    p.add_argument("--verify", action="store_true",
                   help="(GPU) measure each launch before and after; roll the file back if slower or wrong")

    p = sub.add_parser("record", help="run a Python program and capture every Triton launch into a trace",
                       description="Run `python prog.py args` with Triton's launch hooks installed and write every "
                                   "launch (kernel, source line, grid, tensor shapes/dtypes/strides, scalars, "
                                   "constexprs, num_warps, num_stages, GPU), identical launches merged with a count, "
                                   "to a launch trace (docs/trace.md). Exits with the program's exit code.",
                       usage="advisor record [--out TRACE] -- python prog.py [args ...]")
    p.add_argument("--out", default="advisor_trace.json", help="trace file to write (default advisor_trace.json)")
    p.add_argument("program", nargs=argparse.REMAINDER, help="the program and its arguments, after --")

    p = sub.add_parser("calibrate", help="(GPU) measure this GPU's sustained rates for ceilings",
                       description="Microbenchmarks (DRAM read and copy, L2 read, bf16/fp8 tensor, FP32 FMA, XU, "
                                   "empty-kernel launch) timed with CUDA graphs; writes the GPU's calibration file.")
    p.add_argument("--out", help="folder for the calibration file (default $TRITON_ADVISOR_HOME/calibration)")
    p.add_argument("--tune", action="store_true",
                   help="also fine-tune the latency model for this GPU from a short sweep (a few minutes) and "
                        "store it beside the calibration; predictions for this GPU then use it")
    p.add_argument("--sweep", nargs="+", metavar="CSV",
                   help="with --tune: tune from these `advisor collect` CSVs instead (no GPU needed)")
    p.add_argument("--gpu", help="with --sweep: the GPU whose points to tune on (default: the sweeps' only GPU)")
    p.add_argument("--deadline", type=float, default=240.0, help="seconds for the tuning sweep (default 240)")

    p = sub.add_parser("collect", help="(GPU) measure a kernel family over shapes and configs for the dataset",
                       description="Measure (shape x config) points of one shipped kernel family on this GPU: "
                                   "checked against a float32 reference, timed with CUDA graphs, written with "
                                   "registers, spills and shared bytes to OUT/<family>_collect.csv. Resumable: "
                                   "run again with the same options to continue after --deadline.")
    p.add_argument("family", help="moe, gemm, softmax or attention")
    p.add_argument("--out", default="benchmarks/out", help="folder of the CSV (default benchmarks/out)")
    p.add_argument("--shapes", help="moe: preset:tp list; gemm: N:K list; softmax: COLS list; attention: "
                                    "SEQ:HEAD_DIM[:BATCH_HEADS] list (default: the family's standard shapes)")
    p.add_argument("--ms", help="moe: token counts; gemm: M values; softmax: row counts (comma-separated)")
    p.add_argument("--gemms", help="moe: 1, 2 or 1,2 (default 1)")
    p.add_argument("--sample", type=int, help="random configs drawn from the feasible space (default: family's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--deadline", type=float, help="stop measuring after this many seconds (resume later)")
    p.add_argument("--workers", type=int, help="parallel compile workers (default: cores - 1, at most 16)")

    p = sub.add_parser("train", help="train the latency model on measured sweeps",
                       description="Train the XGBoost latency model (target: log measured/ceiling) on sweep CSVs "
                                   "and write it to advisor/models (or --out).")
    p.add_argument("--data", nargs="+", help="sweep CSV files (default: the sweeps in benchmarks/data of the current "
                                             "kernels)")
    p.add_argument("--out", help="folder for the model files (default: advisor/models)")
    p.add_argument("--features-out", metavar="CSV", help="also write every training row's feature row here")

    p = sub.add_parser("tune", help="(GPU) sweep the shipped fused-MoE kernel for a preset; write a config file",
                       description="Sweep configs of the shipped fused-MoE kernel (GEMM1 of the layer, uniform "
                                   "random routing) on this machine's GPU, correctness-checked and timed with CUDA "
                                   "graphs; resumable through --results; writes the best config per token count as "
                                   "an engine JSON file when --write-config is given.")
    _preset_args(p)
    p.add_argument("--tokens", type=_tokens, default=[1, 16, 64, 256, 1024, 4096], help="token counts to tune")
    p.add_argument("--results", default="advisor_tune.csv", help="CSV of every measurement (resumes if present)")
    p.add_argument("--write-config", metavar="DIR", help="write E=..,N=..,device_name=...json into DIR")
    p.add_argument("--sample", type=int, help="N random configs instead of the stratified set")
    p.add_argument("--no-refine", action="store_true", help="skip the GROUP_SIZE_M / num_stages refinement")
    p.add_argument("--deadline", type=float, help="stop measuring after this many seconds (resume later)")
    p.add_argument("--workers", type=int, help="parallel compile workers (default: cores - 1, at most 16)")
    return parser


def _ceiling_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", help="kernels/fused_moe.py, a launch JSON file, or a kernel file with --launch")
    p.add_argument("--kernel", help="the kernel's name in TARGET (needed when the file defines several)")
    p.add_argument("--launch", help="launch JSON for a kernel file TARGET (its arguments, grid and config)")
    p.add_argument("--preset", help="model preset (for the fused-MoE kernel)")
    p.add_argument("--tokens", type=int, help="token count M (for the fused-MoE kernel)")
    p.add_argument("--shape", help="M,N,K for the shipped kernels/gemm.py, ROWS,COLS for kernels/softmax.py, "
                                   "BATCH_HEADS,SEQ,HEAD_DIM for kernels/attention.py")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel size (default 1)")
    p.add_argument("--gemm", type=int, default=1, choices=(1, 2), help="GEMM 1 (w1) or 2 (w2) of the layer")
    p.add_argument("--config", help="engine-entry JSON or a label like 'M64 N128 K64 G8 w4 s3' "
                                    "(default: the config the shipped kernel takes)")
    p.add_argument("--gpu", default="h100", help="GPU name or short name (default h100)")
    p.add_argument("--no-calibration", action="store_true", help="use spec-sheet rates even if calibrated")
    p.add_argument("--compile", action="store_true", help="compile to read shared memory and registers")
    p.add_argument("--format", choices=("text", "json"), default="text")


def _suggest_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", help="kernel file, launch trace, or engine fused-MoE config JSON")
    p.add_argument("--preset", help="model preset for the fused-MoE kernel (see `advisor presets`)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel size (default 1)")
    p.add_argument("--tokens", type=_tokens, help="token counts (default 1,16,64,256,1024,4096)")
    p.add_argument("--shape", action="append", help="a shape of a shipped shape kernel; repeat for several")
    p.add_argument("--trace", help="launch trace (from `advisor record`) for a kernel file TARGET")
    p.add_argument("--kernel", help="only this kernel's launches")
    p.add_argument("--gpu", help="GPU name or short name (default: the trace's or file's GPU, else h100)")
    p.add_argument("--config-dir", help="a folder of engine config files to look in before the shipped ones")
    p.add_argument("--top-k", type=int, default=5, help="suggestions kept per launch (default 5)")
    p.add_argument("--measure", type=int, nargs="?", const=8, default=0, metavar="K",
                   help="(GPU) time the current and top K configs (default K=8) and pick by measurement")
    p.add_argument("--no-confirm", action="store_true",
                   help="skip compiling the finalists for the target GPU (faster; shared memory not confirmed)")


GPU_ALIASES = {"h100": "NVIDIA H100 80GB HBM3", "h100-sxm": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200",
               "h100-pcie": "NVIDIA H100 PCIe", "a100": "NVIDIA A100-SXM4-80GB", "l40s": "NVIDIA L40S"}


def gpu_device_name(name: str) -> str:
    """A short name (h100) to the name torch reports; other names pass through unchanged."""
    return GPU_ALIASES.get(name.strip().lower(), name.strip())


def cmd_presets(args) -> int:
    from kernels.moe_presets import PRESETS, TP_SIZES

    rows = []
    for preset in PRESETS.values():
        for tp in TP_SIZES:
            if preset.intermediate % tp:
                continue
            shape = preset.shape(tp)
            rows.append({"preset": preset.name, "tp": tp, "experts": shape.num_experts, "top_k": shape.top_k,
                         "hidden": shape.hidden, "intermediate_per_rank": shape.intermediate,
                         "gemm1_k_n": [shape.hidden, shape.gemm1_n], "gemm2_k_n": [shape.intermediate, shape.hidden],
                         "dtype": shape.dtype})
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="fused-MoE model presets (one rank's expert layer, bf16)")
    for col in ("preset", "TP", "E", "top-k", "I/rank", "GEMM1 KxN", "GEMM2 KxN"):
        table.add_column(col, justify="left" if col == "preset" else "right", no_wrap=True)
    for r in rows:
        table.add_row(r["preset"], str(r["tp"]), str(r["experts"]), str(r["top_k"]),
                      str(r["intermediate_per_rank"]), "{}x{}".format(*r["gemm1_k_n"]),
                      "{}x{}".format(*r["gemm2_k_n"]))
    Console().print(table)
    return 0


def cmd_configs(args) -> int:
    from pathlib import Path

    from kernels.moe_configs import ENGINE_M_KEYS, config_file_name, get_config
    from kernels.moe_presets import get_preset

    if args.config_dir and not Path(args.config_dir).is_dir():
        raise AdvisorError(f"--config-dir {args.config_dir} is not a folder; give the folder that holds the "
                           "E=..,N=..,device_name=...json files")
    preset = get_preset(args.preset)
    shape = preset.shape(args.tp)
    device = gpu_device_name(args.gpu)
    file_name = config_file_name(shape.num_experts, shape.config_file_n, device)
    rows = []
    for m in args.tokens or ENGINE_M_KEYS:
        config, source = get_config(m, shape.num_experts, shape.config_file_n, shape.top_k, device, args.config_dir)
        rows.append({"tokens": m, "config": config.to_engine_entry(),
                     "source": str(source), "tuned": source.endswith(".json")})
    if args.format == "json":
        print(json.dumps({"preset": preset.name, "tp": args.tp, "gpu": device, "config_file": file_name,
                          "gemm1": shape.gemm1(), "configs": rows}, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    e, top_k, k, n = shape.gemm1()
    table = Table(title=f"{preset.name} TP{args.tp} on {device}: E={e}, top-k {top_k}, GEMM1 K={k} N={n}",
                  caption=_source_caption(rows[0], file_name))
    for col in ("tokens", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "warps", "stages", "source"):
        table.add_column(col, justify="left" if col == "source" else "right")
    for r in rows:
        c = r["config"]
        table.add_row(str(r["tokens"]), *(str(c[key]) for key in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K",
                                                                   "GROUP_SIZE_M", "num_warps", "num_stages")),
                      "tuned file" if r["tuned"] else "default rule")
    Console().print(table)
    return 0


def _source_caption(row: dict, file_name: str) -> str:
    from pathlib import Path

    from kernels.moe_configs import SHIPPED_DIR

    if not row["tuned"]:
        return f"no tuned file {file_name}: default rule"
    folder = Path(row["source"]).parent
    return f"tuned: {file_name} " + ("(shipped)" if folder == SHIPPED_DIR else f"in {folder}")


def cmd_tune(args) -> int:
    import torch

    if not torch.cuda.is_available():
        raise AdvisorError("`advisor tune` measures on a GPU and torch sees none; run it on a CUDA machine, or use "
                           "`advisor configs` to see the shipped configs")
    from advisor import measure, moe_tune
    from kernels.moe_bench import MoEGemmSpec
    from kernels.moe_configs import config_file_name, write_config_file
    from kernels.moe_presets import get_preset

    shape = get_preset(args.preset).shape(args.tp)
    e, top_k, k, n = shape.gemm1()
    specs = [MoEGemmSpec(e, top_k, k, n, m, gemm=1) for m in args.tokens]
    for summary in moe_tune.tune(specs, args.results, sample=args.sample, refine=not args.no_refine,
                                 deadline_s=args.deadline, workers=args.workers,
                                 show_progress=sys.stderr.isatty()):
        print(f"{summary['phase']}: {json.dumps(summary)}", file=sys.stderr)
    table = moe_tune.tuned_table(moe_tune.read_results(args.results), specs)
    for m, config in table.configs.items():
        print(f"M={m}: {config.label()}")
    if args.write_config:
        name = config_file_name(e, shape.config_file_n, measure.gpu_name())
        print("wrote", write_config_file(f"{args.write_config}/{name}", table))
    return 0


def _ceilings(args):
    from advisor import ceiling as ceil

    config = ceil.parse_config(args.config) if args.config else None
    if ceil.is_shipped_moe(args.target):
        if not args.preset or not args.tokens:
            raise AdvisorError(f"{args.target} is the fused-MoE kernel: give --preset and --tokens "
                               "(e.g. --preset mixtral-8x7b --tokens 256)")
        results = [ceil.moe_ceiling(args.preset, args.tokens, args.tp, args.gemm, args.gpu, config,
                                    not args.no_calibration, compile_kernel=args.compile)]
        titles = [f"fused_moe_kernel GEMM{args.gemm}, {args.preset} TP{args.tp}, M={args.tokens}, "
                  f"{results[0].gpu}, {ceil.Config.from_dict(results[0].config).label()}"]
    elif ceil.is_shipped_shape_kernel(args.target):
        results = [ceil.shape_ceiling(args.target, args.shape, args.gpu, config, not args.no_calibration)]
        titles = [f"{results[0].kernel} {args.shape.replace(',', ' x ')}, {results[0].gpu}, "
                  f"{ceil.Config.from_dict(results[0].config).label()}"]
    elif args.target.endswith(".json"):
        results = ceil.launch_ceilings(args.target, args.gpu, not args.no_calibration, kernel=args.kernel)
        titles = [f"{c.kernel} on {c.gpu}, {ceil.Config.from_dict(c.config).label()}" for c in results]
    elif args.target.endswith(".py") and args.launch:
        results = ceil.launch_ceilings(args.launch, args.gpu, not args.no_calibration, args.target, args.kernel)
        titles = [f"{c.kernel} on {c.gpu}, {ceil.Config.from_dict(c.config).label()}" for c in results]
    elif args.target.endswith(".py"):
        from ceilings.compile import load_kernel

        load_kernel(args.target, args.kernel)  # reports a broken file or a missing kernel first
        raise AdvisorError(f"{args.target}: a ceiling needs the launch's shapes; give --launch LAUNCH.json "
                           "(or use the shipped kernels/fused_moe.py with --preset and --tokens)")
    else:
        raise AdvisorError(f"{args.target}: give the shipped kernels/fused_moe.py with --preset/--tokens, a "
                           "launch JSON file, or a kernel file with --launch")
    return results, titles


def cmd_ceiling(args) -> int:
    from advisor import ceiling as ceil

    results, titles = _ceilings(args)
    if args.format == "json":
        docs = [c.to_json() for c in results]
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
        return 0
    for c, title in zip(results, titles, strict=True):
        ceil.render_text(c, title)
    return 0


def cmd_predict(args) -> int:
    from advisor import ceiling as ceil
    from advisor.predict import predict_ceilings

    results, titles = _ceilings(args)
    predictions = predict_ceilings(results)
    if args.format == "json":
        docs = [{**c.to_json(), **{k: v for k, v in p.items() if k != "notes"},
                 "notes": c.notes + p["notes"]} for c, p in zip(results, predictions, strict=True)]
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
        return 0
    for c, p, title in zip(results, predictions, titles, strict=True):
        ceil.render_text(c, title)
        lo, hi = p["predicted_interval_us"]
        print(f"predicted {p['predicted_us']:.2f} us (80% interval {lo:.2f}-{hi:.2f}) against a ceiling of "
              f"{c.ceiling_us:.2f} us: predicted efficiency {c.ceiling_us / p['predicted_us']:.0%}")
        for note in p["notes"]:
            print(f"note: {note}")
    return 0


def _advices(args):
    from advisor.suggest import advise, subjects_for

    if args.top_k < 1:
        raise AdvisorError(f"--top-k {args.top_k}: keep at least one suggestion")
    subjects = subjects_for(args.target, preset=args.preset, tp=args.tp, tokens=args.tokens, shapes=args.shape,
                            trace=args.trace, kernel=args.kernel, gpu=gpu_device_name(args.gpu) if args.gpu else None,
                            config_dir=args.config_dir)
    return advise(subjects, top_k=args.top_k, confirm=not args.no_confirm, measure=args.measure)


def cmd_suggest(args) -> int:
    from advisor import suggest

    if args.min_speedup < 1.0:
        raise AdvisorError(f"--min-speedup {args.min_speedup}: give a factor of at least 1.0, e.g. 1.05")
    advices = _advices(args)
    if args.format == "json":
        print(suggest.to_json(advices, args.min_speedup))
    elif args.format == "github":
        text = suggest.to_github(advices, args.min_speedup)
        if text:
            print(text)
    elif args.format == "sarif":
        print(suggest.to_sarif(advices, args.min_speedup))
    else:
        suggest.render_text(advices, args.min_speedup)
    return 1 if any(suggest.gains(a, args.min_speedup) for a in advices) else 0


def cmd_apply(args) -> int:
    from advisor import apply
    from advisor.suggest import check_fit, plan_apply

    if args.verify and args.dry_run:
        raise AdvisorError("--verify measures the written configs; it cannot run with --dry-run")
    advices = _advices(args)
    check_fit([a for a in advices if a.gains(args.min_speedup)])
    edits = [e for e in plan_apply(advices, args.config_dir, args.min_speedup) if e.changed]
    if not edits:
        print("nothing to change: every launch already has its best config (or gains too little)")
        return 0
    for edit in edits:
        print(edit.diff(), end="" if edit.diff().endswith("\n") else "\n")
    if args.dry_run:
        print(f"dry run: {len(edits)} file(s) not written", file=sys.stderr)
        return 0
    written = []
    for edit in edits:
        backup = apply.write(edit)
        written.append((edit, backup))
        print(f"wrote {edit.path}" + (f" (backup {backup})" if backup else ""), file=sys.stderr)
    if args.verify:
        return _verify(advices, written, args.min_speedup)
    return 0


def _verify(advices, written, min_speedup: float) -> int:
    """Measure each changed launch with its old and new config; restore the files if any is slower or wrong."""
    import os

    from advisor import apply
    from advisor.measure import MeasurementError

    bad = []
    for a in advices:
        if not a.gains(min_speedup):
            continue
        run = a.subject.measurer()
        before = run(a.current.config)
        try:
            after = run(a.best.config)
        except MeasurementError as exc:
            bad.append(f"{a.subject.label}: {exc}")
            continue
        print(f"{a.subject.label}: {before:.1f} us -> {after:.1f} us ({before / after:.2f}x measured)")
        if after > before:
            bad.append(f"{a.subject.label}: slower after ({after:.1f} us vs {before:.1f} us)")
    if not bad:
        return 0
    for edit, backup in written:
        if backup:
            apply.rollback(edit.path, backup)
        elif edit.before is None:
            os.unlink(edit.path)
    print("rolled back: " + "; ".join(bad), file=sys.stderr)
    return 1


def cmd_record(args) -> int:
    from advisor.record import record_main

    program = list(args.program)
    if program and program[0] == "--":
        program = program[1:]
    if not program:
        raise AdvisorError("give the program to run after --, e.g. advisor record -- python prog.py")
    return record_main(program, args.out)


def cmd_calibrate(args) -> int:
    from advisor.calibrate import calibrate, short_sweep, tune_model

    if args.sweep and not args.tune:
        raise AdvisorError("--sweep goes with --tune (fine-tune the latency model from those sweeps)")
    if args.tune and args.sweep:
        folder = tune_model(args.sweep, gpu_device_name(args.gpu) if args.gpu else None,
                            Path(args.out) / "model" if args.out else None)
        print(f"tuned model -> {folder}", file=sys.stderr)
        return 0
    calibration, path = calibrate(args.out)
    if args.tune:
        sweeps = short_sweep(path.parent / (path.stem + ".sweep"), args.deadline)
        try:
            import xgboost  # noqa: F401
        except ImportError:
            raise AdvisorError("fine-tuning needs XGBoost, which is not installed here; the sweep is kept: run "
                               f"`advisor calibrate --tune --sweep {' '.join(map(str, sweeps))}` where it is") from None
        folder = tune_model(sweeps, calibration.gpu, Path(args.out) / "model" if args.out else None)
        print(f"tuned model -> {folder}", file=sys.stderr)
    print(json.dumps(calibration.values, indent=2))
    print("wrote", path, file=sys.stderr)
    return 0


def cmd_collect(args) -> int:
    from advisor.collect import collect

    summary = collect(args.family, args.out, shapes=args.shapes, ms=args.ms, sample=args.sample, seed=args.seed,
                      gemms=args.gemms, deadline_s=args.deadline, workers=args.workers,
                      show_progress=sys.stderr.isatty())
    print("collect:", json.dumps(summary))
    return 0


def cmd_train(args) -> int:
    import glob

    from advisor.predict import MODEL_DIR, load_sweeps, train

    # Default: every sweep of the current kernels (files of the previous MoE kernel version say kernel_v1;
    # the ncu files are instruction counts, not timings).
    files = args.data or sorted(f for f in glob.glob("benchmarks/data/*.csv.gz")
                                if not any(tag in f for tag in ("kernel_v1", "ncu", "features")))
    if not files:
        raise AdvisorError("no sweep data found; give --data FILE... (sweep CSVs from `advisor tune` or "
                           "benchmarks/moe_sweep.py)")
    data = load_sweeps(files)
    if args.features_out:
        print(f"feature rows -> {data.write_features(args.features_out)}", file=sys.stderr)
    model = train(data)
    folder = model.save(args.out or MODEL_DIR)
    print(f"trained on {len(data)} rows ({len(set(data.group))} shapes, {', '.join(sorted(set(data.gpu)))}) "
          f"from {len(files)} files -> {folder}")
    return 0


COMMANDS = {"presets": cmd_presets, "configs": cmd_configs, "ceiling": cmd_ceiling, "predict": cmd_predict,
            "calibrate": cmd_calibrate, "collect": cmd_collect, "suggest": cmd_suggest, "apply": cmd_apply,
            "record": cmd_record,
            "train": cmd_train, "tune": cmd_tune}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except AdvisorError as exc:
        print(f"advisor: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("advisor: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader (e.g. `| head`) went away: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
