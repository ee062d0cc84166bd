"""Whether a proposed config computes what the launch's own config computes, checked without a GPU in Triton's
CPU interpreter, before `suggest` names it.

A config can be fast and wrong: a K tile past a quantisation group scales four groups by one scale (RESULTS 52's
int4 GEMV, named so at one token), a tile past a dimension the kernel does not mask reads and writes past it.
Timing on a GPU catches it (`advisor.measure.launch_run` checks every timed config against the launch's own);
without a GPU the named config used to go unchecked. Here the launch runs in Triton's interpreter (the programs
chosen below) on CPU tensors made as the GPU check makes them (`launch_run.make_tensors`: floating tensors
random normal from one seed, small integer tensors the contents the trace kept, other integers zeros; outputs a
kernel adds into with atomics zeroed), once with the launch's own config and once per candidate, and the tensors
are compared as the GPU check compares them (relative error 1e-2, integers equal).

What it says is a fact about the program on that data, not a guess: "same result" holds for that data (zeros in
large integer tensors can hide a difference), "another result" is a config that must not be named. num_warps and
num_stages are not checked apart: they choose how a race-free program runs, not what it computes (the same rule
`search.wrong_result` uses for a config the GPU found wrong).

The interpreter runs in a child process with a wall-clock limit (INTERPRET_S_ENV, default DEFAULT_S seconds for
the reference and the candidates together; 0 turns the check off): a launch too large to interpret in time is
"not checked", said so, never waited on.

Where the kernel's file uses no atomics, only a sample of programs runs (`sampled_programs`: the first two, the
middle and the last along each grid axis, each with its own program ids and the whole grid's `tl.num_programs`),
and the elements both configs' samples wrote are compared: seconds instead of minutes on a launch of thousands of
programs, and a difference found there is a difference. With atomics programs add into one another's elements, so
whole grids run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from ceilings.launch import Config, Launch

INTERPRET_S_ENV = "TRITON_ADVISOR_INTERPRET_S"
DEFAULT_S = 40.0
START_S = 30.0    # what the child may take to start (imports, the kernel file) on top of the limit
# The most tensor bytes a launch may have to be interpreted (CPU memory: the child keeps a pristine copy and the
# work, plus the tensors the reference's run and a candidate's changed, their outputs: about three times this when
# the outputs are half the bytes, two and a bit for a prefill's weights and activations).
MAX_BYTES = 768 << 20
MAX_CANDIDATES = 12    # distinct meta-parameter sets checked, in rank order, before the search names one unchecked
SAME = "same"


def limit_s() -> float:
    """INTERPRET_S_ENV's seconds (DEFAULT_S when unset, 0: off); anything but a number of 0 or more is the
    user's error, said in one line."""
    from ceilings.errors import AdvisorError

    given = os.environ.get(INTERPRET_S_ENV, "").strip()
    if not given:
        return DEFAULT_S
    try:
        limit = float(given)
    except ValueError:
        limit = -1.0
    if not limit >= 0:
        raise AdvisorError(f"{INTERPRET_S_ENV}={given!r}: give the seconds the interpreter check of a search may "
                           "take, a number of 0 or more (0 turns it off)")
    return limit


@dataclasses.dataclass
class Verdicts:
    """What the interpreter said of each candidate checked: SAME, why it computes another result, or None where
    the sampled programs of the two configs wrote no element in common; `sampled`: whether only some programs ran
    (`sampled_programs`), else every program of the grid; `unchecked`: why the candidates not in `of` were not
    checked (one line; empty when every candidate asked about was answered)."""

    of: dict[Config, str | None]
    unchecked: str = ""
    sampled: bool = False

    def how(self) -> str:
        return ("the first, second, middle and last programs along each grid axis, on random data" if self.sampled
                else "every program of the grid, on random data")


def tensor_bytes(launch: Launch) -> int:
    from advisor.measure.launch_run import elements_spanned
    from ceilings.compile import _ITEMSIZE

    return sum(elements_spanned(t) * _ITEMSIZE.get(t.dtype, 8) for t in launch.tensors)


