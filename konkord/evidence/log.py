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
from typing import Any

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
        path = self.path(stream)
        try:
            with open(path, "rb") as handle:
                # A shared lock: never read half of a record another process is writing.
                fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
                stat = os.fstat(handle.fileno())
                version = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
                cached = PARSED.get(path, version)
                content = b"" if cached is not None else handle.read()
        except FileNotFoundError:
            return ReadResult([], False)
        except OSError as exc:
            raise KonkordError(f"{path}: cannot read ({exc.strerror or exc})") from None
        if cached is None:
            cached = parse_stream(path, content)
            PARSED.put(path, version, cached)
        if cached.torn:
            warn_torn(path)
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


def warn_torn(path: Path) -> None:
    """Say that a stream's last line is torn (ignored, cut away on the next append)."""
    warnings.warn(
        f"{path}: the last line is incomplete (a crash mid-write?); it is ignored "
        "and will be cut away (kept in a .torn file) on the next append",
        TornLineWarning,
        stacklevel=3,
    )


def parse_stream(path: Path, content: bytes) -> ReadResult:
    """A stream's bytes as records. The whole file is parsed as one JSON array, its newlines
    turned into commas in one copy of the bytes (no list of lines: a 300 MB verdict log is held
    twice at most while parsing, not four times); a file that does not parse that way (a blank
    line, a bad record) is read line by line, which names the line at fault."""
    end = content.rfind(b"\n") + 1
    last = content[end:]
    torn = bool(last.strip()) and not _parses_as_record(last)
    body = content if last.strip() and not torn else content[:end]
    records = _parse_array(_as_array(body)) if body.strip() else []
    if records is None:  # blank lines, or a record that is not JSON
        lines = [line for line in body.split(b"\n") if line.strip()]
        records = _parse_array(b"[" + b",".join(lines) + b"]") if lines else []
    if records is None or not all(isinstance(record, dict) for record in records):
        _name_bad_line(path, content)
    wrong = check_fields(path.stem, records or [])
    if wrong is not None:  # a hand edit: name its line (the index counts non-blank lines)
        index, problem = wrong
        number = [n for n, line in enumerate(content.split(b"\n"), start=1) if line.strip()][index]
        raise KonkordError(
            f"{path}:{number}: {problem}; was the evidence log edited by hand? Restore it from git"
        )
    return ReadResult(records or [], torn)


_COMMAS = bytes.maketrans(b"\n", b",")
_CHUNK = 1 << 22


def _as_array(body: bytes) -> bytearray:
    """`[line,line,...]` from `line\\nline\\n...`: one copy of the bytes."""
    body = body.rstrip(b"\n")
    array = bytearray(len(body) + 2)
    array[0:1] = b"["
    view = memoryview(body)
    for start in range(0, len(body), _CHUNK):  # chunk by chunk: no third copy of the file
        part = view[start : start + _CHUNK]
        array[1 + start : 1 + start + len(part)] = part.tobytes().translate(_COMMAS)
    array[-1:] = b"]"
    return array


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


def _name_bad_line(path: Path, content: bytes) -> None:
    """Raise the error naming the first line of `content` that is not a JSON record."""
    lines = content.split(b"\n")[:-1]
    number = next(
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
        self._parsed: dict[str, tuple[tuple[int, ...], ReadResult]] = {}

    def get(self, path: Path, version: tuple[int, ...]) -> ReadResult | None:
        """The parse of `path` if it was made from this version of the file."""
        found = self._parsed.get(str(path.resolve()))
        return found[1] if found is not None and found[0] == version else None

    def put(self, path: Path, version: tuple[int, ...], parsed: ReadResult) -> None:
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
