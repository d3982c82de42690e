"""The run's evidence log: append-only JSONL files under runs/<run>/, one record per line.

Human labels cost hours and API calls cost money, so every record is written with one `write`
under an exclusive lock and fsynced before `append` returns. A crash mid-write can leave a torn
last line; it is reported on read and cut away (kept in a .torn file) on the next append.
Later records supersede earlier ones with the same key; nothing is rewritten in place.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from konkord.errors import KonkordError
from konkord.evidence.atomic import fsync_dir
from konkord.evidence.parse import (
    PARSED,
    Collector,
    ParsedStreams,
    ReadResult,
    ReadsItself,
    Record,
    RecordList,
    file_version,
    parse_stream,
    parses_as_record,
)

__all__ = [
    "PARSED", "STREAM_KEYS", "AsyncAppender", "Collector", "EvidenceLog", "Key",
    "ParsedStreams", "ReadResult", "Record", "RecordList", "TornLineWarning", "encode_record",
    "now_iso", "parse_stream", "record_key",
]  # fmt: skip

Key = tuple[Any, ...]

STREAM_KEYS: dict[str, tuple[str, ...]] = {
    "answers": ("task_id", "model", "settings_hash"),
    "verdicts": ("task_id", "model_a", "model_b", "order", "judge", "frame_hash"),
    "prompts": ("frame_hash",),
    "labels": ("task_id", "model_a", "model_b", "labeller"),
    "checks": ("task_id", "model", "check"),
    "batches": ("input_file_id",),  # provider batches: uploaded, submitted, collected
    "designs": ("design", "round"),  # each round of a pair design: its pairs and why
}

_TAIL_CHUNK = 65536
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class TornLineWarning(UserWarning):
    """A crash left half a record at the end of a log; it is ignored and repaired on next append."""


def now_iso() -> str:
    """A UTC timestamp for records, to the second, so logs diff cleanly."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def record_key(stream: str, record: Record) -> Key:
    """The key under which a record supersedes earlier ones in its stream."""
    return tuple(record.get(field) for field in STREAM_KEYS[stream])


def encode_record(record: Record) -> bytes:
    """One record as one JSON line. Readable UTF-8 where possible; text with lone surrogates
    (possible in untrusted model output) falls back to \\u escapes, which still round-trip."""
    try:
        line = json.dumps(record, ensure_ascii=False, sort_keys=True).encode()
    except UnicodeEncodeError:
        line = json.dumps(record, ensure_ascii=True, sort_keys=True).encode()
    return line + b"\n"


