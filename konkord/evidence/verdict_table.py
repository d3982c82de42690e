"""A run's verdict log as columns: one row per record, held as small integers and shared text.

At 20 models x 1,000 tasks a run holds 380,000 verdict records. As a dict each they take about
700 bytes apiece (270 MB) before anything is computed from them; here each is a few dozen bytes:
its names, hashes and outcome as codes into one pool of distinct strings (a judge's name, a task
id or an answer's hash is stored once however often it recurs), its numbers in numpy arrays, its
rationale as one shared reference. The raw replies (`raw`, `first_raw`) are not held: a row reads
them back from its line in the file when asked, which no figure of the report does.

A row (`VerdictRow`) reads like the record it came from (a read-only mapping with the same keys
and values), so code written for records works on rows; the hot paths (the latest record per
key, freshness, combining orders, counting) work on the columns directly.

This module keeps one table per process and version of the file; it is built while the log is
parsed, a chunk at a time (`verdict_build.py`), by two processes where the log is large
(`verdict_split.py`); the table and its rows live in `verdict_rows.py`.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

from konkord.errors import KonkordError
from konkord.evidence import log_hashes, verdict_saved, verdict_split
from konkord.evidence.log import EvidenceLog, ParsedStreams
from konkord.evidence.parse import FileVersion, file_version, parse_stream
from konkord.evidence.verdict_build import ColumnBuilder
from konkord.evidence.verdict_rows import RowList, VerdictRow, VerdictTable, rows_of_one_table
from konkord.evidence.verdict_saved import load_saved, prefix_sha256, save_table, saved_path
from konkord.evidence.verdict_split import read_split

__all__ = [
    "TABLES", "RowList", "VerdictRow", "VerdictTable", "finish_saving", "reading_early",
    "rows_of_one_table", "save_columns", "start_early", "verdict_table",
]  # fmt: skip


# The tables made in this process, each kept until its log changes (as `log.PARSED` keeps
# parsed records): report, calibrate, judges and build share one.
TABLES = ParsedStreams()


def verdict_table(log: EvidenceLog) -> VerdictTable:
    """The run's verdict log as columns, parsed once per process and version of the file, from
    the columns saved by an earlier command where the log still begins with what they were
    made from (`verdict_saved`): only lines appended since are parsed."""
    return log.read_into("verdicts", _TrimmedBuilder, TABLES)


# Saved columns being read on a thread (`start_early`), by the log's path: the version of the
# log they were checked against, and the columns with the bytes they cover (or None).
EARLY: dict[str, tuple[FileVersion, Future[tuple[int, dict[str, Any]] | None]]] = {}
# Columns being saved on threads of their own (`finish_saving` waits for them).
SAVING: list[threading.Thread] = []


def start_early(path: Path) -> None:
    """Begin reading the log at `path` now, for a command that reads it after other work
    (`konkord report`: its imports and the answers, about a second): its saved columns, where
    there are some, are read and checked against the log on a thread; else the later part of
    a large log starts parsing in a worker process (`verdict_split.start_early`)."""
    key = str(path.resolve())
    if key in EARLY:
        return
    at = saved_path(path)
    if not at.is_file():
        verdict_split.start_early(path)
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    version = file_version(fd)

    # Checking the columns hashes the log's first bytes they cover: all of it, where nothing
    # was appended since they were saved, and the report's digest then takes that hash; or
    # the digest was taken first (a stale results file), and the check takes its hash; or an
    # earlier command kept the hash of the log as it is (`log_hashes.kept_sha256`).
    known = log_hashes.known_sha256(path)
    stamp = log_hashes.stamp_of(fd)
    kept = None if known is not None else log_hashes.take_kept(path, version, stamp)
    if kept is not None:
        known = bytes.fromhex(kept)
    whole = None if known is not None else log_hashes.promise(path, version)

    def load() -> tuple[int, dict[str, Any]] | None:
        found = None
        taken_ns = time.time_ns()
        try:
            found = load_saved(at, fd, version[2], None if known is None else known.hex())
            return found
        finally:
            covers_all = found is not None and found[0] == version[2]
            if kept is not None and found is None:  # the kept hash, or the columns, wrong
                log_hashes.forget(path)
            if whole is not None and found is not None and covers_all:
                _keep_hash(path, fd, stamp, found[1]["log_sha256"], taken_ns)
            os.close(fd)
            if whole is not None:
                whole.set_result(found[1]["log_sha256"] if found and covers_all else None)

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="konkord-columns")
    try:
        EARLY[key] = (version, pool.submit(load))
    except BaseException:  # no thread to be had: nobody waits for a hash never taken
        os.close(fd)
        if whole is not None:
            whole.set_result(None)
        raise
    pool.shutdown(wait=False)


def reading_early(path: Path) -> bool:
    """Whether the saved columns of the log at `path` are still being read and checked on the
    thread `start_early` started (a caller with other work may do it meanwhile)."""
    early = EARLY.get(str(path.resolve()))
    return early is not None and not early[1].done()


def _saved_columns(path: Path, fd: int, size: int) -> tuple[int, dict[str, Any]] | None:
    """The columns saved for this log that it still begins with: as read early, if the log is
    the same file, size and modification time as then, else read now."""
    early = EARLY.pop(str(path.resolve()), None)
    if early is not None:
        version, future = early
        loaded = future.result()
        if version == file_version(fd) and version[2] == size:
            return loaded
    # Read now: with the hash of the whole log where a reader took it already (or an earlier
    # command kept it), or handing on the one taken here (`log_hashes`: `konkord build`
    # checks the verdicts, then the digest).
    version = file_version(fd)
    stamp = log_hashes.stamp_of(fd)
    whole = log_hashes.known_sha256(path, version) if version[2] == size else None
    kept = None
    if whole is None and version[2] == size:
        kept = log_hashes.take_kept(path, version, stamp)
    taken_ns = time.time_ns()
    if kept is not None:
        loaded = load_saved(saved_path(path), fd, size, kept)
        if loaded is None:  # the kept hash, or the columns, wrong: the digest hashes the log
            log_hashes.forget(path)
        return loaded
    loaded = load_saved(saved_path(path), fd, size, None if whole is None else whole.hex())
    if whole is None and loaded is not None and loaded[0] == size == version[2]:
        log_hashes.record(path, version, loaded[1]["log_sha256"])
        _keep_hash(path, fd, stamp, loaded[1]["log_sha256"], taken_ns)
    return loaded


def _keep_hash(path: Path, fd: int, stamp: log_hashes.Stamp, sha256: str, taken_ns: int) -> None:
    """Keep the hash of the whole log just taken for the commands after, where the log kept
    its stamp while it was hashed."""
    if log_hashes.stamp_of(fd) == stamp:
        log_hashes.keep(path, stamp, sha256, taken_ns)


def save_columns(log: EvidenceLog) -> None:
    """Save the log's columns now, where it is large enough for them to be kept and they are
    not saved already (`konkord judge` does, last): made from the columns saved before and the
    lines after them."""
    try:
        size = log.path("verdicts").stat().st_size
    except OSError:
        return
    if size >= verdict_saved.SAVE_BYTES:
        try:
            verdict_table(log)
        finally:
            finish_saving()


def finish_saving() -> None:
    """Wait for the columns being saved (a command that saves them on purpose: the judge)."""
    while SAVING:
        SAVING.pop().join()


class _Shifted:
    """A builder fed the lines after `base` bytes of the log: their places in the file are
    counted from its start."""

    checks_fields = True

    def __init__(self, into: ColumnBuilder, base: int) -> None:
        self.into = into
        self.base = base
        self.decode = into.decode

    def add(self, records: list[Any], chunk: bytes, start: int) -> None:
        self.into.add(records, chunk, self.base + start)

    def result(self, path: Path, torn: bool) -> bool:
        return torn


class _TrimmedBuilder(ColumnBuilder):
    """The builder, from the saved columns and the lines after them, handing the memory the
    parsed records took back to the system when done, and saving the columns for the next
    command where it parsed any of a large log."""

    def read_stream(self, path: Path, handle: BinaryIO, size: int) -> bool:
        """The log's saved columns and the lines after them, else the log parsed whole, in two
        processes where it is large (`verdict_split`)."""
        fd = handle.fileno()
        saved = _saved_columns(path, fd, size) if size else None
        covers = 0
        torn = False
        if saved is not None:
            covers, message = saved
            self.merge(message)
            if covers < size:
                handle.seek(covers)
                try:
                    torn = parse_stream(path, handle, size - covers, _Shifted(self, covers))
                except KonkordError:  # named by its line in the whole log, as a full read does
                    handle.seek(0)
                    self.reset()
                    covers = 0
                    torn = read_split(self, path, handle, size)
        else:
            torn = read_split(self, path, handle, size)
        self.save_from: tuple[int, int] | None = None
        large = size >= verdict_saved.SAVE_BYTES
        if large and covers < size and not torn and os.pread(fd, 1, size - 1) == b"\n":
            self.save_from = (os.dup(fd), size)  # columns of whole lines only
        return torn

    def result(self, path: Path, torn: bool) -> VerdictTable:
        table = super().result(path, torn)
        save_from = getattr(self, "save_from", None)
        self.__dict__.clear()
        _trim_heap()
        if save_from is not None:
            saving = threading.Thread(
                target=_save, args=(table, *save_from, saved_path(path), path),
                name="konkord-save",
            )
            saving.start()
            SAVING.append(saving)
        return table


def _save(table: VerdictTable, fd: int, size: int, at: Path, log: Path) -> None:
    """Keep the columns of the first `size` bytes of the log at `log`, open as `fd`, in `at`
    (and the log's hash, where they cover all of it)."""
    try:
        stamp = log_hashes.stamp_of(fd)
        taken_ns = time.time_ns()
        sha256 = prefix_sha256(fd, size)
        if save_table(table, size, sha256, at) and stamp[2] == size:
            _keep_hash(log, fd, stamp, sha256, taken_ns)
    finally:
        os.close(fd)


def _trim_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's malloc_trim): the chunks of
    records parsed and dropped leave holes that numpy's later arrays (mapped on their own) do
    not reuse, and that would otherwise count in the process's memory to the end. Found among
    the symbols the interpreter already has: `ctypes.util.find_library` would start
    `ldconfig`, a process forked from this one (200 MB by then; its peak is what a parent's
    count of its children's memory shows)."""
    import contextlib
    import ctypes

    with contextlib.suppress(OSError, AttributeError, TypeError):  # not glibc: nothing to do
        ctypes.CDLL(None).malloc_trim(0)
