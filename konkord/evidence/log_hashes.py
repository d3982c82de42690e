"""The sha256 of whole evidence files, taken once per process by whoever reads them first.

At 20 models x 1,000 tasks the verdict log is 300 MB: `konkord report` hashed it twice, once
to check its saved columns (`verdict_saved`: they are used only where the log still begins
with the bytes they were made from) and once for the digest of the report's inputs
(`stages.report.freshness`). The first reader promises the hash here, the second takes it.

A hash is handed out only for the version of the file it was taken from (device, inode, size,
modification time): an append, a rewrite or a replacement since, and the caller hashes anew.

May import: the standard library and `konkord.evidence.parse`; nothing heavy (the report's
freshness check reads it before importing numpy).
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import Future
from pathlib import Path

from konkord.evidence.parse import FileVersion, file_version

# By resolved path: the version of the file a hash is (being) taken of, and the hash (hex), or
# None where the reader found it could not vouch for the whole file.
PROMISED: dict[str, tuple[FileVersion, Future[str | None]]] = {}


def promise(path: Path, version: FileVersion) -> Future[str | None]:
    """Say that the hash of `path` at `version` is being taken: the caller must then set the
    future's result (None where it does not hash the whole file after all)."""
    future: Future[str | None] = Future()
    PROMISED[str(path.resolve())] = (version, future)
    return future


def record(path: Path, version: FileVersion, sha256: str) -> None:
    """Keep the hash (hex) of the whole file at `path`, taken of `version` of it."""
    promise(path, version).set_result(sha256)


def known_sha256(path: Path, version: FileVersion | None = None) -> bytes | None:
    """The sha256 of the whole file at `path` as promised (waiting for it if it is still being
    taken), where the file is still the version it was taken of (or is `version`, the version
    of the caller's open file); else None."""
    found = PROMISED.get(str(path.resolve()))
    if found is None:
        return None
    taken, future = found
    digest = future.result()
    if digest is None:
        return None
    if version is None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            version = file_version(fd)
        finally:
            os.close(fd)
    return bytes.fromhex(digest) if version == taken else None


_HASH_CHUNK = 1 << 22


def sha256_of(path: Path) -> bytes | None:
    """The sha256 of the whole file at `path`: as a reader took it already, or hashed here (in
    chunks: a verdict log can be 300 MB) and kept for the readers after; None where there is no
    file. Raises OSError where it cannot be read."""
    known = known_sha256(path)
    if known is not None:
        return known
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return None
    with handle:
        before = file_version(handle.fileno())
        digest = hashlib.sha256()
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
        if file_version(handle.fileno()) == before:
            record(path, before, digest.hexdigest())
    return digest.digest()
