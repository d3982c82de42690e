"""Whole-file writes that a crash cannot tear: temporary file, fsync, rename, fsync the folder.

Every file Konkord rewrites (a run's manifest, results files, site pages, imported suites)
goes through write_atomic, so after a kill -9 at any instant the file holds either its old
bytes or its new bytes, never nothing and never half, and the temporary file a kill left
behind is removed by the next write into that folder. Append-only logs (the evidence, the
response cache) have their own rules and do not use this.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from collections.abc import Sequence
from pathlib import Path

# The temporary names write_atomic gives: .<name>.<pid>.<8 hex>.tmp
_TMP_NAME = re.compile(r"^\..+\.(\d+)\.[0-9a-f]{8}\.tmp$")
_swept: set[str] = set()  # folders this command already cleared of stale temporary files


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in `directory` survive a crash of the machine."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid < 2**22  # another user's process (or a pid no system has)
    return True


def sweep_stale_tmp(directory: Path) -> None:
    """Remove temporary files of write_atomic's naming left in `directory` by a process that
    was killed between writing and renaming (its pid no longer runs), once per folder and
    process: left alone they pile up, and in public/ they would be deployed."""
    key = str(directory.resolve())
    if key in _swept:
        return
    _swept.add(key)
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        found = _TMP_NAME.match(entry.name)
        if found is None or int(found.group(1)) == os.getpid() or _alive(int(found.group(1))):
            continue
        try:
            if entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
            elif entry.is_dir(follow_symlinks=False):  # a staging folder (`temporary_name`)
                shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:
            pass  # another writer removed it first, or it is not ours to remove


def temporary_name(path: Path) -> Path:
    """A name beside `path` of the temporary kind: once the process that made it is gone, the
    next write into the folder removes what has it (a file, or a folder and all in it)."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def forget_sweeps() -> None:
    """Sweep every folder again from now on (each command starts afresh: the CLI calls this)."""
    _swept.clear()


def write_atomic(
    path: Path | str, data: bytes | str | Sequence[bytes | memoryview], durable: bool = True
) -> None:
    """Replace `path` with `data` all at once (text is written as UTF-8; a sequence of
    buffers one after the other, never joined in memory).

    The temporary file sits next to the target (a rename is atomic only within one file
    system), is created with the usual permissions (0666 less the umask), and is removed if
    anything fails before the rename. durable=False skips the fsyncs: still whole after a
    killed process, but not promised after a power cut (for outputs that are rebuilt anyway).
    """
    path = Path(path)
    parts = [data.encode()] if isinstance(data, str) else [data] if isinstance(data, bytes) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_tmp(path.parent)
    tmp = temporary_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        try:
            for part in parts:
                view = memoryview(part).cast("B")
                written = 0
                while written < len(view):
                    written += os.write(fd, view[written:])
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def write_bytes_if_changed(path: Path, data: bytes) -> bool:
    """Write atomically, and only when the bytes differ: an unchanged file keeps its mtime."""
    sweep_stale_tmp(path.parent)  # an unchanged page still clears what a killed build left
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    write_atomic(path, data, durable=False)  # derived files: rebuilt from their inputs
    return True
