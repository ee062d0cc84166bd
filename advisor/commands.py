"""The `advisor` commands: each reads its parsed arguments, calls the advisor and prints (text or JSON).

Raises AdvisorError for user errors; `advisor.cli.main` turns it into one line on stderr and exit 2.

About 500 lines, one short function per command (14 of them), each checking its own arguments the same
way; the work itself lives in the room whose job it is. Split it by command group when it grows further.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from ceilings.errors import AdvisorError

GPU_ALIASES = {"h100": "NVIDIA H100 80GB HBM3", "h100-sxm": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200",
               "h100-pcie": "NVIDIA H100 PCIe", "a100": "NVIDIA A100-SXM4-80GB", "l40s": "NVIDIA L40S"}


def gpu_device_name(name: str) -> str:
    """A short name (h100) to the name torch reports; other names pass through unchanged."""
    return GPU_ALIASES.get(name.strip().lower(), name.strip())



def _command_gpu(args):
    """The GPU of the ceiling, predict and diagnose commands: --gpu, else the trace's, else this machine's, else
    the H100 (`advisor.advice.suggest.default_gpu_name`)."""
    from advisor.advice.suggest import default_gpu_name
    from ceilings.hardware import resolve_gpu

    return resolve_gpu(gpu_device_name(args.gpu) if args.gpu else _trace_gpu(args) or default_gpu_name(),
                       calibrated=not args.no_calibration)


def _require_preset_and_tokens(args, example_tokens: int) -> None:
    """The fused-MoE kernel's launch is named by a model preset and a token count: both are needed."""
    missing = [opt for opt, value in (("--preset", args.preset), ("--tokens", args.tokens)) if value is None]
    if missing:
        raise AdvisorError(f"{args.target} is the fused-MoE kernel: give {' and '.join(missing)} "
                           f"(e.g. --preset mixtral-8x7b --tokens {example_tokens})")

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
    _check_gpu_name(device, [Path(args.config_dir)] if args.config_dir else [], file_name)
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


def _check_gpu_name(device: str, folders: list, file_name: str) -> None:
    """A GPU the advisor models, or one with a tuned file (an engine user's GPU the advisor has no
    numbers for); anything else is a typo, not a GPU to fall back to the default rule on."""
    from ceilings.hardware import get_spec
    from kernels.moe_configs import SHIPPED_DIR

    try:
        get_spec(device)
    except AdvisorError as exc:
        if not any((Path(folder) / file_name).exists() for folder in [*folders, SHIPPED_DIR]):
            raise AdvisorError(f"--gpu {device!r}: {exc} and no tuned file {file_name} exists") from None


def _check_min_speedup(value: float) -> None:
    import math

    if not math.isfinite(value) or value < 1.0:
        raise AdvisorError(f"--min-speedup {value}: give a finite factor of at least 1.0, e.g. 1.05")


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
    from advisor.measure import moe_tune
    from advisor.measure import timing as measure
    from kernels.moe_bench import MoEGemmSpec
    from kernels.moe_configs import config_file_name, meta_path, write_config_file
    from kernels.moe_presets import get_preset

    shape = get_preset(args.preset).shape(args.tp)
    e, top_k, k, n = shape.gemm1()
    specs = [MoEGemmSpec(e, top_k, k, n, m, gemm=1) for m in args.tokens]
    from advisor.measure.spread import visible_gpus

    for summary in moe_tune.tune(specs, args.results, sample=args.sample, refine=not args.no_refine,
                                 deadline_s=args.deadline, workers=args.workers,
                                 show_progress=sys.stderr.isatty(), gpus=visible_gpus(args.gpus)):
        print(f"{summary['phase']}: {json.dumps(summary)}", file=sys.stderr)
    rows = moe_tune.read_results(args.results)
    table = moe_tune.tuned_table(rows, specs)
    for m, config in table.configs.items():
        print(f"M={m}: {config.label()}")
    if args.write_config:
        device = measure.gpu_name()
        path = Path(args.write_config) / config_file_name(e, shape.config_file_n, device)
        # Token counts only in the engines' file; the timings and Triton version in its side file.
        meta = moe_tune.tuned_meta(rows, specs, device, source=str(args.results))
        print("wrote", write_config_file(path, table, meta), "and", meta_path(path))
    return 0