def check(subject, candidates: list[Config], limit: float | None = None) -> Verdicts:
    """Run the subject's launch in the interpreter with its own config and with `candidates` in order (configs
    whose meta-parameters equal the current's, or an earlier candidate's, are not run again; at most
    MAX_CANDIDATES), as many as the time limit allows."""
    limit = limit_s() if limit is None else limit
    launch = subject.launch
    seen = {subject.current.program}
    distinct: list[Config] = []  # the first config of each program, in rank order
    for c in candidates:
        if c.program not in seen:
            seen.add(c.program)
            distinct.append(c)
    distinct = distinct[:MAX_CANDIDATES]
    if not distinct:
        return Verdicts({})
    if limit <= 0:  # turned off: nothing checked, nothing said
        return Verdicts({})
    from advisor.measure.launch_run import with_config

    variants = [with_config(launch, subject.launch_for(c)) for c in distinct]
    sampled = not uses_atomics(launch.source)
    answers, why = check_launches(launch, variants, subject.accumulated(), limit, sampled)
    of = {c: answers[i] for i, c in enumerate(distinct) if i < len(answers)}
    if len(of) < len(distinct):
        return Verdicts(of, why or "the interpreter stopped early", sampled)
    return Verdicts(of, "", sampled)


def check_launches(launch: Launch, variants: list[Launch], zeroed, limit: float, sampled: bool
                   ) -> tuple[list[str | None], str]:
    """The interpreter's answer for each variant of `launch` in order (SAME, the difference, None: no element
    in common), as far as `limit` seconds allow, and why it stopped short ("" where it did not)."""
    if any(t.block_shape is not None for t in launch.tensors):
        return [], "the launch takes tensor descriptors, which the interpreter check does not make"
    size = tensor_bytes(launch)
    if size > MAX_BYTES:
        return [], f"its tensors hold {size / 2**20:.0f} MiB, over the {MAX_BYTES >> 20} MiB the check is given"
    request = {"launch": launch.to_dict(), "variants": [v.to_dict() for v in variants], "zeroed": sorted(zeroed),
               "sampled": sampled}
    return _run_child(request, limit)


def uses_atomics(source: str | os.PathLike) -> bool:
    """Whether the kernel's file adds into memory with atomics anywhere: programs then add into one another's
    elements, so only whole grids can be compared (a sample of programs leaves partial sums)."""
    try:
        return "atomic_" in Path(source).read_text(errors="replace")
    except OSError:
        return True


def _run_child(request: dict, limit: float) -> tuple[list[str], str]:
    """The child's answers (one per variant, in order, up to the first SAME) and, where it stopped short, why.

    A variant that kills the interpreter (a signal: a load or store outside every tensor makes the interpreter
    read or write unmapped memory) after the launch's own config ran on the same data is answered as such, a
    result the config must not be named for, and the check goes on with the next variant in a new child, as far
    as the time left allows (set 11's block-sparse matmul: a block size past the layout its row pointers index
    read past them, and the crash had left the config unchecked and named)."""
    import time

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "TRITON_INTERPRET": "0",
           "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    hint = f" (set {INTERPRET_S_ENV} to allow more)"
    answers: list[str | None] = []
    variants = list(request["variants"])
    start = time.monotonic()
    while True:
        left = limit - (time.monotonic() - start)
        try:  # the child keeps its own limit; this one only covers its start (imports) on a slow machine
            done = subprocess.run([sys.executable, "-m", "advisor.advice.result_check"],
                                  input=json.dumps({**request, "variants": variants, "limit_s": left}),
                                  capture_output=True, text=True, env=env, timeout=left + START_S)
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            return answers + _verdicts(out), f"the interpreter took over {limit + START_S:g} s" + hint
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        said = _verdicts(done.stdout)
        answers += said
        stopped = next((line["stopped"] for line in lines if "stopped" in line), "")
        if stopped:
            return answers, stopped + hint
        if done.returncode == 0:
            return answers, ""
        killed = _signal_name(done.returncode)
        ran = any("reference" in line for line in lines)
        if killed is None or not ran:
            last = (done.stderr.strip().splitlines() or [killed and f"killed by {killed}" or "no message"])[-1][:200]
            return answers, f"the interpreter failed: {last}" + ("" if ran else " (running the launch's own config)")
        crashed = len(said)  # the variant running when it died: the one after those answered
        answers.append(f"the interpreter was killed by {killed} running it, where the launch's own config ran on "
                       "the same data: it reads or writes outside its tensors")
        variants = variants[crashed + 1:]
        if not variants:
            return answers, ""


