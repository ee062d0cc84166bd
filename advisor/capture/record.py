"""`advisor record -- python prog.py [args]`: run a program and write every Triton launch it makes to a trace.

The program runs in a child Python process (this advisor's interpreter, `sys.executable`) started
through `advisor/capture/boot.py`, which installs the launch capture before the program's first
line and saves the launches it saw, deduplicated with a count, when the process exits. This side
reads that file, checks each launch, and writes the trace (`advisor.capture.trace`, docs/trace.md).

Where the capture comes from (details in `advisor/capture/boot.py`): compiled kernels (a GPU, TRITON_INTERPRET
unset) through Triton's launch hooks (`knobs.runtime.launch_enter_hook`, with a per-kernel
`launch_metadata` callback attached from `knobs.runtime.jit_cache_hook`); interpreted kernels
(TRITON_INTERPRET=1), which call no hook, through a wrapper around the interpreter's
`InterpretedFunction.run` in the child process only. `@triton.autotune` kernels are recorded once
per launch with the config the autotuner chose; its benchmark launches are left out. Small integer
tensors (at most 1 MiB: routing tables, offsets) keep their contents in the trace (`TensorArg.values`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from advisor.capture.trace import Trace, dedupe, now_iso, parse_entry, unzip_entries, write_trace
from ceilings.errors import AdvisorError

BOOT = Path(__file__).resolve().parent / "boot.py"
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?(\.exe)?$")
# Interpreter options that take a value, as in `python -X dev prog.py`.
_OPTION_WITH_VALUE = {"-X", "-W", "--check-hash-based-pycs"}
_USAGE = "give the program as `python prog.py [args]`, `python -m module [args]` or `prog.py [args]`"


@dataclass
class RecordResult:
    trace: Trace
    returncode: int
    out: Path
    skipped: int = 0                              # captured launches that did not make valid Launches
    capture_errors: int = 0                       # launches the capture failed to read
    notes: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        t = self.trace
        groups = t.meta.get("autotune_groups") or []
        tuned = (f"; {len(groups)} autotuned, one entry per config ({sum(map(len, groups))} entries)"
                 if groups else "")
        # a group's other entries are the other configs' launches (probed on a GPU, captured without one), not
        # launches the program made
        made = t.total - sum(t.counts[j] for g in groups for j in g[1:])
        return (f"recorded {made} launch{'es' if made != 1 else ''} of {len(t.kernels)} "
                f"kernel{'s' if len(t.kernels) != 1 else ''} ({len(t.launches)} distinct{tuned}) -> {self.out}")


def child_command(argv: list[str], capture: str) -> list[str]:
    """The child's command line: this Python, the program's interpreter options, the boot runner."""
    if not argv:
        raise AdvisorError(f"advisor record needs a program after `--`; {_USAGE}")
    first = argv[0]
    if _PYTHON.match(os.path.basename(first)) or first == sys.executable:
        rest = list(argv[1:])
        options: list[str] = []
        while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c", "-", "--"):
            option = rest.pop(0)
            options.append(option)
            if option in _OPTION_WITH_VALUE and rest:
                options.append(rest.pop(0))
        if rest and rest[0] == "--":
            rest.pop(0)
        if not rest or rest[0] == "-":
            raise AdvisorError(f"advisor record: `{' '.join(argv)}` names no program to run; {_USAGE}")
        if rest[0] in ("-m", "-c"):
            if len(rest) < 2:
                raise AdvisorError(f"advisor record: `{' '.join(argv)}`: {rest[0]} needs a "
                                   f"{'module name' if rest[0] == '-m' else 'program text'}; {_USAGE}")
            mode = "module" if rest[0] == "-m" else "code"
            target, args = rest[1], rest[2:]
        else:
            mode, target, args = "script", rest[0], rest[1:]
    else:
        options, mode, target, args = [], "script", first, list(argv[1:])
    if mode == "script":
        path = Path(target)
        if not path.is_file():
            what = "is a folder" if path.is_dir() else "does not exist"
            hint = "" if target.endswith(".py") or path.exists() else f" ({_USAGE})"
            raise AdvisorError(f"advisor record: program {target} {what}; give the path of the Python file to "
                               f"run{hint}")
    return [sys.executable, *options, str(BOOT), capture, mode, target, *args]


def _wait(process: subprocess.Popen, timeout_s: float | None = None) -> int:
    """The child's exit status; Ctrl-C reaches the child too, so wait for it to save its launches. Past
    `timeout_s` the child is killed and AdvisorError raised."""
    while True:
        try:
            return process.wait(timeout_s)
        except KeyboardInterrupt:
            continue
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AdvisorError(f"the recorded program ran past {timeout_s:.0f} s and was stopped") from None


# The shell's TRITON_INTERPRET, kept here by the program's entry (`advisor.cli.leave_interpreter_off`), which takes
# it out of the advisor's own process: the program `record` runs gets it back.
SHELL_INTERPRET = "TRITON_ADVISOR_SHELL_INTERPRET"


def program_environment() -> dict[str, str]:
    """The environment of a recorded program: the advisor's, with the shell's TRITON_INTERPRET."""
    env = dict(os.environ)
    value = env.pop(SHELL_INTERPRET, None)
    if value is not None:
        env.setdefault("TRITON_INTERPRET", value)
    return env


def record(argv: list[str], out: str | os.PathLike, env: dict[str, str] | None = None,
           cwd: str | os.PathLike | None = None, no_gpu: str | None = None,
           timeout_s: float | None = None) -> RecordResult:
    """Run the program `argv` with the launch capture and write its trace to `out`.

    The trace is written whatever the exit status: a program that fails part way leaves the
    launches it made before. `returncode` is the program's (128 + N when signal N ended it).
    `no_gpu`: a GPU name; the program runs on tensors without data with a stand-in driver for that
    GPU, and nothing is compiled or run (advisor/capture/nogpu.py). `timeout_s`: stop the program
    after that long (AdvisorError).
    """
    out = Path(out)
    env = program_environment() if env is None else env
    if no_gpu is not None:
        from ceilings.standin import gpu_spec

        root = str(BOOT.parents[2])
        env = dict(env)
        env.update(TRITON_ADVISOR_NO_GPU=gpu_spec(no_gpu).name, TRITON_INTERPRET="0",
                   PYTHONPATH=os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")])))
    folder = out.absolute().parent
    if out.is_dir():
        raise AdvisorError(f"advisor record: --out {out} is a folder; give the path of the trace file to write")
    fd, capture = tempfile.mkstemp(prefix="advisor-record-", suffix=".json")
    os.close(fd)
    os.unlink(capture)  # the child creates it at exit; its absence says the child saved nothing
    command = child_command(list(argv), capture)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AdvisorError(f"advisor record: cannot create {folder} for the trace ({exc.strerror or exc}); give "
                           "another --out path") from None
    try:
        process = subprocess.Popen(command, env=env, cwd=cwd)
        returncode = _wait(process, timeout_s)
        data = None
        if os.path.exists(capture):
            with open(capture) as fh:
                data = json.load(fh)
    finally:
        if os.path.exists(capture):
            os.unlink(capture)
    if returncode < 0:
        returncode = 128 - returncode
    notes: list[str] = []
    if data is None:
        data = {}
        notes.append("the program ended before its launches could be saved (os._exit, a signal, or no Triton "
                     "in its Python); the trace has none")
    result = trace_of_capture(data, folder, argv, out, notes)
    result.returncode = returncode
    write_trace(out, result.trace)
    return result


def trace_of_capture(data: dict, folder: Path, argv: list[str], out: Path, notes: list[str] | None = None
                     ) -> RecordResult:
    """The trace of what a capture saw (`launches`, `gpu`, `capture_errors`, `autotune_groups`): each
    launch checked, identical ones merged, autotune groups renumbered to the merged launches."""
    from advisor.capture.trace import launch_key

    notes = list(notes or [])
    entries, skipped, parsed = [], 0, {}
    for i, item in enumerate(data.get("launches", [])):
        try:
            entries.append(parse_entry(item, f"captured launch {i}", folder))
            parsed[i] = launch_key(entries[-1][0])
        except AdvisorError as exc:
            skipped += 1
            if skipped == 1:
                notes.append(f"left out a launch the trace format cannot hold: {exc}")
    launches, lines, counts = unzip_entries(dedupe(entries))
    meta: dict = {}
    errors = int(data.get("capture_errors") or 0)
    if errors:
        meta["capture_errors"] = errors
        notes.append(f"{errors} launch{'es' if errors != 1 else ''} could not be read "
                     f"({data.get('first_capture_error')})")
    index = {launch_key(launch): i for i, launch in enumerate(launches)}
    groups = []
    for group in data.get("autotune_groups") or ():
        merged = list(dict.fromkeys(index[parsed[i]] for i in group if i in parsed))
        if len(merged) > 1 and merged not in groups:
            groups.append(merged)
    if groups:
        meta["autotune_groups"] = groups
        # Without a GPU nothing was timed: each group's first entry is the list's first config, not the one the
        # autotuner would run (advisor.advice.autotuner_pick.stand_for_autotuner).
        meta["autotune_chosen"] = "no-gpu" not in (data.get("capture_paths") or ())
    trace = Trace(launches, counts, lines, data.get("gpu"), [str(a) for a in argv], now_iso(), meta)
    return RecordResult(trace, 0, out, skipped, errors, notes)


def _signal_name(returncode: int) -> str:
    if returncode > 128:
        try:
            return f" ({signal.Signals(returncode - 128).name})"
        except ValueError:
            return ""
    return ""


def record_main(program_argv: list[str], out: str, no_gpu: str | None = None) -> int:
    """The CLI's `advisor record`: record, print a one-line summary to stderr, return the program's status.

    Returns 2 after printing the error when the input is bad (no program, a missing script).
    """
    try:
        result = record(program_argv, out, no_gpu=no_gpu)
    except AdvisorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for note in result.notes:
        print(f"advisor record: {note}", file=sys.stderr)
    if result.returncode:
        print(f"advisor record: the program exited with status {result.returncode}"
              f"{_signal_name(result.returncode)}; the trace holds the launches it made before", file=sys.stderr)
    print(result.summary, file=sys.stderr)
    return result.returncode
