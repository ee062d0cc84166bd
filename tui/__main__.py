"""`advisor tui FILE` (also `advisor FILE`, `python -m tui FILE`): the options of the TUI, checked before the
screen opens (`run`), then the app (tui.app)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ceilings.errors import AdvisorError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="advisor tui", description="Open a Triton kernel file in the advisor's TUI: "
                                "its kernels and launches, source, ceiling and ranked config suggestions.")
    p.add_argument("file", help="a Python file with Triton kernels (e.g. kernels/fused_moe.py)")
    p.add_argument("--trace", help="a launch trace (`advisor record`) or launch JSON for the file's kernels")
    p.add_argument("--gpu", help="GPU name or short name (default: this machine's GPU, else h100)")
    p.add_argument("--dry-run", action="store_true", help="show the diff of an apply and write nothing")
    p.add_argument("--preset", help="fused-MoE model preset to list (default: every preset)")
    p.add_argument("--tp", type=int, help="tensor-parallel size for the presets (default: the smallest tuned one)")
    p.add_argument("--shape", action="append", help="a launch shape of a shipped shape kernel (repeatable)")
    p.add_argument("--call", help="a call of the file's host code whose launches to open with, as `advisor suggest "
                                  "--call` takes it (the same as typing it in the form)")
    p.add_argument("--config-dir", help="a folder of engine config files the fused-MoE launches read first")
    p.add_argument("--top-k", type=int, default=5, help="suggestions per launch (default 5)")
    p.add_argument("--no-confirm", action="store_true",
                   help="rank by prediction only; skip compiling the finalists for the GPU's arch")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.top_k < 1:
        print(f"advisor: error: --top-k {args.top_k}: keep at least one suggestion", file=sys.stderr)
        return 2
    return run(args.file, trace=args.trace, gpu=args.gpu, dry_run=args.dry_run, preset=args.preset, tp=args.tp,
               shapes=args.shape, confirm=not args.no_confirm, top_k=args.top_k,
               config_dir=args.config_dir, call=args.call)


def run(path, trace=None, gpu=None, dry_run=False, preset=None, tp=None, shapes=None, *, confirm: bool = True,
        top_k: int = 5, config_dir: str | None = None, call: str | None = None) -> int:
    """Open the TUI on a kernel file; the exit code (2: a file or GPU that cannot be used, one line on stderr).
    `gpu` None: this machine's GPU, else the H100 (`advisor.advice.suggest.default_gpu_name`)."""
    from advisor.advice.suggest import default_gpu_name
    from ceilings.hardware import get_spec
    from tui.launches import read_source

    try:
        read_source(path)
        gpu = gpu or default_gpu_name()
        get_spec(gpu)
        if preset or tp is not None:
            from kernels.moe_presets import TP_SIZES, get_preset

            if tp is not None and tp not in TP_SIZES:
                raise AdvisorError(f"--tp {tp}: the tensor-parallel size must be one of {TP_SIZES}")
            if preset:
                get_preset(preset).shape(tp or 1)
        if trace and not Path(trace).is_file():
            raise AdvisorError(f"trace {trace} does not exist; record one with `advisor record -- python prog.py`")
        if call is not None:
            from advisor.capture.call import parse_call

            parse_call(call)  # not an expression: one line now, not a message in the form later
    except AdvisorError as exc:
        print(f"advisor: error: {exc}", file=sys.stderr)
        return 2
    from tui.app import AdvisorApp

    app = AdvisorApp(path, trace=trace, gpu=gpu, dry_run=dry_run, preset=preset, tp=tp, shapes=shapes,
                     confirm=confirm, top_k=top_k, config_dir=config_dir, call=call)
    code = app.run()
    code = code if isinstance(code, int) else 0
    if app.jobs:
        # A computation thread (a compile, a timing) cannot be interrupted and would hold the exit until it
        # ends: the screen is already restored, so end the processes it started (by their ids) and leave now.
        from tui.background import end_children

        end_children()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
