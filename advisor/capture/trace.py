"""The launch trace: every distinct Triton launch of a program, with how many times it ran.

A trace is one JSON object (docs/trace.md documents it field by field)::

    {"format": "triton-advisor-trace", "version": 1, "gpu": "NVIDIA H100 80GB HBM3" | null,
     "created": "2026-05-01T12:00:00+00:00", "program": ["python", "prog.py"],
     "launches": [{<Launch.to_dict() keys>, "line": 12 | null, "count": 3}, ...]}

`advisor record` writes one; a person can write one by hand. `read_trace` also reads a plain launch
JSON file (one launch object, a list of them, or `{"launches": [...]}`), each launch counted once,
so every command that takes a trace takes the older launch files too.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ceilings.errors import AdvisorError
from ceilings.launch import Launch

FORMAT = "triton-advisor-trace"
VERSION = 1
_FIELDS = ("format", "version", "gpu", "created", "program", "launches")
_RECORD_HINT = "record one with `advisor record -- python prog.py`"


@dataclass
class Trace:
    """Distinct launches with their counts and the line of each kernel's `def` (None: unknown).

    `meta` holds the file's other top-level fields as read (a hand-written note, say, or what a
    recorder added: `capture_errors`); `write_trace` writes them back.
    """

    launches: list[Launch] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    lines: list[int | None] = field(default_factory=list)
    gpu: str | None = None
    program: list[str] = field(default_factory=list)
    created: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if not self.counts:
            self.counts = [1] * len(self.launches)
        if not self.lines:
            self.lines = [None] * len(self.launches)
        if not len(self.launches) == len(self.counts) == len(self.lines):
            raise ValueError("a trace needs one count and one line per launch")

    def entries(self) -> list[tuple[Launch, int | None, int]]:
        """(launch, line, count) for each distinct launch, in the trace's order."""
        return list(zip(self.launches, self.lines, self.counts, strict=True))

    @property
    def total(self) -> int:
        """Launches the program made: the sum of the counts."""
        return sum(self.counts)

    @property
    def kernels(self) -> list[str]:
        """The kernels launched, each once, in the order they first appear."""
        return list(dict.fromkeys(launch.kernel for launch in self.launches))

    def deduped(self) -> Trace:
        launches, lines, counts = unzip_entries(dedupe(self.entries()))
        return Trace(launches, counts, lines, self.gpu, list(self.program), self.created, dict(self.meta))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": FORMAT, "version": VERSION, "gpu": self.gpu,
                               "created": self.created or now_iso(), "program": list(self.program)}
        out.update((k, v) for k, v in self.meta.items() if k not in _FIELDS)
        out["launches"] = [{**launch.to_dict(), "line": line, "count": count}
                           for launch, line, count in self.entries()]
        return out


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def unzip_entries(entries: list[tuple[Launch, int | None, int]]) -> tuple[list[Launch], list[int | None], list[int]]:
    return [e[0] for e in entries], [e[1] for e in entries], [e[2] for e in entries]


def launch_key(launch: Launch) -> str:
    """Identity of a launch for deduplication: its whole content, key order aside."""
    return json.dumps(launch.to_dict(), sort_keys=True, default=str)


def dedupe(entries: Iterable[Launch | tuple]) -> list[tuple[Launch, int | None, int]]:
    """Merge identical launches, adding their counts, keeping the order each first appears in.

    An entry is a `Launch` (count 1), `(launch, count)` or `(launch, line, count)`. Two launches are
    identical when every field of `Launch.to_dict()` is: same source, kernel, grid, tensors
    (shape, dtype, stride), scalars, constexprs and config. The first known line is kept.
    """
    merged: dict[str, list] = {}
    for entry in entries:
        if isinstance(entry, Launch):
            launch, line, count = entry, None, 1
        elif len(entry) == 2:
            (launch, count), line = entry, None
        else:
            launch, line, count = entry
        key = launch_key(launch)
        if key in merged:
            merged[key][2] += count
            if merged[key][1] is None:
                merged[key][1] = line
        else:
            merged[key] = [launch, line, count]
    return [tuple(v) for v in merged.values()]


# ----------------------------------------------------------------------------------------------
# Reading.
# ----------------------------------------------------------------------------------------------
def _load_json(path: Path) -> Any:
    if not path.exists():
        raise AdvisorError(f"{path}: no such trace file; give the path of a trace or launch JSON file, or "
                           f"{_RECORD_HINT}")
    if path.is_dir():
        raise AdvisorError(f"{path} is a folder; give the path of a trace or launch JSON file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise AdvisorError(f"{path}: cannot be read ({exc.__class__.__name__}); give a readable trace file") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise AdvisorError(f"{path}: not valid JSON ({exc.msg}: line {exc.lineno} column {exc.colno}); fix the "
                           f"file or {_RECORD_HINT}") from None


def is_trace(path: str | os.PathLike) -> bool:
    """True if the file is a JSON object whose "format" is triton-advisor-trace (any version)."""
    try:
        with open(path, "rb") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT


def _resolve(source: str, folder: Path) -> str:
    if not source or os.path.isabs(source):
        return source
    return os.path.normpath(folder / source)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def parse_entry(item: Any, where: str, folder: Path) -> tuple[Launch, int | None, int]:
    launch = Launch.from_dict(item, where)
    count = item.get("count", 1)
    if not _positive_int(count):
        raise AdvisorError(f"{where}: count {count!r} must be a positive integer (how many times the launch ran)")
    line = item.get("line")
    if line is not None and not _positive_int(line):
        raise AdvisorError(f"{where}: line {line!r} must be a positive integer or null")
    return launch.with_source(_resolve(launch.source, folder)), line, count