def _ceilings(args):
    """(ceilings, their titles, the GPU) of the ceiling and predict commands, their compiles shown on a
    terminal's stderr as they run."""
    from advisor.advice.compile_pool import reporting

    with compile_progress() as progress, reporting(progress):
        return _ceilings_of(args)


def _ceilings_of(args):
    from advisor.advice import ceiling as ceil
    from advisor.advice import moe
    from kernels.family import family_of_file

    gpu = _command_gpu(args)
    family = family_of_file(args.target) if args.target.endswith(".py") else None
    config = ceil.parse_config(args.config, family) if args.config else None
    if family is not None and moe.is_layer_kernel(args.target):
        _require_preset_and_tokens(args, 256)
        results = [moe.gemm_ceiling(args.preset, args.tokens, args.tp, args.gemm, gpu, config,
                                    compile_kernel=args.compile)]
        titles = [f"{family.kernel} GEMM{args.gemm}, {args.preset} TP{args.tp}, M={args.tokens}, "
                  f"{results[0].gpu}, {ceil.Config.from_dict(results[0].config).label()}"]
    elif family is not None and family.read_shape is not None:
        results = [ceil.family_ceiling(args.target, args.shape, gpu, config, compile_kernel=args.compile)]
        titles = [f"{results[0].kernel} {args.shape.replace(',', ' x ')}, {results[0].gpu}, "
                  f"{ceil.Config.from_dict(results[0].config).label()}"]
    elif config is not None and (configured := _configured_ceilings(args, gpu, config)) is not None:
        results, titles = configured
    elif args.target.endswith(".json"):
        results = ceil.launch_ceilings(args.target, gpu, kernel=args.kernel)
        titles = [f"{c.kernel} on {c.gpu}, {ceil.Config.from_dict(c.config).label()}" for c in results]
    elif args.target.endswith(".py") and args.call:
        results = ceil.call_ceilings(args.target, args.call, gpu, args.kernel)
        titles = [f"{c.kernel} on {c.gpu}, current config {ceil.Config.from_dict(c.config).label()}" for c in results]
    elif args.target.endswith(".py") and args.launch:
        results = ceil.launch_ceilings(args.launch, gpu, args.target, args.kernel)
        titles = [f"{c.kernel} on {c.gpu}, {ceil.Config.from_dict(c.config).label()}" for c in results]
    elif args.target.endswith(".py"):
        from advisor.capture.trace import kernel_name
        from ceilings.compile import load_kernel

        load_kernel(args.target, kernel_name(args.kernel))  # reports a broken file or a missing kernel first
        raise AdvisorError(f"{args.target}: a ceiling needs the launch's shapes; give --launch LAUNCH.json "
                           "(or use the shipped kernels/fused_moe.py with --preset and --tokens)")
    else:
        raise AdvisorError(f"{args.target}: give the shipped kernels/fused_moe.py with --preset/--tokens, a "
                           "launch JSON file, or a kernel file with --launch")
    return results, titles, gpu


def _trace_gpu(args) -> str | None:
    """The GPU a launch trace given to ceiling/predict names (as `suggest` reads it), when it names one."""
    from advisor.capture.trace import read_trace

    path = args.launch if args.target.endswith(".py") else args.target
    if not path or not str(path).endswith(".json") or not Path(path).is_file():
        return None
    return read_trace(path).gpu or None


def cmd_ceiling(args) -> int:
    from advisor.advice import ceiling as ceil

    results, titles, _ = _ceilings(args)
    if args.format == "json":
        docs = [c.to_json(detail=args.detail) for c in results]
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
        return 0
    for c, title in zip(results, titles, strict=True):
        ceil.render_text(c, title)
    return 0