class EvidenceLog:
    """The evidence of one run: a directory of JSONL streams (answers, verdicts, labels, ...)."""

    def __init__(self, run_dir: Path | str) -> None:
        self.run_dir = Path(run_dir)
        self.repairs: list[str] = []  # what append repaired, for the command to report

    @classmethod
    def for_run(cls, name: str, root: Path | str = "runs") -> EvidenceLog:
        """The log of run `name` under the runs directory."""
        return cls(Path(root) / name)

    def path(self, stream: str) -> Path:
        """The file holding one stream."""
        if stream not in STREAM_KEYS:
            raise ValueError(f"unknown evidence stream {stream!r}")
        return self.run_dir / f"{stream}.jsonl"

    def exists(self) -> bool:
        """Whether any evidence has been written for this run."""
        return self.run_dir.is_dir() and any(self.run_dir.glob("*.jsonl"))

    @contextmanager
    def _locked(self, stream: str) -> Iterator[int]:
        path = self.path(stream)
        created = not path.exists()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if created:
                fsync_dir(self.run_dir)  # a new file must survive a crash too
            yield fd
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _repair_torn_tail(self, stream: str, fd: int) -> None:
        """Under the lock: make the file end with a newline before appending to it.

        A last line that is a whole record but lost its newline gets the newline back; anything
        else after the last newline is half a record, moved to <stream>.torn and cut away.
        """
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        start = size
        tail = b""
        while start > 0:
            step = min(_TAIL_CHUNK, start)
            start -= step
            tail = os.pread(fd, step, start) + tail
            if b"\n" in tail[:step]:
                break
        cut_in_tail = tail.rfind(b"\n") + 1
        cut = start + cut_in_tail
        fragment = tail[cut_in_tail:]
        path = self.path(stream)
        if parses_as_record(fragment):
            os.write(fd, b"\n")
            self.repairs.append(f"{path}: the last record had lost its newline; restored")
        else:
            torn_path = path.with_suffix(".torn")
            with open(torn_path, "ab") as torn:
                torn.write(fragment + b"\n")
                torn.flush()
                os.fsync(torn.fileno())
            os.ftruncate(fd, cut)
            self.repairs.append(
                f"{path}: cut an incomplete last line ({len(fragment)} bytes, left by a crash "
                f"mid-write); it is kept in {torn_path}"
            )
        os.fsync(fd)

    def append(self, stream: str, record: Record) -> None:
        """Append one record durably: locked, one write, fsynced before returning."""
        self.append_many(stream, [record])

    def append_many(self, stream: str, records: list[Record]) -> None:
        """Append several records, each its own line, under one lock and one fsync."""
        if not records:
            return
        payload = b"".join(encode_record(r) for r in records)
        with self._locked(stream) as fd:
            self._repair_torn_tail(stream, fd)
            written = 0
            while written < len(payload):
                written += os.write(fd, payload[written:])
            os.fsync(fd)

    def read(self, stream: str) -> ReadResult:
        """Every record of a stream in write order; a torn last line is skipped and reported.

        Parsed once per process: report, calibrate, judges and build each read the same
        streams, so the parse is kept (see `ParsedStreams`) until the file changes. The records
        returned are shared; a caller must not change them.
        """
        return self.read_into(stream, RecordList, PARSED)

    def read_into(
        self, stream: str, collector: Callable[[], Collector[T]], cache: ParsedStreams
    ) -> T:
        """A stream parsed a chunk at a time into what `collector` makes of its records (a list
        of them, or columns: `konkord.evidence.verdict_table`), kept in `cache` until the file
        changes; a torn last line is skipped and reported."""
        path = self.path(stream)
        try:
            handle = open(path, "rb")  # noqa: SIM115 (closed by the `with` below)
        except FileNotFoundError:
            return collector().result(path, False)
        except OSError as exc:
            raise KonkordError(f"{path}: cannot read ({exc.strerror or exc})") from None
        with handle:
            made, torn = self._read_locked(path, handle, collector, cache)
        if torn:
            warnings.warn(
                f"{path}: the last line is incomplete (a crash mid-write?); it is ignored "
                "and will be cut away (kept in a .torn file) on the next append",
                TornLineWarning,
                stacklevel=3,
            )
        return made

    def _read_locked(
        self,
        path: Path,
        handle: BinaryIO,
        collector: Callable[[], Collector[T]],
        cache: ParsedStreams,
    ) -> tuple[T, bool]:
        """The parse of an open stream, made under a shared lock (never half of a record
        another process is writing). A file that ends with a newline is whole up to the size
        seen under the lock, and appends only add after it: the lock is let go before its
        bytes are read and parsed, so writers do not wait on a long parse."""
        fd = handle.fileno()
        fcntl.flock(fd, fcntl.LOCK_SH)
        locked = True
        try:
            version = file_version(fd)
            size = version[2]
            cached: tuple[T, bool] | None = cache.get(path, version)
            if cached is not None:
                return cached
            if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
                fcntl.flock(fd, fcntl.LOCK_UN)  # a torn tail may be cut: then keep the lock
                locked = False
            made = collector()
            if isinstance(made, ReadsItself):
                torn = made.read_stream(path, handle, size)
            else:
                torn = parse_stream(path, handle, size, made)
            cached = (made.result(path, torn), torn)
        except OSError as exc:
            raise KonkordError(f"{path}: cannot read ({exc.strerror or exc})") from None
        finally:
            if locked:
                fcntl.flock(fd, fcntl.LOCK_UN)
        cache.put(path, version, cached)
        return cached

    def records(self, stream: str) -> list[Record]:
        """Every record of a stream, in write order."""
        return self.read(stream).records

    def latest(
        self, stream: str, where: Callable[[Record], bool] | None = None
    ) -> dict[Key, Record]:
        """The newest record per key (later records supersede earlier ones)."""
        out: dict[Key, Record] = {}
        for record in self.records(stream):
            if where is None or where(record):
                out[record_key(stream, record)] = record
        return out


class AsyncAppender:
    """Appends from async code without blocking the event loop, with group commit.

    `await append(record)` returns once that record is on disk (fsynced), like
    `EvidenceLog.append`; records that arrive while a write is in progress go out together in
    the next write, so a burst of answers costs one fsync rather than one each.
    """

    def __init__(self, log: EvidenceLog, stream: str) -> None:
        log.path(stream)  # refuse an unknown stream now, not in the writer
        self.log = log
        self.stream = stream
        self._pending: list[tuple[Record, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def append(self, record: Record) -> None:
        """Queue one record and wait until it is durable."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # A waiter cancelled mid-write (the second Ctrl-C) stops listening to its future, and
        # the write's outcome would be reported at exit as "never retrieved": it is read here.
        future.add_done_callback(_seen)
        self._pending.append((record, future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._drain())
        await asyncio.shield(future)

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await asyncio.to_thread(self.log.append_many, self.stream, [r for r, _ in batch])
            except BaseException as exc:
                cancelled = isinstance(exc, asyncio.CancelledError)
                for _, future in batch:
                    if not future.done():
                        if cancelled:
                            future.cancel()
                        else:
                            future.set_exception(exc)
                if cancelled:
                    raise
            else:
                for _, future in batch:
                    if not future.done():
                        future.set_result(None)


def _seen(future: asyncio.Future[None]) -> None:
    """Mark a write's outcome as read (its waiter may be gone); the waiter still gets it."""
    if not future.cancelled():
        future.exception()
