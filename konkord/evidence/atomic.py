"""Whole-file writes that a crash cannot tear: temporary file, fsync, rename, fsync the folder.

Every file Konkord rewrites (a run's manifest, results files, site pages, imported suites)
goes through write_atomic, so after a kill -9 at any instant the file holds either its old
bytes or its new bytes, never nothing and never half. Append-only logs (the evidence, the
response cache) have their own rules and do not use this.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in `directory` survive a crash of the machine."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path | str, data: bytes | str, durable: bool = True) -> None:
    """Replace `path` with `data` all at once (text is written as UTF-8).

    The temporary file sits next to the target (a rename is atomic only within one file
    system), is created with the usual permissions (0666 less the umask), and is removed if
    anything fails before the rename. durable=False skips the fsyncs: still whole after a
    killed process, but not promised after a power cut (for outputs that are rebuilt anyway).
    """
    path = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        try:
            written = 0
            while written < len(payload):
                written += os.write(fd, payload[written:])
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
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    write_atomic(path, data, durable=False)  # derived files: rebuilt from their inputs
    return True
