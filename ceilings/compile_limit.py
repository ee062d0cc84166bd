"""A time limit on one compile (ceilings.compile): what a compile worker says it compiles, and the marker
a compile stopped past the limit leaves in the compile cache.

A compile that runs past the limit (minutes of LLVM on one huge unrolled tile: a FlagGems top-k at
BLOCK_SIZE 8192 kept `suggest` busy past 150 s, RESULTS 34c) is stopped by the compile pool, which
leaves a marker beside the cache entry the compile would have written: the config is then refused at
once, as a config that does not compile, until the limit is raised above the one it ran past.
The pool (advisor.advice.compile_pool) reads each worker's note, kills a worker past the limit and
calls `mark_stalled`. The limits, and the counts a search takes from the environment (`whole_number`), are read
here, each bad value one line naming its setting.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ceilings.errors import AdvisorError


class CompileStalled(AdvisorError):
    """A config whose compile ran past the limit (its marker in the compile cache)."""

    def __init__(self, message: str, limit_s: float):
        super().__init__(message)
        self.limit_s = limit_s


def _cache_dir() -> Path:
    from ceilings.compile import cache_dir

    return cache_dir()


COMPILE_LIMIT_ENV = "TRITON_ADVISOR_COMPILE_LIMIT"
DEFAULT_COMPILE_LIMIT_S = 120.0
report_compiling = False  # set in compile workers: each says what it compiles (compiling_dir() / its pid)


def _seconds(env: str, default: float, what: str) -> float:
    """A limit in seconds from `env` (`default` when unset); anything but a number above 0 is the user's error."""
    given = os.environ.get(env, "").strip()
    if not given:
        return default
    try:
        limit = float(given)
    except ValueError:
        limit = -1.0
    if limit <= 0:
        raise AdvisorError(f"{env}={given!r}: give the seconds {what}, a number above 0")
    return limit


def whole_number(env: str, what: str) -> int | None:
    """A count of `what` from `env` (None when unset); anything but a whole number of 1 or more is the user's error."""
    given = os.environ.get(env, "").strip()
    if not given:
        return None
    if not given.isdigit() or int(given) < 1:
        raise AdvisorError(f"{env}={given!r}: give a whole number of {what}, 1 or more")
    return int(given)


def compile_limit_s() -> float:
    return _seconds(COMPILE_LIMIT_ENV, DEFAULT_COMPILE_LIMIT_S, "one compile may take")


SEARCH_LIMIT_ENV = "TRITON_ADVISOR_SEARCH_LIMIT"
DEFAULT_SEARCH_LIMIT_S = 600.0


def search_limit_s() -> float:
    """Seconds one search may spend compiling (TRITON_ADVISOR_SEARCH_LIMIT, default 600): past it, the
    configs not compiled yet are left out of the ranking (advisor.advice.compile_pool.search_deadline)."""
    return _seconds(SEARCH_LIMIT_ENV, DEFAULT_SEARCH_LIMIT_S, "one search may spend compiling")


class SearchOutOfTime(AdvisorError):
    """A config not compiled before the search's time limit ran out (not the config's fault: not marked)."""


def compiling_dir() -> Path:
    return _cache_dir() / "compiling"


def stall_marker(key: str) -> Path:
    return _cache_dir() / f"{key}.stalled"


def note_compiling(launch, arch: int, key: str) -> None:
    """In a compile worker: what it compiles now (None: nothing), for the pool to time (compile_pool)."""
    if not report_compiling:
        return
    note = compiling_dir() / str(os.getpid())
    if launch is None:
        note.unlink(missing_ok=True)
        return
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text(json.dumps({"key": key, "kernel": launch.kernel, "config": launch.config.label(), "arch": arch,
                                "started": time.time()}))


def mark_stalled(note: dict, limit_s: float) -> None:
    marker = stall_marker(note["key"])
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({**note, "limit_s": limit_s}))


def refuse_stalled(launch, arch: int, key: str) -> None:
    marker = stall_marker(key)
    if not marker.exists():
        return
    try:
        ran_past = float(json.loads(marker.read_text())["limit_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    if compile_limit_s() > ran_past:  # a longer wait asked for: try again
        return
    raise CompileStalled(f"{launch.kernel} with {launch.config.label()} did not compile for sm_{arch} within "
                         f"{ran_past:.0f} s and was stopped; set {COMPILE_LIMIT_ENV} above {ran_past:.0f} to wait "
                         "longer", ran_past)
