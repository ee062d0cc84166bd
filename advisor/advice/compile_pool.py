"""Compiles of candidate configs in parallel worker processes, ahead of the search that needs them.

A search compiles configs twice over: a kernel without an exact model is compiled per config for its
demand (`LaunchSubject.ceilings`), and the finalists of any search are compiled for the target to
confirm they fit (`Subject.confirm`). Each compile is seconds of single-threaded LLVM and ptxas work, so
`compile_ahead` runs the ones missing from the on-disk compile cache (`ceilings.compile`) in a pool of
worker processes, one per core; the caller's own `compile_launch` then reads each result from that cache.
A failed compile is left for the caller to repeat in-process, so its error reads as it always did.

Workers are started with `spawn` (a forked copy of a process that holds Triton's and torch's threads
is not safe) and kept for the life of the process, so a TUI session pays their start once. Ctrl-C
stops them at once: the workers ignore SIGINT and the parent, on KeyboardInterrupt, kills them and
drops the pool before the interrupt goes on up (the CLI exits 130).

Progress: a plain callable `progress(done, total, what)`, given to `reporting` (the search sets it for
the compiles it causes), called once with done=0 when the compiles start and after each one.

A search bounds its compiles in time (`search_deadline`): once its limit has run out, compiles in flight
are stopped and the launches not compiled come back as failed with `out_of_time`'s reason, so a search
ranks what compiled instead of waiting on a space of slow compiles (the limit on one compile,
ceilings.compile_limit, stops one that never ends; this bounds the sum).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextvars import ContextVar

from ceilings.errors import AdvisorError
from ceilings.launch import Launch

Progress = Callable[[int, int, str], None]

MAX_WORKERS = 16
COMPILES_PER_WORKER = 4
_progress: ContextVar[Progress | None] = ContextVar("compile_progress", default=None)
_deadline: ContextVar[tuple[float, float] | None] = ContextVar("search_deadline", default=None)  # (end, limit)
_pool: ProcessPoolExecutor | None = None
_pool_workers = 0
_lock = threading.Lock()


def cores() -> int:
    """The compile workers to run: TRITON_ADVISOR_WORKERS when set (1: compile in this process), else
    the cores this process may run on (a container's or taskset's share, not the machine's)."""
    from ceilings.compile_limit import whole_number

    given = whole_number("TRITON_ADVISOR_WORKERS", "workers")
    if given is not None:
        return given
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


@contextlib.contextmanager
def reporting(progress: Progress | None) -> Iterator[None]:
    """Compiles started inside report to `progress` (None: to whatever reports already)."""
    if progress is None:
        yield
        return
    token = _progress.set(progress)
    try:
        yield
    finally:
        _progress.reset(token)


@contextlib.contextmanager
def search_deadline(limit_s: float | None) -> Iterator[None]:
    """Compiles started inside stop once `limit_s` seconds from now have passed (None: no limit)."""
    token = _deadline.set((time.monotonic() + limit_s, limit_s) if limit_s else None)
    try:
        yield
    finally:
        _deadline.reset(token)


OUT_OF_TIME = "not compiled before the search's"  # how `out_of_time`'s reason starts


def out_of_time() -> str | None:
    """Why a compile is not started or not waited for: the search's limit has run out (None: it has not)."""
    from ceilings.compile_limit import SEARCH_LIMIT_ENV

    deadline = _deadline.get()
    if deadline is None or time.monotonic() < deadline[0]:
        return None
    return f"{OUT_OF_TIME} {deadline[1]:g} s limit ran out ({SEARCH_LIMIT_ENV})"


def _init_worker() -> None:
    # The terminal's Ctrl-C reaches the whole process group; the parent decides and kills the workers, so
    # a worker's own KeyboardInterrupt traceback would only litter stderr.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # What a compiler prints would land on the parent's terminal, which a TUI draws on; a worker's result
    # carries its error instead (the caller repeats a failed compile and reports it)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    # A worker compiles for the target: never under the CPU interpreter a test process may have set.
    os.environ["TRITON_INTERPRET"] = "0"
    import ceilings.compile_limit

    ceilings.compile_limit.report_compiling = True  # so that a compile past the limit can be found and stopped
    # a note left under this pid by a killed worker of an earlier pool is not this worker's compile
    (ceilings.compile_limit.compiling_dir() / str(os.getpid())).unlink(missing_ok=True)


def _compile(launch: dict, arch: int) -> str | None:
    """In a worker: compile one launch into the disk cache; the error in words, or None."""
    from ceilings.compile import compile_launch

    try:
        compile_launch(Launch.from_dict(launch), arch)
    except AdvisorError as exc:
        return str(exc)
    except Exception as exc:  # the compiler's own errors: the caller repeats the compile and reports it
        return f"{type(exc).__name__}: {exc}"
    return None


@contextlib.contextmanager
def _real_stderr() -> Iterator[None]:
    """multiprocessing hands sys.stderr's descriptor to the helper process it starts once (its resource
    tracker); a host that replaced sys.stderr with an object without one (a Textual app's, fileno -1) makes
    that start fail, and every compile then ran in the app's own process, where no limit can stop it. The
    process's real stderr stands in for the moment the pool starts its processes."""
    current = sys.stderr
    try:
        usable = current.fileno() >= 0
    except (OSError, ValueError, AttributeError):
        usable = False
    if usable or sys.__stderr__ is None:
        yield
        return
    sys.stderr = sys.__stderr__
    try:
        yield
    finally:
        sys.stderr = current


def _get_pool(workers: int) -> ProcessPoolExecutor:
    global _pool, _pool_workers
    with _lock:
        if _pool is None or _pool_workers < workers:
            if _pool is not None:
                _pool.shutdown(wait=False, cancel_futures=True)
            import multiprocessing

            _pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_init_worker)
            _pool_workers = workers
        return _pool