def cmd_predict(args) -> int:
    from advisor.advice import ceiling as ceil
    from advisor.model.predict import predict_ceilings

    results, titles, gpu = _ceilings(args)
    predictions = predict_ceilings(results, gpu=gpu)
    if args.format == "json":
        docs = [{**c.to_json(), **{k: v for k, v in p.items() if k != "notes"},
                 "notes": c.notes + p["notes"]} for c, p in zip(results, predictions, strict=True)]
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
        return 0
    for c, p, title in zip(results, predictions, titles, strict=True):
        lo, hi = p["predicted_interval_us"]
        line = (f"predicted {p['predicted_us']:.2f} us (80% interval {lo:.2f}-{hi:.2f}) against a ceiling of "
                f"{c.ceiling_us:.2f} us: predicted efficiency {c.ceiling_us / p['predicted_us']:.0%}")
        ceil.render_text(c, title, prediction=line, more_caveats=p["notes"])
    return 0


def _generic_subjects(args, gpu):
    """The launches of a launch JSON file, or of a kernel file with --call or --launch (any kernel: the generic
    path); None for another target."""
    from advisor.advice.suggest import subjects_for, trace_subjects

    if args.target.endswith(".json"):
        return trace_subjects(args.target, gpu, kernel=args.kernel)
    if args.target.endswith(".py") and args.call:
        return subjects_for(args.target, call=args.call, kernel=args.kernel, gpu=gpu)
    if args.target.endswith(".py") and args.launch:
        return trace_subjects(args.launch, gpu, args.target, args.kernel)
    return None


def _configured_ceilings(args, gpu, config):
    """Each launch's ceiling at --config (its grid from the launch rule, as `suggest` evaluates configs), for a
    generic target; None for another target."""
    from advisor.advice import ceiling as ceil
    from ceilings.validate import require_runnable

    subjects = _generic_subjects(args, gpu)
    if subjects is None:
        return None
    results, titles = [], []
    for s in subjects:
        fitted = ceil.fit_config(config, s.current, s.kernel, args.config)
        require_runnable(fitted, s.spec, s.precheck, s.label)
        (c,) = s.ceilings([fitted])
        require_runnable(fitted, s.spec, None, s.label, c)
        results.append(c)
        titles.append(f"{c.kernel} on {c.gpu}, {fitted.label()} (--config)")
    return results, titles


def _diagnose_subjects(args, gpu):
    """The launches `advisor diagnose` takes from its target, as `advisor ceiling` reads it, and the --config."""
    from advisor.advice import ceiling as ceil
    from advisor.advice import moe
    from advisor.advice.subjects import FamilySubject
    from kernels.family import family_of_file

    family = family_of_file(args.target) if args.target.endswith(".py") else None
    config = ceil.parse_config(args.config, family) if args.config else None
    if family is not None and moe.is_layer_kernel(args.target):
        _require_preset_and_tokens(args, 1024)
        subject = moe.gemm_subject(args.preset, args.tokens, args.tp, args.gemm, gpu, config)
        return [_variant_subject(subject, args.variant)], config
    if args.variant != "previous" or args.compare_variant:
        raise AdvisorError(f"--variant names a fused-MoE kernel variant: give kernels/fused_moe.py with --preset and "
                           f"--tokens, not {args.target}")
    if family is not None and family.read_shape is not None:
        if not args.shape:
            raise AdvisorError(f"{args.target}: give --shape {family.shape_form}")
        return [FamilySubject(family, family.read_shape(args.shape), gpu, config)], config
    subjects = _generic_subjects(args, gpu)
    if subjects is not None:
        return subjects, (ceil.fit_config(config, subjects[0].current, subjects[0].kernel, args.config)
                          if config else None)
    raise AdvisorError(f"{args.target}: give the shipped kernels/fused_moe.py with --preset/--tokens, a shipped shape "
                       "kernel with --shape, a launch JSON file, or a kernel file with --launch or --call")