def _signal_name(returncode: int) -> str | None:
    """The signal that killed a child (a negative return code), by name; None for an exit."""
    import signal

    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _verdicts(out: str) -> list[str | None]:
    return [entry["verdict"] for entry in (json.loads(line) for line in out.splitlines() if line.startswith("{"))
            if "verdict" in entry]


# ------------------------------------------------------------------------------------------------ the child

def _interpret_launch(fn, launch: Launch, work: dict) -> None:
    from advisor.capture.nogpu import bind, interpret
    from ceilings.compile import launch_arguments

    args, kwargs = launch_arguments(fn, launch, work)
    interpret(fn, tuple(launch.grid), bind(fn, tuple(args), kwargs))


def sampled_programs(grid) -> set[tuple[int, int, int]]:
    """The programs a sampled run interprets: along each grid axis the first two, the middle and the last (up to
    64 programs), so the tiles at the start, the middle and the masked end of every dimension run."""
    dims = [int(g) for g in grid] + [1] * (3 - len(grid))
    picks = [sorted({i for i in (0, 1, g // 2, g - 1) if 0 <= i < g}) for g in dims]
    return {(x, y, z) for x in picks[0] for y in picks[1] for z in picks[2]}


class _Programs:
    """Makes Triton's interpreter run only some programs of a grid, each with its own program ids and the whole
    grid's size (`tl.num_programs`), by skipping the kernel's body for the others. None where this Triton's
    interpreter is not built as expected (the whole grid then runs)."""

    def __init__(self, fn):
        import functools
        import inspect
        import types

        from triton.runtime import interpreter as ti

        self.only: set | None = None
        self.index = (0, 0, 0)
        builder = ti.interpreter_builder
        set_index = builder.set_grid_idx

        def set_grid_idx(x, y, z):
            self.index = (x, y, z)
            return set_index(x, y, z)

        rewrite = ti.InterpretedFunction.rewrite
        bodies: dict = {}

        def body_of(real):
            @functools.wraps(real)
            def body(*args, **kwargs):
                if self.only is not None and self.index not in self.only:
                    return None
                return real(*args, **kwargs)

            # The interpreter binds arguments by the signature and finds triton.language in the globals.
            body = types.FunctionType(body.__code__, real.__globals__, real.__name__, None, body.__closure__)
            functools.update_wrapper(body, real)
            body.__signature__ = inspect.signature(real)
            return body

        def rewritten(interpreted):  # the kernel's own body (not its helpers') is the one skipped
            real = rewrite(interpreted)
            return bodies.setdefault(real, body_of(real)) if interpreted.fn is fn.fn else real

        builder.set_grid_idx = set_grid_idx
        ti.InterpretedFunction.rewrite = rewritten

    @classmethod
    def hook(cls, fn):
        try:
            return cls(fn)
        except Exception:  # noqa: BLE001 - another Triton's interpreter: whole grids
            return None


def _changed(after, before):
    """Elements a run changed (NaN to NaN is no change)."""
    if after.dtype.is_floating_point:
        a, b = (after.float(), before.float()) if after.element_size() == 1 else (after, before)
        return ~((a == b) | (a.isnan() & b.isnan()))
    return after != before


def _compare_written(work: dict, reference: dict, pristine: dict, tol: float) -> str | None:
    """SAME where every element both sampled runs wrote agrees (relative error over them within `tol`, integers
    equal), the difference where not, None where they wrote no element in common."""
    from advisor.measure.launch_run import _finite_error

    common = 0
    for name, out in work.items():
        ref, before = reference[name], pristine[name]
        both = _changed(out, before) & _changed(ref, before)
        n = int(both.sum())
        if not n:
            continue
        common += n
        if out.dtype.is_floating_point:
            err = _finite_error(out[both], ref[both])
            if not err <= tol:
                return f"{name} differs from the reference: relative error {err:.3g} > {tol:g} over {n} elements"
        elif not bool((out[both] == ref[both]).all()):
            return f"{name} differs from the reference config's result"
    return SAME if common else None


class _OutOfTime(Exception):
    pass


def _child(request: dict) -> None:
    """Interpret the reference, then each variant while the time left allows one more run as long as the
    reference's (the reference itself gets half the limit: a launch that cannot be checked in time is said so
    early). `sampled`: only `sampled_programs` of each grid run, and the elements both runs wrote are compared.
    One JSON line per answer; a last line `stopped` says why it stopped short."""
    import signal
    import time

    import torch

    from advisor.measure.launch_run import check_outputs, make_tensors
    from advisor.measure.timing import WrongResult
    from ceilings.compile import load_kernel

    def out_of_time(*_):
        raise _OutOfTime

    signal.signal(signal.SIGALRM, out_of_time)
    limit = float(request["limit_s"])
    start = time.monotonic()
    launch = Launch.from_dict(request["launch"])
    fn = load_kernel(launch.source, launch.kernel)
    programs = _Programs.hook(fn) if request.get("sampled") else None
    pristine: dict = {}
    # what each tensor held before a run: the pristine buffers seen through the launch's shapes and strides
    before = make_tensors(launch, device="cpu", storage=pristine, zeroed=request["zeroed"])
    buffers = {name: flat.clone() for name, flat in pristine.items()}
    work = {name: torch.as_strided(buffers[name], t.shape, t.stride()) for name, t in before.items()}

    def outputs_of(variant: Launch, seconds: float) -> dict:
        """Each tensor after the variant's run: a copy where the run changed it, else its pristine view."""
        for name, flat in pristine.items():
            buffers[name].copy_(flat)
        if programs is not None:
            programs.only = sampled_programs(variant.grid)
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
        try:
            _interpret_launch(fn, variant, work)
        except Exception as exc:
            # the interpreter wraps what a program raised (InterpreterError): the limit, said as the limit
            if isinstance(exc.__cause__, _OutOfTime):
                raise _OutOfTime from None
            raise
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        return {name: t.clone() if bool(_changed(t, before[name]).any()) else before[name] for name, t in work.items()}

    def say(**line) -> None:
        print(json.dumps(line), flush=True)

    began = time.monotonic()
    try:
        reference = outputs_of(launch, limit / 2 - (began - start))
    except _OutOfTime:
        say(stopped=f"one run of the launch in the interpreter takes over {limit / 2:.0f} s")
        return
    one_run = time.monotonic() - began
    say(reference="ran")  # a crash past this line is a variant's (the parent's `_run_child`)
    for entry in request["variants"]:
        left = limit - (time.monotonic() - start)
        if left < 1.2 * one_run:
            say(stopped=f"one run of the launch in the interpreter takes {one_run:.0f} s, and {limit:g} s allow "
                        "no more")
            return
        variant = Launch.from_dict(entry)
        try:
            out = outputs_of(variant, left)
        except _OutOfTime:
            say(stopped=f"a run past the {limit:g} s limit")
            return
        if programs is not None:
            verdict = _compare_written(out, reference, before, 1e-2)
            if verdict is None:
                say(verdict=None)
                continue
        else:
            try:
                check_outputs(out, reference, {}, 1e-2, variant.config.label())
                verdict = SAME
            except WrongResult as exc:
                verdict = str(exc).split(": ", 1)[-1].split("; ")[0]
        say(verdict=verdict, sampled=programs is not None)


if __name__ == "__main__":
    _child(json.loads(sys.stdin.read()))
