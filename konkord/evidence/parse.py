"""Reading an evidence stream: a chunk of whole lines at a time, each chunk parsed as one JSON
array and handed to a collector (the plain list of records, or the verdict columns), and the
parses kept per process until their file changes. Writing, locking and repair stay in `log.py`,
which re-exports these names.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TypeVar, runtime_checkable

import pydantic_core

from konkord.errors import KonkordError
from konkord.evidence.fields import check_fields

Record = dict[str, Any]
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True)
class ReadResult:
    """Records read from one stream, and whether its last line was torn."""

    records: list[Record]
    torn: bool


def parses_as_record(line: bytes) -> bool:
    """Whether a line is a whole record (a JSON object cannot be cut and still parse)."""
    try:
        return isinstance(json.loads(line), dict)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


class Reader(Protocol):
    """What a stream is read from: an open binary file, or anything that reads like one."""

    def read(self, size: int, /) -> bytes: ...


@runtime_checkable
class ReadsItself(Protocol):
    """A collector that reads its stream its own way (the verdict columns: in two processes
    where the log is large) rather than through `parse_stream`."""

    def read_stream(self, path: Path, handle: BinaryIO, size: int) -> bool:
        """The first `size` bytes of the stream at `path`, open as `handle`, read into the
        collector; returns whether the last line was torn."""
        ...


class WrongField(Exception):
    """What a collector that checks its records' field types itself (`checks_fields`) raises
    from `add` when one is wrong; the reader then finds the record and names its line."""


class Collector(Protocol[T_co]):
    """What a stream's records are gathered into as its chunks are parsed. One with a true
    `checks_fields` attribute checks the types of the known fields itself while it takes the
    records apart (raising `WrongField`), so the reader's own record-by-record check is
    skipped. One with a `decode` method parses each chunk (a JSON array) into records of its
    own kind where it can (None where it cannot: then into dicts, as for any collector)."""

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


def parse_stream(path: Path, handle: Reader, size: int, into: Collector[Any]) -> bool:
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
    checked = bool(getattr(into, "checks_fields", False))
    decode = getattr(into, "decode", None)
    while left > 0:
        data = handle.read(min(CHUNK_BYTES, left))
        if not data:
            break
        left -= len(data)
        end = data.rfind(b"\n") + 1
        if end == 0:  # one line longer than a chunk (or the last, cut short): read on
            rest += data
            continue
        # the chunk made in one copy (slicing, then joining, would copy it twice)
        chunk = data if not rest and end == len(data) else b"".join((rest, memoryview(data)[:end]))
        rest = data[end:]
        records, lines = _parse_chunk(path, chunk, lines_before, not checked, decode)
        _add(into, path, records, chunk, start, lines_before)
        lines_before += lines
        start += len(chunk)
    torn = bool(rest.strip()) and not parses_as_record(rest)
    if rest.strip() and not torn:  # a whole record that lost its newline
        records, _ = _parse_chunk(path, rest + b"\n", lines_before, not checked, decode)
        _add(into, path, records, rest, start, lines_before)
    return torn


def _add(
    into: Collector[Any], path: Path, records: list[Record], chunk: bytes, start: int,
    lines_before: int,
) -> None:  # fmt: skip
    """The records of a chunk added to `into`; a wrong field it found named by its line."""
    try:
        into.add(records, chunk, start)
    except WrongField:
        if records and type(records[0]) is not dict:  # decoded by the collector: as dicts
            records, _ = _parse_chunk(path, chunk, lines_before)
        _raise_wrong_field(path, records, chunk, lines_before)
        raise  # the collector saw a wrong type the check does not: not expected


def _parse_chunk(
    path: Path,
    chunk: bytes,
    lines_before: int,
    check: bool = True,
    decode: Callable[[bytearray], list[Any] | None] | None = None,
) -> tuple[list[Record], int]:
    """The records of a chunk of whole lines, the first `lines_before` lines into the file,
    and the number of lines the chunk has (blank ones too); their fields' types checked
    unless `check` is False (the collector checks them). A collector's own `decode` is tried
    first (it returns None for anything it does not take), then the plain parse to dicts."""
    newlines = _newlines(chunk)
    lines = len(newlines)
    parsed: Any = None
    if chunk and not chunk.isspace():
        array = _as_array(chunk, newlines)
        parsed = decode(array) if decode is not None else None
        if parsed is not None:  # one object per line, each of the collector's own kind
            if len(parsed) != lines - _trailing(chunk) + 1:
                _name_bad_line(path, chunk, lines_before)  # a line of more than one record
            return parsed, lines
        parsed = _parse_array(array)
    else:
        parsed = []
    if parsed and len(parsed) != lines - _trailing(chunk) + 1:
        _name_bad_line(path, chunk, lines_before)  # a line of more than one record
    if parsed is None:  # blank lines, or a record that is not JSON
        lines_of = [line for line in chunk.split(b"\n") if line.strip()]
        parsed = _parse_array(b"[" + b",".join(lines_of) + b"]") if lines_of else []
        if parsed and len(parsed) != len(lines_of):
            _name_bad_line(path, chunk, lines_before)
    if parsed is None or not set(map(type, parsed)) <= {dict}:
        _name_bad_line(path, chunk, lines_before)
    if check:
        _raise_wrong_field(path, parsed or [], chunk, lines_before)
    return parsed or [], lines


def _trailing(chunk: bytes) -> int:
    """How many newlines a chunk ends with."""
    count = 0
    while count < len(chunk) and chunk[-1 - count] == 10:
        count += 1
    return count


def _raise_wrong_field(path: Path, records: list[Record], chunk: bytes, lines_before: int) -> None:
    """Raise the error naming the first record of a chunk whose known field has the wrong
    type (a hand edit), if there is one."""
    wrong = check_fields(path.stem, records)
    if wrong is not None:  # name its line (the index counts non-blank lines)
        index, problem = wrong
        numbers = [n for n, line in enumerate(chunk.split(b"\n"), start=1) if line.strip()]
        raise KonkordError(
            f"{path}:{lines_before + numbers[index]}: {problem}; was the evidence log edited "
            "by hand? Restore it from git"
        )


CHUNK_BYTES = 1 << 23  # bytes read and parsed at a time (tests make it small)


def _newlines(body: bytes) -> Any:
    """Where the newlines of `body` are (a numpy array of positions)."""
    import numpy as np  # (here: reading evidence is the only use, and not every command does)

    return np.flatnonzero(np.frombuffer(body, dtype=np.uint8) == 10)


def _as_array(body: bytes, newlines: Any) -> bytearray:
    """`[line,line,...]` from `line\\nline\\n...` whose newlines are at `newlines`, made in one
    copy: each newline turned into a comma, the first of those ending the text into the
    closing bracket and any after it into spaces. (Joining bytes objects of 8 MB costs more
    than the copy: each is a fresh block of memory the system has to map.)"""
    import numpy as np

    size = len(body)
    out = bytearray(size + 2)
    view = np.frombuffer(out, dtype=np.uint8)
    view[1:-1] = np.frombuffer(body, dtype=np.uint8)
    view[newlines + 1] = 44  # ,
    trailing = _trailing(body)
    view[0] = 91  # [
    view[size + 1 - trailing] = 93  # ]
    view[size + 2 - trailing :] = 32  # (space)
    return out


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
            if line.strip() and not parses_as_record(line)
        ),
        len(lines) + 1,
    )
    raise KonkordError(
        f"{path}:{number}: not a JSON record; was the evidence log edited by hand? "
        "Restore it from git"
    )


FileVersion = tuple[int, ...]


def file_version(fd: int, size: int | None = None) -> FileVersion:
    """Which version of a file the open `fd` is: (device, inode, size, modification time),
    with `size` in place of its size where the caller read only that much. What a parse is
    kept by (`ParsedStreams`), and what an early reader checks it still has."""
    stat = os.fstat(fd)
    return (stat.st_dev, stat.st_ino, stat.st_size if size is None else size, stat.st_mtime_ns)


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