def _variant_subject(subject, variant: str):
    """The fused-MoE GEMM `subject` run by a kernel variant (kernels/moe_fused_demand.py)."""
    from advisor.advice.subjects import FamilySubject
    from kernels.moe_fused_demand import variant_spec

    shape = variant_spec(subject.shape, variant, subject.gpu.spec.sms)
    if shape == subject.shape:
        return subject
    label = subject.label.split(" [")[0] + ("" if variant == "previous" else f" [{variant}]")
    return FamilySubject(subject.family, shape, subject.gpu, subject.current, label, subject.location)


def cmd_diagnose(args) -> int:
    import math

    from advisor.advice.diagnose import diagnose, render_lines

    if args.measured is not None and not (math.isfinite(args.measured) and args.measured > 0):
        raise AdvisorError(f"--measured {args.measured}: give the launch's time in microseconds, e.g. --measured 518")
    if args.measured is not None and args.measure:
        raise AdvisorError("give --measured US or --measure, not both")
    if args.measure:
        import torch

        if not torch.cuda.is_available():
            raise AdvisorError("--measure times the launch on a GPU and torch sees none; give --measured US (a time "
                               "measured elsewhere), or drop it for the predicted time")
    gpu = _command_gpu(args)
    subjects, config = _diagnose_subjects(args, gpu)
    if args.measured is not None and len(subjects) > 1:
        raise AdvisorError(f"{args.target} has {len(subjects)} launches and --measured is one time; pick one with "
                           "--kernel NAME (NAME#2 for a kernel's second launch)")
    if args.compare or args.compare_measured is not None or args.compare_variant:
        return _diagnose_compare(args, subjects, config)
    results = []
    for s in subjects:
        cfg = config or s.current
        time_us = args.measured if args.measured is not None else s.measurer()(cfg) if args.measure else None
        results.append(diagnose(s, cfg, time_us))
    if args.format == "json":
        docs = [d.to_json() for d in results]
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
        return 0
    for i, d in enumerate(results):
        print(("\n" if i else "") + "\n".join(render_lines(d)))
    return 0


def _diagnose_compare(args, subjects, config) -> int:
    """`advisor diagnose --compare CONFIG`: the launch at --config (before) and at CONFIG (after)."""
    import math

    from advisor.advice import ceiling as ceil
    from advisor.advice.diagnose import diagnose
    from advisor.advice.diagnose_compare import compare, render_compare
    from kernels.family import family_of_file

    if not args.compare and not args.compare_variant:
        raise AdvisorError("--compare-measured US is the time of --compare CONFIG: give the config too")
    after_us = args.compare_measured
    if after_us is not None and not (math.isfinite(after_us) and after_us > 0):
        raise AdvisorError(f"--compare-measured {after_us}: give the second config's time in microseconds")
    if len(subjects) > 1:
        raise AdvisorError(f"{args.target} has {len(subjects)} launches and --compare takes one; pick one with "
                           "--kernel")
    (s,) = subjects
    family = family_of_file(args.target) if args.target.endswith(".py") else None
    before_cfg = config or s.current
    after_cfg = ceil.parse_config(args.compare, family) if args.compare else before_cfg
    # The after side's kernel: another variant of the fused-MoE GEMM (its subject from the same launch).
    after = _variant_subject(s, args.compare_variant) if args.compare_variant else s
    measure = s.measurer() if args.measure else None
    before_us = args.measured if args.measured is not None else measure(before_cfg) if measure else None
    if after_us is None and args.measure:
        after_us = after.measurer()(after_cfg)
    cmp = compare(diagnose(s, before_cfg, before_us), diagnose(after, after_cfg, after_us))
    if args.format == "json":
        print(json.dumps(cmp.to_json(), indent=2))
    else:
        print("\n".join(render_compare(cmp)))
    return 0


