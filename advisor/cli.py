"""The `advisor` command line: the argument parser and the dispatch (the commands are in
`advisor.commands`).

Exit codes: 0 done; 1 findings (`suggest`: a launch gains more than --min-speedup or its config cannot
run on the GPU; `apply --verify`: rolled back; `apply`: a config left to add by hand to an
autotune list built by code); 2 a user error, printed as one line on stderr, also a
bad argument and a config that cannot run given to `ceiling`/`predict` (it has no ceiling). Data goes
to stdout, progress and diagnostics to stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from advisor import commands
from ceilings.errors import AdvisorError


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (`advisor: error: ...` and where to look), as every other
    user error is reported; exit status 2."""

    def error(self, message: str):
        print(f"advisor: error: {' '.join(message.split())} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(2)


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

    parser = _Parser(
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
                                       "pipeline needs; the prediction is the XGBoost model of advisor/model/models on "
                                       "the ceiling's features.")
        _ceiling_args(p)

    p = sub.add_parser("diagnose", help="where a launch loses time: the gap to the ideal split into causes",
                       description="Split the gap between a launch's ideal time (its useful work at the GPU's "
                                   "sustained rates) and its measured time (--measured US, or --measure on a GPU; "
                                   "else the predicted time) into named causes in us: tile padding, exit-only CTAs, "
                                   "the tail wave, fill and drain of the K loop, the epilogue, memory latency, "
                                   "operand staging, L2 re-reads of weights, software division and spills in the "
                                   "SASS, and what stays unexplained. --compare CONFIG shows each cause before and "
                                   "after a change. TARGET as for `advisor ceiling`.")
    _ceiling_args(p, detail=False)
    p.add_argument("--measured", type=float, metavar="US", help="the launch's measured time in us")
    p.add_argument("--measure", action="store_true", help="(GPU) time the launch here instead")
    p.add_argument("--compare", metavar="CONFIG", help="a second config of the launch (after a change): each cause "
                   "before, after and the difference")
    p.add_argument("--compare-measured", type=float, metavar="US", help="the second config's measured time in us "
                   "(default: measured with --measure, else predicted)")
    p.add_argument("--variant", default="previous", help="the fused-MoE kernel variant the launch runs: previous "
                   "(kernels/fused_moe.py), or kernels/fused_moe_fused.py's fused, fused-il, persistent, "
                   "fused-persistent, fused-il-persistent (GEMM2: fused = router weight and top-k sum fused)")
    p.add_argument("--compare-variant", metavar="VARIANT", help="the variant of the second side (default: --variant); "
                   "with it, --compare may be left out (the same config)")

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
    p.add_argument("--force-gpu", action="store_true",
                   help="write advice for --gpu into an engine file named for another GPU (refused otherwise)")

    p = sub.add_parser("record", help="run a Python program and capture every Triton launch into a trace",
                       description="Run `python prog.py args` with Triton's launch hooks installed and write every "
                                   "launch (kernel, source line, grid, tensor shapes/dtypes/strides, scalars, "
                                   "constexprs, num_warps, num_stages, GPU), identical launches merged with a count, "
                                   "to a launch trace (docs/trace.md). Exits with the program's exit code. "
                                   "--no-gpu runs the program on tensors without data and compiles and runs nothing; "
                                   "--call EXPR FILE captures one call of FILE's host code that way.",
                       usage="advisor record [--out TRACE] [--no-gpu [--gpu GPU]] -- python prog.py [args ...]\n"
                             "       advisor record [--out TRACE] [--gpu GPU] --call EXPR FILE")
    p.add_argument("--out", default="advisor_trace.json", help="trace file to write (default advisor_trace.json)")
    p.add_argument("--no-gpu", action="store_true",
                   help="no GPU: tensors without data, a stand-in driver for --gpu; launches captured, not run")
    p.add_argument("--call", metavar="EXPR", help="a call of FILE's host code, e.g. \"matmul(randn(4096, 4096, f16), "
                                                  "randn(4096, 4096, f16))\" (implies --no-gpu)")
    p.add_argument("--gpu", help="with --no-gpu / --call: the GPU the stand-in driver answers for (default h100)")
    p.add_argument("program", nargs=argparse.REMAINDER, help="the program and its arguments, after --")

    p = sub.add_parser("calibrate", help="(GPU) measure this GPU's sustained rates, or calibrate for one kernel",
                       description="Microbenchmarks (DRAM read, copy and a read/write stream, L2 read, bf16/fp8 "
                                   "tensor, FP32 FMA, XU, empty-kernel launch) timed with CUDA graphs; writes the "
                                   "GPU's calibration file. "
                                   "With --kernel: a short adaptive sweep of one kernel's configs whose timings "
                                   "correct the latency model for that kernel (kept in ~/.cache/triton-advisor); "
                                   "the config that runs (an autotuned launch's expected pick) is timed first, and "
                                   "again whenever the timings move that pick.")
    p.add_argument("--out", help="folder for the calibration file (default $TRITON_ADVISOR_HOME/calibration)")
    p.add_argument("--tune", action="store_true",
                   help="also fine-tune the latency model for this GPU from a short sweep (a few minutes) and "
                        "store it beside the calibration; predictions for this GPU then use it")
    p.add_argument("--sweep", nargs="+", metavar="CSV",
                   help="with --tune: tune from these `advisor collect` CSVs instead (no GPU needed)")
    p.add_argument("--gpu", help="with --sweep: the GPU whose points to tune on (default: the sweeps' only GPU)")
    p.add_argument("--deadline", type=float, default=240.0, help="seconds for the tuning sweep (default 240)")
    p.add_argument("--kernel", metavar="FILE",
                   help="calibrate the model for this kernel file instead: time a few of its configs, chosen by "
                        "the model (the current one, the fastest predicted, the least certain), with --call or "
                        "--trace giving its launches; later predictions for the kernel on this GPU use them")
    p.add_argument("--call", metavar="EXPR", help="with --kernel: a call of the file's host code (as for suggest)")
    p.add_argument("--trace", help="with --kernel: a launch trace of the kernel")
    p.add_argument("--configs", type=int, default=6, help="with --kernel: configs to time per launch, 3-8 (default 6)")

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
    p.add_argument("--gpus", default="1", help="GPUs to spread the sweep over, a worker process each: a number or "
                                               "'all' (default 1)")

    p = sub.add_parser("train", help="train the latency model on measured sweeps",
                       description="Train the XGBoost latency model (target: log measured/ceiling) on sweep CSVs "
                                   "and write it to advisor/model/models (or --out).")
    p.add_argument("--data", nargs="+", help="sweep CSV files (default: the sweeps in benchmarks/data of the current "
                                             "kernels)")
    p.add_argument("--out", help="folder for the model files (default: advisor/model/models)")
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
    p.add_argument("--gpus", default="1", help="GPUs to spread the sweep over, a worker process each: a number or "
                                               "'all' (default 1)")
    return parser


def _ceiling_args(p: argparse.ArgumentParser, detail: bool = True) -> None:
    p.add_argument("target", help="kernels/fused_moe.py, a launch JSON file, or a kernel file with --launch")
    p.add_argument("--kernel", help="the kernel's name in TARGET (needed when the file defines several); NAME#N: "
                                    "its Nth launch (a layer that launches one kernel twice)")
    p.add_argument("--launch", help="launch JSON for a kernel file TARGET (its arguments, grid and config)")
    p.add_argument("--call", metavar="EXPR", help="a call of the kernel file's host code whose launches to use, e.g. "
                                                  "\"matmul(randn(4096, 4096, f16), randn(4096, 4096, f16))\" (no GPU)")
    p.add_argument("--preset", help="model preset (for the fused-MoE kernel)")
    p.add_argument("--tokens", type=int, help="token count M (for the fused-MoE kernel)")
    p.add_argument("--shape", help="M,N,K for the shipped kernels/gemm.py, ROWS,COLS for kernels/softmax.py, "
                                   "BATCH_HEADS,SEQ,HEAD_DIM for kernels/attention.py")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel size (default 1)")
    p.add_argument("--gemm", type=int, default=1, choices=(1, 2), help="GEMM 1 (w1) or 2 (w2) of the layer")
    p.add_argument("--config", help="engine-entry JSON or a label like 'M64 N128 K64 G8 w4 s3' "
                                    "(default: the config the shipped kernel takes)")
    p.add_argument("--gpu", help="GPU name or short name (default: the GPU a launch trace names, else this "
                                 "machine's, else h100)")
    p.add_argument("--no-calibration", action="store_true", help="use spec-sheet rates even if calibrated")
    p.add_argument("--compile", action="store_true", help="compile to read shared memory and registers")
    p.add_argument("--format", choices=("text", "json"), default="text")
    if detail:
        p.add_argument("--detail", action="store_true", help="with --format json: the work behind the ceiling "
                       "(instructions by pipeline, bytes, registers, spills, working CTAs, floor and expected, notes)")


def _suggest_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", help="kernel file, launch trace, or engine fused-MoE config JSON")
    p.add_argument("--preset", help="model preset for the fused-MoE kernel (see `advisor presets`)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel size (default 1)")
    p.add_argument("--tokens", type=_tokens, help="token counts (default 1,16,64,256,1024,4096)")
    p.add_argument("--shape", action="append", help="a shape of a shipped shape kernel; repeat for several")
    p.add_argument("--trace", help="launch trace (from `advisor record`) for a kernel file TARGET")
    p.add_argument("--call", metavar="EXPR", help="a call of the kernel file's host code whose launches to advise on, "
                                                  "e.g. \"matmul(randn(4096, 4096, f16), randn(4096, 4096, f16))\"")
    p.add_argument("--kernel", help="only this kernel's launches (NAME#N: its Nth)")
    p.add_argument("--gpu", help="GPU name or short name (default: the trace's or file's GPU, else this machine's, "
                                 "else h100)")
    p.add_argument("--config-dir", help="a folder of engine config files to look in before the shipped ones")
    p.add_argument("--top-k", type=int, default=5, help="suggestions kept per launch (default 5)")
    p.add_argument("--measure", type=int, nargs="?", const=8, default=0, metavar="K",
                   help="(GPU) time the current and top K configs (default K=8) and pick by measurement")
    p.add_argument("--no-confirm", action="store_true",
                   help="skip compiling the finalists for the target GPU (faster; shared memory not confirmed)")


COMMANDS = {name: getattr(commands, f"cmd_{name}") for name in (
    "presets", "configs", "ceiling", "predict", "diagnose", "calibrate", "collect", "suggest", "apply", "record",
    "train", "tune")}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) or a bad argument (2, reported by _Parser.error)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return COMMANDS[args.command](args)
    except AdvisorError as exc:
        print(f"advisor: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("advisor: interrupted", file=sys.stderr)
        _exit_now(130)
    except BrokenPipeError:  # the reader (e.g. `| head`) went away: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # a bug of ours (or of a library under us): one line, not a traceback
        import os

        if os.environ.get("ADVISOR_TRACEBACK"):
            raise
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        print(f"advisor: internal error: {type(exc).__name__}{': ' + first if first else ''} (a bug in "
              "triton-advisor; ADVISOR_TRACEBACK=1 shows where it happened, please report it with that)",
              file=sys.stderr)
        return 2


def _exit_now(code: int) -> None:
    """Exit at once: Ctrl-C must end a command within a second, and a normal exit first runs torch's and
    Triton's exit handlers (seconds on a busy machine). Nothing is lost: files are written atomically as
    they are made; the compile workers are killed and their queues released first (the collection frees
    the queues' semaphores, which multiprocessing's resource tracker would report as leaked)."""
    import contextlib
    import gc
    import os

    from advisor.advice import compile_pool

    compile_pool.stop()
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def leave_interpreter_off() -> None:
    """Drop a TRITON_INTERPRET left in the shell (a common setting where there is no GPU) from this program's
    process: the advisor compiles the kernels it reads for the GPU it models and runs in Triton's interpreter, by
    itself, only the launches whose tensors hold data (advisor.capture.nogpu). With the flag, `@triton.jit` makes
    the kernels of the files it loads interpreter functions, and a kernel calling a JIT helper of another module
    then cannot be compiled. The program's entry points call this; `main` does not (tests call it in a process
    that interprets its own kernels). A program `advisor record` runs gets the shell's value back
    (advisor.capture.record.program_environment)."""
    import os

    from advisor.capture.record import SHELL_INTERPRET

    value = os.environ.pop("TRITON_INTERPRET", None)
    if value is not None:
        os.environ[SHELL_INTERPRET] = value


if __name__ == "__main__":
    leave_interpreter_off()
    raise SystemExit(main())
