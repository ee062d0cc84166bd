"""The advisor's long calls (capture, compile, search, timing), run off the screen's thread so that leaving
never waits for them.

Textual's thread workers run on asyncio's default executor, which `asyncio.run` joins on the way out: a
`q` during a cold compile waited for the compile (34 s). Here a call runs in a daemon thread that an async
worker awaits; cancelling the worker (leaving, a newer choice) stops the wait at once, and the thread's
result, if it ever comes, is dropped. `tui.__main__` then ends the process and the children it started
(compiler or pool processes) by their ids, without waiting for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any


class Running:
    """How many calls are in flight in background threads (the app reads it on the way out)."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.count += n


async def off_thread(running: Running, fn: Callable[..., Any], *args, **kwargs) -> Any:
    """`fn(*args, **kwargs)` in a daemon thread, awaited; raises what it raises."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()

    def settle(result, error) -> None:
        if done.done():  # the awaiting worker was cancelled
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def body() -> None:
        result, error = None, None
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the awaiting worker, which reports it
            error = exc
        finally:
            running.add(-1)
        # RuntimeError: the app has left and its loop is closed; nobody waits for this result.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, error)

    running.add(1)
    threading.Thread(target=body, daemon=True, name=getattr(fn, "__name__", "advisor call")).start()
    return await done


def child_pids() -> list[int]:
    """The ids of the processes this process started that still run (Linux /proc; elsewhere none)."""
    pids: list[int] = []
    for children in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        try:
            pids += [int(p) for p in children.read_text().split()]
        except OSError:
            continue
    return sorted(set(pids))


def end_children() -> None:
    """SIGTERM to each process this one started (a compiler, a pool worker), by its id."""
    for pid in child_pids():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