def _advices(args):
    from advisor.advice.suggest import advise, subjects_for
    from ceilings.hardware import resolve_gpu

    if args.top_k < 1:
        raise AdvisorError(f"--top-k {args.top_k}: keep at least one suggestion")
    if args.measure < 0:
        raise AdvisorError(f"--measure {args.measure}: give how many configs to time (1 or more), or leave it out")
    if args.measure:
        import torch

        if not torch.cuda.is_available():
            raise AdvisorError(f"--measure {args.measure} times configs on a GPU and torch sees none; run it on a "
                               "CUDA machine, or drop --measure for predictions")
    if args.config_dir and not Path(args.config_dir).is_dir():
        raise AdvisorError(f"--config-dir {args.config_dir} is not a folder; give the folder that holds (or will "
                           "hold) the E=..,N=..,device_name=...json files")
    _check_min_speedup(args.min_speedup)
    gpu = resolve_gpu(gpu_device_name(args.gpu)) if args.gpu else None  # else the target's own GPU (or h100)
    subjects = subjects_for(args.target, preset=args.preset, tp=args.tp, tokens=args.tokens, shapes=args.shape,
                            trace=args.trace, kernel=args.kernel, gpu=gpu, config_dir=args.config_dir,
                            call=args.call)
    with compile_progress() as progress:
        return advise(subjects, top_k=args.top_k, confirm=not args.no_confirm, measure=args.measure,
                      progress=progress)