def autotune_groups(trace: Trace, where: str = "trace") -> list[list[int]]:
    """The trace's autotune groups (a capture without a GPU, docs/trace.md): for each autotuned launch,
    the indices of its entries, one per config, the first standing for the launch."""
    groups = trace.meta.get("autotune_groups") or []
    n = len(trace.launches)
    if not isinstance(groups, list) or not all(
            isinstance(g, list) and g and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n for i in g)
            for g in groups):
        raise AdvisorError(f"{where}: autotune_groups must be a list of lists of launch indices (0 to {n - 1})")
    return groups


def select_launches(launches: list[Launch], kernel: str | None, skip: Iterable[int] = ()) -> list[int]:
    """The indices `--kernel` keeps of `launches` (those in `skip` aside): all of them (None), a kernel's
    (NAME), or the Nth launch of that kernel in capture order (NAME#N, from 1): a layer launches one
    kernel twice (a fused-MoE layer's two GEMMs)."""
    name, _, nth = (kernel or "").partition("#")
    skip = set(skip)
    keep = [i for i, launch in enumerate(launches) if i not in skip and (not name or launch.kernel == name)]
    if nth:
        if not (nth.isdigit() and 1 <= int(nth) <= len(keep)):
            raise AdvisorError(f"--kernel {kernel}: {name} has {len(keep)} launch(es) here; give {name}#1"
                               + (f" to {name}#{len(keep)}" if len(keep) > 1 else ""))
        keep = [keep[int(nth) - 1]]
    return keep


def kernel_name(kernel: str | None) -> str | None:
    """The kernel's name in a `--kernel NAME[#N]`."""
    return kernel.partition("#")[0] if kernel else kernel


def read_trace(path: str | os.PathLike) -> Trace:
    """Read and check a trace, or a plain launch JSON file as a trace of launches counted once.

    Relative `source` paths are resolved against the file's folder. Every problem raises an
    AdvisorError naming the file and the fix.
    """
    path = Path(path)
    data = _load_json(path)
    folder = path.absolute().parent
    meta: dict[str, Any] = {}
    gpu, program, created = None, [], None
    if isinstance(data, dict) and "format" in data:
        if data["format"] != FORMAT:
            raise AdvisorError(f"{path}: format is {data['format']!r}, not {FORMAT!r}; give a trace written by "
                               f"`advisor record` or set \"format\": \"{FORMAT}\"")
        version = data.get("version")
        if not _positive_int(version):
            raise AdvisorError(f"{path}: trace version {version!r} is not a positive integer; set \"version\": "
                               f"{VERSION}")
        if version > VERSION:
            raise AdvisorError(f"{path}: trace version {version} is newer than this advisor reads (up to "
                               f"{VERSION}); upgrade triton-advisor or record the trace again")
        gpu = data.get("gpu")
        if gpu is not None and not isinstance(gpu, str):
            raise AdvisorError(f"{path}: gpu {gpu!r} must be a GPU name (a string) or null")
        program = data.get("program") or []
        if not isinstance(program, list) or not all(isinstance(a, str) for a in program):
            raise AdvisorError(f"{path}: program must be a list of strings (the recorded command line)")
        created = data.get("created")
        if created is not None and not isinstance(created, str):
            raise AdvisorError(f"{path}: created {created!r} must be an ISO date string or null")
        if "launches" not in data:
            raise AdvisorError(f"{path}: a trace needs a \"launches\" list; add one or {_RECORD_HINT}")
        items = data["launches"]
        meta = {k: v for k, v in data.items() if k not in _FIELDS}
    elif isinstance(data, dict) and "launches" in data:
        items = data["launches"]
    elif isinstance(data, dict) and "kernel" in data:
        items = [data]
    elif isinstance(data, list):
        items = data
    else:
        raise AdvisorError(f"{path}: neither a trace (\"format\": \"{FORMAT}\") nor a launch JSON (an object with "
                           f"source, kernel and grid, or a list of them); {_RECORD_HINT}")
    if not isinstance(items, list):
        raise AdvisorError(f"{path}: \"launches\" must be a list of launch objects, got {type(items).__name__}")
    entries = [parse_entry(item, f"{path}: launch {i}", folder) for i, item in enumerate(items)]
    launches, lines, counts = unzip_entries(entries)
    trace = Trace(launches, counts, lines, gpu, list(program), created, meta)
    autotune_groups(trace, str(path))  # a bad autotune_groups field is the file's error, named now
    return trace


# ----------------------------------------------------------------------------------------------
# Writing.
# ----------------------------------------------------------------------------------------------
def write_trace(path: str | os.PathLike, trace: Trace) -> Path:
    """Write the trace atomically: a temporary file in the same folder, then a rename over `path`."""
    path = Path(path)
    text = json.dumps(trace.to_dict(), indent=1) + "\n"
    from ceilings.files import atomic_write

    try:
        atomic_write(path, text.encode())
    except OSError as exc:
        raise AdvisorError(f"{path}: cannot write the trace there ({exc.strerror or exc}); give another --out "
                           "path") from None
    return path

