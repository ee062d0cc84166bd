"""`advisor tui FILE` (also `advisor FILE`, `python -m tui FILE`): the options of the TUI (see tui.app.run)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="advisor tui", description="Open a Triton kernel file in the advisor's TUI: "
                                "its kernels and launches, source, ceiling and ranked config suggestions.")
    p.add_argument("file", help="a Python file with Triton kernels (e.g. kernels/fused_moe.py)")
    p.add_argument("--trace", help="a launch trace (`advisor record`) or launch JSON for the file's kernels")
    p.add_argument("--gpu", default="h100", help="GPU name or short name (default h100)")
    p.add_argument("--dry-run", action="store_true", help="show the diff of an apply and write nothing")
    p.add_argument("--preset", help="fused-MoE model preset to list (default: every preset)")
    p.add_argument("--tp", type=int, help="tensor-parallel size for the presets (default: the smallest tuned one)")
    p.add_argument("--shape", action="append", help="a launch shape of a shipped shape kernel (repeatable)")
    p.add_argument("--config-dir", help="a folder of engine config files the fused-MoE launches read first")
    p.add_argument("--top-k", type=int, default=5, help="suggestions per launch (default 5)")
    p.add_argument("--no-confirm", action="store_true",
                   help="rank by prediction only; skip compiling the finalists for the GPU's arch")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from tui.app import run

    args = build_parser().parse_args(argv)
    if args.top_k < 1:
        print(f"advisor: error: --top-k {args.top_k}: keep at least one suggestion", file=sys.stderr)
        return 2
    return run(args.file, trace=args.trace, gpu=args.gpu, dry_run=args.dry_run, preset=args.preset, tp=args.tp,
               shapes=args.shape, confirm=not args.no_confirm, top_k=args.top_k,
               config_dir=args.config_dir)


if __name__ == "__main__":
    raise SystemExit(main())