def stderr_is_terminal() -> bool:
    """Whether a person watches stderr (a progress display is for them, never for a log or a pipe)."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


@contextlib.contextmanager
def compile_progress():
    """A progress bar of the compiles on stderr when it is a terminal (rich), else nothing, so that piped
    and CI output stays byte for byte what it was: yields the `progress(done, total, what)` callable for
    advisor.advice.compile_pool, or None."""
    if not stderr_is_terminal():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        tasks: dict[str, object] = {}

        def progress(done: int, total: int, what: str) -> None:
            if what not in tasks:
                tasks[what] = bar.add_task(what, total=total)
            bar.update(tasks[what], completed=done, total=total)

        yield progress


def cmd_suggest(args) -> int:
    from advisor.advice import report

    advices = _advices(args)
    if args.format == "json":
        print(report.to_json(advices, args.min_speedup))
    elif args.format == "github":
        text = report.to_github(advices, args.min_speedup)
        if text:
            print(text)
    elif args.format == "sarif":
        print(report.to_sarif(advices, args.min_speedup))
    else:
        report.render_text(advices, args.min_speedup)
    return 1 if any(report.is_finding(a, args.min_speedup) for a in advices) else 0


def cmd_apply(args) -> int:
    from advisor.advice import apply
    from advisor.advice.suggest import check_fit, plan_apply

    if args.verify and args.dry_run:
        raise AdvisorError("--verify measures the written configs; it cannot run with --dry-run")
    if args.verify:
        import torch

        if not torch.cuda.is_available():  # before anything is written: --verify's rollback needs a GPU
            raise AdvisorError("--verify measures each launch on a GPU and torch sees none; run it on a CUDA "
                               "machine, or drop --verify (the .bak keeps the old file)")
    advices = _advices(args)
    check_fit([a for a in advices if a.gains(args.min_speedup)])
    by_hand: list = []  # configs for autotune lists built by code: what a person adds (advice.autotune_hand)
    edits = [e for e in plan_apply(advices, args.config_dir, args.min_speedup, args.force_gpu, by_hand,
                                   close_calls=args.verify) if e.changed]
    for hand in by_hand:
        print(hand.text())
    # Exit 1 while a hand edit is left to do: the suggestion is not in the file yet.
    left = 1 if by_hand else 0
    if not edits:
        if not by_hand:
            print("nothing to change: every launch already has its best config (or gains too little)")
        return left
    for edit in edits:
        print(edit.diff(), end="" if edit.diff().endswith("\n") else "\n")
    if args.dry_run:
        print(f"dry run: {len(edits)} file(s) not written", file=sys.stderr)
        return left
    for edit in edits:  # every file writable before the first is written
        apply.check_writable(edit)
    written = []
    try:
        for edit in edits:
            backup = apply.write(edit)
            written.append((edit, backup))
            print(f"wrote {edit.path}" + (f" (backup {backup})" if backup else ""), file=sys.stderr)
    except AdvisorError as exc:
        if not written:
            raise
        _restore(written)
        raise AdvisorError(f"{exc} (the {len(written)} file(s) written before it were restored)") from None
    if args.verify:
        return _verify(advices, written, args.min_speedup) or left
    return left


def _restore(written) -> None:
    """Undo `apply.write`s: each file back from its .bak, a file it created removed."""
    import os

    from advisor.advice import apply

    for edit, backup in written:
        if backup:
            apply.rollback(edit.path, backup)
        elif edit.before is None:
            os.unlink(edit.path)


def _verify(advices, written, min_speedup: float) -> int:
    """Measure each changed launch with its old and new config; restore the files if any is slower or wrong."""
    from advisor.advice.search import record_timings, record_wrong
    from advisor.measure.timing import MeasurementError, WrongResult

    bad = []
    for a in advices:
        if not a.gains(min_speedup):
            continue
        run = a.subject.measurer()
        before = run(a.current.config)
        try:
            after = run(a.best.config)
        except MeasurementError as exc:
            if isinstance(exc, WrongResult):  # not suggested again for this launch on this GPU
                record_wrong(a.subject, a.best.config)
            bad.append(f"{a.subject.label}: {exc}")
            continue
        record_timings(a.subject, [(a.current, before), (a.best, after)])
        print(f"{a.subject.label}: {before:.1f} us -> {after:.1f} us ({before / after:.2f}x measured)")
        if after > before:
            bad.append(f"{a.subject.label}: slower after ({after:.1f} us vs {before:.1f} us)")
    if not bad:
        return 0
    _restore(written)
    print("rolled back: " + "; ".join(bad), file=sys.stderr)
    return 1


def cmd_record(args) -> int:
    from advisor.capture.record import record_main

    program = list(args.program)
    if program and program[0] == "--":
        program = program[1:]
    else:
        # Without `--`, everything from the first word on is the program's: record's own options written
        # after FILE (`advisor record kernel.py --call EXPR`) would be run as the program's arguments and
        # record nothing the user asked for.
        misplaced = [a for a in program[1:] if a.split("=")[0] in ("--call", "--out", "--no-gpu", "--gpu")]
        if misplaced:
            raise AdvisorError(f"{misplaced[0].split('=')[0]} comes after {program[0]}, where it "
                               "would go to the program; put record's options first (advisor record --out TRACE "
                               "--call EXPR FILE), or pass a program's own options after -- (advisor record -- "
                               "python prog.py --out X)")
    if args.call:
        from advisor.capture.call import record_call

        if len(program) != 1:
            raise AdvisorError("advisor record --call EXPR FILE: give the one kernel file whose host code the call "
                               "names, e.g. advisor record --call \"matmul(randn(64, 64, f16), randn(64, 64, f16))\" "
                               "matmul.py")
        from advisor.advice.stores import stored_outputs

        print(record_call(program[0], args.call, args.out, args.gpu, stored_outputs), file=sys.stderr)
        return 0
    if args.gpu and not args.no_gpu:
        raise AdvisorError("--gpu names the GPU a capture without one answers for; add --no-gpu (or use --call)")
    if not program:
        raise AdvisorError("give the program to run after --, e.g. advisor record -- python prog.py")
    return record_main(program, args.out, no_gpu=(args.gpu or "h100") if args.no_gpu else None)


def cmd_calibrate(args) -> int:
    from advisor.measure.calibrate import calibrate, short_sweep, tune_model

    if args.kernel:
        return _calibrate_kernel(args)
    if args.call or args.trace:
        raise AdvisorError("--call and --trace go with --kernel FILE (calibrate the model for that kernel)")
    if args.sweep and not args.tune:
        raise AdvisorError("--sweep goes with --tune (fine-tune the latency model from those sweeps)")
    if args.tune and args.sweep:
        from advisor.model.predict import require_xgboost

        require_xgboost("`advisor calibrate --tune`")
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
            from advisor.model.predict import INSTALL_XGBOOST

            raise AdvisorError(f"fine-tuning needs XGBoost, which is not installed here ({INSTALL_XGBOOST}); the "
                               f"sweep is kept: run `advisor calibrate --tune --sweep {' '.join(map(str, sweeps))}` "
                               "where it is") from None
        folder = tune_model(sweeps, calibration.gpu, Path(args.out) / "model" if args.out else None)
        print(f"tuned model -> {folder}", file=sys.stderr)
    print(json.dumps(calibration.values, indent=2))
    print("wrote", path, file=sys.stderr)
    return 0


def _calibrate_kernel(args) -> int:
    """`advisor calibrate --kernel FILE --call EXPR | --trace TRACE`: the kernel's adaptive sweep."""
    from advisor.advice.kernel_sweep import MAX_CONFIGS, MIN_CONFIGS, sweep
    from advisor.advice.search import kernel_timings
    from advisor.advice.suggest import subjects_for
    from ceilings.hardware import resolve_gpu

    if args.tune or args.sweep:
        raise AdvisorError("--kernel calibrates the model for one kernel; --tune/--sweep fine-tune it for the GPU: "
                           "run them separately")
    if not (args.call or args.trace):
        raise AdvisorError(f"--kernel {args.kernel}: give its launches with --call \"FUNCTION(ARGS)\" or --trace "
                           "TRACE.json")
    if not MIN_CONFIGS <= args.configs <= MAX_CONFIGS:
        raise AdvisorError(f"--configs {args.configs}: give {MIN_CONFIGS} to {MAX_CONFIGS} configs to time per launch")
    import torch

    if not torch.cuda.is_available():
        raise AdvisorError("`advisor calibrate --kernel` times configs on a GPU and torch sees none; run it on a "
                           "CUDA machine")
    from advisor.measure import timing as measure

    gpu = resolve_gpu(gpu_device_name(args.gpu) if args.gpu else measure.gpu_name())
    subjects = subjects_for(args.kernel, trace=args.trace, call=args.call, gpu=gpu)
    report = []
    for subject in subjects:
        steps = sweep(subject, args.configs, progress=lambda line: print(line, file=sys.stderr))
        timings = kernel_timings(subject)
        correction = timings.correction() if timings else None
        report.append({"launch": subject.label, "gpu": subject.spec.name,
                       "timed": [{"config": c.to_dict(), "predicted_us": round(p, 3), "measured_us": round(m, 3)}
                                 for c, p, m in steps],
                       "points": len(timings.points) if timings else 0,
                       "offset": None if correction is None else round(correction.offset, 4),
                       "slope": None if correction is None else round(correction.slope, 4),
                       "stored": str(timings.path) if timings else None})
    print(json.dumps(report[0] if len(report) == 1 else report, indent=2))
    return 0


def cmd_collect(args) -> int:
    from advisor.measure.collect import collect
    from advisor.measure.spread import visible_gpus

    summary = collect(args.family, args.out, shapes=args.shapes, ms=args.ms, sample=args.sample, seed=args.seed,
                      gemms=args.gemms, deadline_s=args.deadline, workers=args.workers,
                      show_progress=sys.stderr.isatty(), gpus=visible_gpus(args.gpus))
    print("collect:", json.dumps(summary))
    return 0


def cmd_train(args) -> int:
    import glob

    from advisor.model.dataset import load_sweeps
    from advisor.model.predict import MODEL_DIR, require_xgboost, train

    require_xgboost("`advisor train`")

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
