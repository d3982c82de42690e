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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TypeVar

import pydantic_core

from konkord.errors import KonkordError
from konkord.evidence.atomic import fsync_dir
from konkord.evidence.fields import check_fields

Record = dict[str, Any]
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


@dataclass(frozen=True)
class ReadResult:
    """Records read from one stream, and whether its last line was torn."""

    records: list[Record]
    torn: bool


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


def _parses_as_record(line: bytes) -> bool:
    """Whether a line is a whole record (a JSON object cannot be cut and still parse)."""
    try:
        return isinstance(json.loads(line), dict)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


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
        if _parses_as_record(fragment):
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
            stat = os.fstat(fd)
            version = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
            cached: tuple[T, bool] | None = cache.get(path, version)
            if cached is not None:
                return cached
            if stat.st_size == 0 or os.pread(fd, 1, stat.st_size - 1) == b"\n":
                fcntl.flock(fd, fcntl.LOCK_UN)  # a torn tail may be cut: then keep the lock
                locked = False
            made = collector()
            torn = parse_stream(path, handle, stat.st_size, made)
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


class Collector(Protocol[T_co]):
    """What a stream's records are gathered into as its chunks are parsed."""

    def add(self, records: list[Record], chunk: bytes, start: int) -> None:
        """The records of `chunk`, whole lines beginning at byte `start` of the file."""

    def result(self, path: Path, torn: bool) -> T_co:
        """What the stream is, once every chunk was added."""
        ...


class RecordList:
    """The plain collector: every record, in write order."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    def add(self, records: list[Record], chunk: bytes, start: int) -> None:
        self.records.extend(records)

    def result(self, path: Path, torn: bool) -> ReadResult:
        return ReadResult(self.records, torn)


def parse_stream(path: Path, handle: BinaryIO, size: int, into: Collector[Any]) -> bool:
    """The first `size` bytes of a stream parsed into `into`, read and parsed a chunk of whole
    lines at a time (each chunk parsed as one JSON array, its newlines turned into commas): the
    file is never held whole, so a 300 MB verdict log costs what is kept of its records and one
    chunk, not its bytes twice over. A chunk that does not parse that way (a blank line, a bad
    record) is read line by line, which names the line at fault. Returns whether the last line
    was torn."""
    lines_before = 0  # lines (blank ones too) in the chunks already parsed
    start = 0  # where the next chunk begins in the file
    rest = b""
    left = size
    while left > 0:
        data = handle.read(min(_CHUNK, left))
        if not data:
            break
        left -= len(data)
        data = rest + data
        end = data.rfind(b"\n") + 1
        if end == 0 and left > 0:  # one line longer than a chunk: read on
            rest = data
            continue
        chunk, rest = data[:end], data[end:]
        into.add(_parse_chunk(path, chunk, lines_before), chunk, start)
        lines_before += chunk.count(b"\n")
        start += len(chunk)
    torn = bool(rest.strip()) and not _parses_as_record(rest)
    if rest.strip() and not torn:  # a whole record that lost its newline
        into.add(_parse_chunk(path, rest + b"\n", lines_before), rest, start)
    return torn


def _parse_chunk(path: Path, chunk: bytes, lines_before: int) -> list[Record]:
    """The records of a chunk of whole lines, the first `lines_before` lines into the file."""
    parsed = _parse_array(_as_array(chunk)) if chunk.strip() else []
    if parsed is None:  # blank lines, or a record that is not JSON
        lines = [line for line in chunk.split(b"\n") if line.strip()]
        parsed = _parse_array(b"[" + b",".join(lines) + b"]") if lines else []
    if parsed is None or not all(isinstance(record, dict) for record in parsed):
        _name_bad_line(path, chunk, lines_before)
    wrong = check_fields(path.stem, parsed or [])
    if wrong is not None:  # a hand edit: name its line (the index counts non-blank lines)
        index, problem = wrong
        numbers = [n for n, line in enumerate(chunk.split(b"\n"), start=1) if line.strip()]
        raise KonkordError(
            f"{path}:{lines_before + numbers[index]}: {problem}; was the evidence log edited "
            "by hand? Restore it from git"
        )
    return parsed or []


_COMMAS = bytes.maketrans(b"\n", b",")
_CHUNK = 1 << 23


def _as_array(body: bytes) -> bytes:
    """`[line,line,...]` from `line\\nline\\n...`."""
    return b"[" + body.rstrip(b"\n").translate(_COMMAS) + b"]"


def _parse_array(data: bytes | bytearray) -> Any:
    """One JSON array, by pydantic-core's parser where it can: about a third faster than
    `json.loads`, and with cache_strings it keeps one copy of each short string (a judge's
    name, a model's, a task id, an answer's hash: the same few thousand values repeated over
    hundreds of thousands of verdicts), so the parsed records take about half the memory. Text
    it refuses (a lone surrogate escape, kept in the evidence as \\u escapes) goes to
    `json.loads`, which reads it as written; None if neither can."""
    try:
        return pydantic_core.from_json(data, cache_strings="all")
    except ValueError:
        pass
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def _name_bad_line(path: Path, content: bytes, lines_before: int = 0) -> None:
    """Raise the error naming the first line of `content` (after `lines_before` lines of the
    file) that is not a JSON record."""
    lines = content.split(b"\n")[:-1]
    number = lines_before + next(
        (
            n
            for n, line in enumerate(lines, start=1)
            if line.strip() and not _parses_as_record(line)
        ),
        len(lines) + 1,
    )
    raise KonkordError(
        f"{path}:{number}: not a JSON record; was the evidence log edited by hand? "
        "Restore it from git"
    )


class ParsedStreams:
    """The streams parsed in this process, each kept with the version of the file it was
    parsed from (device, inode, size, modification time in ns): an append changes the size,
    a rewrite the inode or the time, so a changed file is parsed again."""

    def __init__(self) -> None:
        self._parsed: dict[str, tuple[tuple[int, ...], Any]] = {}

    def get(self, path: Path, version: tuple[int, ...]) -> Any:
        """The parse of `path` if it was made from this version of the file, else None."""
        found = self._parsed.get(str(path.resolve()))
        return found[1] if found is not None and found[0] == version else None

    def put(self, path: Path, version: tuple[int, ...], parsed: Any) -> None:
        self._parsed[str(path.resolve())] = (version, parsed)

    def clear(self) -> None:
        """Forget every parse (a long-lived process that wants the memory back)."""
        self._parsed.clear()


PARSED = ParsedStreams()


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