def stop() -> None:
    """Kill the workers now (a compile in flight is abandoned) and drop the pool; the next
    `compile_ahead` starts a new one."""
    global _pool, _pool_workers
    with _lock:
        pool, _pool, _pool_workers = _pool, None, 0
    if pool is None:
        return
    # The executor's own shutdown waits for running compiles (seconds each); Ctrl-C must not. Its
    # processes are reached through `_processes`, the one handle the executor keeps on them.
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(Exception):
            process.kill()
    # With its workers dead the executor winds down at once; waiting for it releases its queues' locks,
    # which the resource tracker would otherwise report as leaked.
    pool.shutdown(wait=True, cancel_futures=True)


def _stalled_workers(pool: ProcessPoolExecutor, limit_s: float) -> list[dict]:
    """Kill the pool's workers whose compile has run past `limit_s` and mark what they compiled as stalled
    (`ceilings.compile_limit.stall_marker`); what each was compiling."""
    import json

    from ceilings.compile_limit import compiling_dir, mark_stalled

    stalled = []
    for pid, process in list((getattr(pool, "_processes", None) or {}).items()):
        note_path = compiling_dir() / str(pid)
        try:
            note = json.loads(note_path.read_text())
        except (OSError, ValueError):
            continue
        if time.time() - float(note.get("started", time.time())) > limit_s:
            mark_stalled(note, limit_s)
            with contextlib.suppress(Exception):
                process.kill()
            note_path.unlink(missing_ok=True)
            stalled.append(note)
    return stalled


