"""The sha256 of whole evidence files, taken once per process by whoever reads them first.

At 20 models x 1,000 tasks the verdict log is 300 MB: `konkord report` hashed it twice, once
to check its saved columns (`verdict_saved`: they are used only where the log still begins
with the bytes they were made from) and once for the digest of the report's inputs
(`stages.report.freshness`). The first reader promises the hash here, the second takes it.

A hash is handed out only for the version of the file it was taken from (device, inode, size,
modification time): an append, a rewrite or a replacement since, and the caller hashes anew.

Between commands, a hash is kept in .konkord/hashes/ with the file's stamp: device, inode,
size, and modification and change times in nanoseconds (`kept_sha256`, `keep`). The next
command takes it where the file still has exactly that stamp, as git takes a file in its index
to be unchanged, rather than hashing 300 MB again (a third of a second of a core, which the
report's verdict columns waited for). Any write to the file moves its change time, which no
user can set back; a copy or a replacement is another inode. A hash is kept only for a file
last changed two seconds or more before it was taken: a write within the same tick of the
file system's clock as the stamp would not move the times (git's "racy" case).

May import: the standard library, `konkord.evidence.parse`, `atomic` and `paths`; nothing
heavy (the report's freshness check reads it before importing numpy).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from concurrent.futures import Future
from pathlib import Path

from konkord.evidence.atomic import write_atomic
from konkord.evidence.parse import FileVersion, file_version
from konkord.evidence.paths import STATE_DIR, outside_problem

KEPT_DIR = STATE_DIR / "hashes"
# Files smaller than this hash in a few milliseconds: their hashes are not kept (tests make
# it small).
KEEP_BYTES = 8 << 20
# A file changed less than this long before its hash was taken may change again within the
# same tick of the file system's clock, leaving its stamp as it was: such a hash is not kept.
SETTLED_NS = 2_000_000_000
Stamp = tuple[int, int, int, int, int]
# A kept record is about 250 bytes; anything past this is not one (and is not read whole).
_KEPT_MAX_BYTES = 4096

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


def stamp_of(fd: int) -> Stamp:
    """The stamp of the open file `fd`: device, inode, size, modification and change times."""
    stat = os.fstat(fd)
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def _kept_path(path: Path) -> Path:
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:20]
    return KEPT_DIR / f"{key}.json"


def kept_sha256(path: Path, stamp: Stamp) -> str | None:
    """The sha256 (hex) kept for the file at `path` by an earlier command, where the file
    has the stamp it had then (`stamp`: its stamp now); else None."""
    if stamp[2] < KEEP_BYTES or outside_problem(KEPT_DIR, Path(".")) is not None:
        return None
    try:
        with _kept_path(path).open("rb") as handle:
            data = handle.read(_KEPT_MAX_BYTES + 1)
        if len(data) > _KEPT_MAX_BYTES:
            return None
        kept = json.loads(data)
        if (
            kept["path"] == str(path.resolve())
            and tuple(kept["stamp"]) == stamp
            and isinstance(kept["sha256"], str)
            and len(kept["sha256"]) == 64
        ):
            return str(kept["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def take_kept(path: Path, version: FileVersion, stamp: Stamp) -> str | None:
    """The hash kept for the file at `path` as it is (`version`, `stamp`: the caller's open
    file), handed on to this process's later readers as well; None where none is kept."""
    kept = kept_sha256(path, stamp)
    if kept is not None:
        record(path, version, kept)
    return kept


def keep(path: Path, stamp: Stamp, sha256: str, taken_ns: int) -> None:
    """Keep the sha256 (hex) of the file at `path`, which had `stamp` when hashing began at
    `taken_ns` (`time.time_ns()`), for the commands after; not where the file had changed
    within `SETTLED_NS` before, nor where .konkord leads out of the project. Best effort: a
    hash not kept is taken again."""
    if stamp[2] < KEEP_BYTES or taken_ns - max(stamp[3], stamp[4]) < SETTLED_NS:
        return
    if outside_problem(KEPT_DIR, Path(".")) is not None:
        return
    record_text = json.dumps({"path": str(path.resolve()), "stamp": stamp, "sha256": sha256})
    try:
        KEPT_DIR.mkdir(parents=True, exist_ok=True)
        write_atomic(_kept_path(path), record_text, durable=False)
    except OSError:
        pass


def forget(path: Path) -> None:
    """Drop what is known of the hash of the file at `path`, in this process and kept: a
    kept hash the saved columns disagreed with is not handed on."""
    PROMISED.pop(str(path.resolve()), None)
    with contextlib.suppress(OSError):
        _kept_path(path).unlink(missing_ok=True)


def sha256_of(path: Path) -> bytes | None:
    """The sha256 of the whole file at `path`: as a reader took it already, or kept by an
    earlier command for the file as it is, or hashed here (in chunks: a verdict log can be
    300 MB) and kept for the readers after; None where there is no file. Raises OSError
    where it cannot be read."""
    known = known_sha256(path)
    if known is not None:
        return known
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return None
    with handle:
        fd = handle.fileno()
        before = file_version(fd)
        stamp = stamp_of(fd)
        kept = take_kept(path, before, stamp)
        if kept is not None:
            return bytes.fromhex(kept)
        taken_ns = time.time_ns()
        digest = hashlib.sha256()
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
        if file_version(fd) == before and stamp_of(fd) == stamp:
            record(path, before, digest.hexdigest())
            keep(path, stamp, digest.hexdigest(), taken_ns)
    return digest.digest()
