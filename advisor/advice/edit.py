"""The write/backup/rollback core of `advisor apply`: an `Edit` is planned from the bytes of a file as read,
and `write` puts it on disk only if the file still holds those bytes.

`write` keeps its promises: nothing is written (and no `.bak` is left) when the edit changes nothing, when
the file is read-only, when it changed since it was read (its bytes are compared again immediately before
the atomic rename), or when the rename fails (an immutable file, a full disk). The new bytes and the backup
go to temporary files in the file's folder first; the backup's rename follows the file's.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from ceilings.errors import AdvisorError
from ceilings.files import default_mode, stage, sync_folder, write_atomic


def number_list(numbers) -> str:
    """Token counts or line numbers for a message: `1, 16, 64`."""
    return ", ".join(str(n) for n in numbers)


def digest(data: bytes | None) -> str:
    """sha256 of a file's bytes; a file that does not exist digests as the empty string."""
    return "" if data is None else hashlib.sha256(data).hexdigest()


@dataclass
class Edit:
    """One planned change of one file: its bytes as read, its new bytes and the digest of what was read."""

    path: Path
    before: bytes | None  # None: the file does not exist yet
    after: bytes
    digest: str  # sha256 of `before` at read time ("" when the file did not exist)
    what: str  # one line: what the edit does

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        """A unified diff of the edit (`a/<path>`, `b/<path>`; `/dev/null` for a new file), or ""."""
        if not self.changed:
            return ""
        old = [] if self.before is None else self.before.decode("utf-8", "replace").splitlines(keepends=True)
        new = self.after.decode("utf-8", "replace").splitlines(keepends=True)
        name = str(self.path).lstrip("/")
        lines = difflib.unified_diff(old, new, "/dev/null" if self.before is None else f"a/{name}", f"b/{name}")
        out = []
        for line in lines:
            if line.endswith("\n"):
                out.append(line)
            else:
                out.append(line + "\n\\ No newline at end of file\n")
        return "".join(out)


# ------------------------------------------------------------------------------------------------
# Reading, writing, backups.
# ------------------------------------------------------------------------------------------------
def read_bytes(path: Path, missing_ok: bool = False) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        if missing_ok:
            return None
        raise AdvisorError(f"{path} does not exist; check the path") from None
    except IsADirectoryError:
        raise AdvisorError(f"{path} is a folder; name a file") from None
    except OSError as exc:
        raise AdvisorError(f"{path} cannot be read ({exc.strerror or exc.__class__.__name__}); "
                           "check its permissions") from None




def backup_path(path: str | os.PathLike) -> Path:
    """Where `write` keeps the old bytes: the file's path plus `.bak`."""
    path = Path(path)
    return path.with_name(path.name + ".bak")


def check_writable(edit: Edit) -> None:
    """Refuse an edit of a file nobody may write (mode 444) or this user may not: replacing it by a rename
    would succeed where the folder is writable, and overrule the file's own protection."""
    if not edit.changed or edit.before is None:
        return
    target = Path(os.path.realpath(edit.path))
    try:
        mode = os.stat(target).st_mode & 0o7777
    except OSError:
        return  # gone since it was read: `write` reports the change
    if not mode & 0o222:
        raise AdvisorError(f"{edit.path} is read-only (mode {mode:o}); make it writable (chmod u+w) and run again, "
                           "or apply to a copy")
    if not os.access(target, os.W_OK):
        raise AdvisorError(f"{edit.path} cannot be written by this user (mode {mode:o}; another owner, or an "
                           "immutable attribute: lsattr); make it writable and run again, or apply to a copy")


def write(edit: Edit, backup: bool = True) -> Path | None:
    """Write `edit` atomically and return its `.bak` path.

    Refuses (nothing written, no `.bak`) when the file is read-only, when its bytes are no longer those the
    edit was planned on (checked when called and again immediately before the rename), or when it cannot be
    replaced. Returns None and writes nothing when the edit changes nothing, and None after creating a new
    file (there are no old bytes to keep) or when `backup` is False.
    """
    target = Path(os.path.realpath(edit.path))  # write through a symlink, keep the link
    current = read_bytes(target, missing_ok=True)
    if digest(current) != edit.digest:
        raise AdvisorError(f"{edit.path} changed since it was read; run again")
    if not edit.changed:
        return None
    check_writable(edit)
    mode = os.stat(target).st_mode & 0o7777 if current is not None else default_mode()
    saved = backup_path(target) if backup and current is not None else None
    new = old = None
    try:
        new = stage(target, edit.after, mode)
        old = stage(saved, current, mode) if saved else None
        # Immediately before the rename: an edit made while we prepared (an editor's save) is not overwritten.
        if digest(read_bytes(target, missing_ok=True)) != edit.digest:
            raise AdvisorError(f"{edit.path} changed while it was being written; nothing written, run again")
        os.replace(new, target)
    except BaseException as exc:
        for tmp in (new, old):
            if tmp is not None:
                tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise AdvisorError(f"{edit.path} cannot be written ({exc.strerror or exc.__class__.__name__}); check "
                               "the folder's permissions, free space and the file's attributes (lsattr: "
                               "immutable?)") from None
        raise
    if old:
        try:
            os.replace(old, saved)
        except OSError as exc:
            raise AdvisorError(f"wrote {edit.path}, but its backup could not be kept ({exc.strerror}); the old "
                               f"bytes are in {old}") from None
    sync_folder(target.parent)
    return saved


def rollback(path: str | os.PathLike, backup: str | os.PathLike) -> None:
    """Put a file back from its `.bak` (the path `write` returned), atomically, keeping the file's mode.

    The `.bak` stays. A file that `write` created has no backup: delete it to undo.
    """
    path, backup = Path(path), Path(backup)
    old = read_bytes(backup, missing_ok=True)
    if old is None:
        raise AdvisorError(f"backup {backup} of {path} does not exist; nothing to restore")
    target = Path(os.path.realpath(path))
    try:
        mode = os.stat(target).st_mode & 0o7777 if target.exists() else os.stat(backup).st_mode & 0o7777
        write_atomic(target, old, mode)
    except OSError as exc:
        raise AdvisorError(f"{path} cannot be restored from {backup} ({exc.strerror or exc.__class__.__name__}); "
                           f"copy {backup} over it by hand") from None