def compile_ahead(launches: Sequence[Launch], arch: int, fn=None, workers: int | None = None,
                  supervised: bool = False) -> dict[Launch, str]:
    """Compile the launches that the compile cache lacks, in parallel; returns the ones that failed with why.
    A compile past `ceilings.compile_limit.compile_limit_s()` is stopped (its worker killed) and refused from then
    on; the other compiles that the killed pool lost are run again in a new pool, as long as a round stops one
    (each such round marks at least one more, so the rounds end), never in this process. `supervised`: even one
    compile goes to a worker, so that the limit holds for it (the pool, once started, serves the search too),
    unless TRITON_ADVISOR_WORKERS=1 asks for compiles in this process.

    `fn`: the launches' JIT function, already loaded (to look the cache up without loading the file
    again). One missing launch, or one core, compiles in this process: a worker's start (importing
    torch and Triton, opening the kernel file) costs more than one compile."""
    from ceilings.compile import compile_launch

    missing = []
    for launch in dict.fromkeys(launches):
        try:
            if compile_launch(launch, arch, fn=fn, cached_only=True) is None:
                missing.append(launch)
        except AdvisorError:
            continue  # a launch that does not bind: the caller's own compile reports it
    progress = _progress.get()
    total = len(missing)
    if not total:
        return {}
    late = out_of_time()
    if late:
        return dict.fromkeys(missing, late)
    what = f"compiling {total} config{'s' if total > 1 else ''} of {missing[0].kernel} for sm_{arch}"
    if progress:
        progress(0, total, what)
    # A worker's start (torch, Triton, the kernel file: about 6 s on this project's 2-core VM) costs about
    # two compiles, so each worker must have at least COMPILES_PER_WORKER compiles to gain anything
    # (RESULTS 11: 4 compiles on 2 cores took 20.3 s through 2 workers, 14.0 s in the process).
    # Workers asked for (the argument or TRITON_ADVISOR_WORKERS) are started as asked.
    asked = os.environ.get("TRITON_ADVISOR_WORKERS", "").strip()
    if workers is None and asked:
        workers = cores()
    workers = min(workers or min(cores(), MAX_WORKERS, total // COMPILES_PER_WORKER), total)
    if workers <= 1 and (not supervised or asked == "1"):
        return _compile_here(missing, arch, fn, progress, what)
    try:
        with _real_stderr():
            pool = _get_pool(workers if workers > 1 else max(_pool_workers, min(cores(), MAX_WORKERS)))
            futures = {pool.submit(_compile, launch.to_dict(), arch): launch for launch in missing}
    except (OSError, ValueError):
        # Spawning needs real file descriptors (`_real_stderr` gives it the process's own); where even those
        # are gone, no worker can start: compile here instead.
        stop()
        return _compile_here(missing, arch, fn, progress, what)
    from ceilings.compile_limit import compile_limit_s

    limit_s = compile_limit_s()
    failed: dict[Launch, str] = {}
    pending = set(futures)
    broken = False
    stalled: list[dict] = []
    try:
        while pending:
            # A short timeout keeps the wait interruptible and the progress live.
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            late = out_of_time()
            if late and pending:  # the search's time is up: what is still compiling is left out
                stop()
                failed.update({futures[f]: late for f in pending})
                pending = set()
                if progress:  # the compiles are over: a progress bar must not wait on them
                    progress(total, total, what)
            stalled += _stalled_workers(pool, limit_s)
            for future in done:
                try:
                    error = future.result()
                except BrokenProcessPool as exc:  # a worker died (out of memory): a new pool next time
                    error = f"{type(exc).__name__}: {exc}"
                    broken = True
                if error:
                    failed[futures[future]] = error
            if done and progress:
                progress(total - len(pending), total, what)
    except BaseException:
        stop()
        raise
    if broken:
        stop()
    if stalled:  # the compiles the killed worker's pool lost, again in a new pool
        from ceilings.compile import compile_launch

        lost = []
        for launch in failed:
            try:
                if compile_launch(launch, arch, fn=fn, cached_only=True) is None:
                    lost.append(launch)
            except AdvisorError as exc:  # the stalled one: refused from the cache from now on
                failed[launch] = str(exc)
        for launch in lost:
            del failed[launch]
        failed.update(compile_ahead(lost, arch, fn, workers, supervised=True))
    return failed


def _compile_here(missing: Sequence[Launch], arch: int, fn, progress: Progress | None, what: str) -> dict[Launch, str]:
    """The compiles one after another in this process (one core, one launch, or no way to start workers)."""
    from ceilings.compile import compile_launch

    failed: dict[Launch, str] = {}
    for done, launch in enumerate(missing, 1):
        late = out_of_time()
        if late:
            failed[launch] = late
            continue
        try:
            compile_launch(launch, arch, fn=fn)
        except AdvisorError as exc:
            failed[launch] = str(exc)
        except Exception as exc:  # noqa: BLE001 -- reported by the caller's own compile
            failed[launch] = f"{type(exc).__name__}: {exc}"
        if progress:
            progress(done, len(missing), what)
    return failed
