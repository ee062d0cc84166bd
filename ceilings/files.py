"""Files written safely: one atomic writer for every file the project writes (engine config files,
autotune lists, traces)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write `data` to `path` atomically (an existing file's mode kept, else the umask's)."""
    path = Path(path)
    if mode is None:
        mode = os.stat(path).st_mode & 0o7777 if path.exists() else default_mode()
    write_atomic(path, data, mode)


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    """A temporary file in the same folder, fsynced, then renamed over `path`."""
    tmp = stage(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    sync_folder(path.parent)


def stage(path: Path, data: bytes, mode: int) -> Path:
    """`data` in a new temporary file beside `path` (same folder, so a rename onto `path` is atomic), fsynced,
    with `mode`; the caller renames it over `path` or unlinks it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def sync_folder(folder: Path) -> None:
    """Make renames in `folder` durable; not every platform lets a folder be opened."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
