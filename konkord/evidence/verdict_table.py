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
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
import pydantic_core

from konkord.evidence.log import EvidenceLog, ParsedStreams, Record

# Fields held as codes into the pool of distinct strings (null and absent have codes of their
# own), as exact numbers, as flags, as references to shared text, or read back from the file.
# Only fields whose type the log checks on reading (evidence/fields.py) are coded or held as
# numbers; any other field a record has is kept as it was written.
CODED = (
    "task_id", "model_a", "model_b", "order", "judge", "frame_hash", "kind", "winner",
    "position_winner", "answer_a_sha", "answer_b_sha", "finish_reason", "reason",
    "confidence", "created_at",
)  # fmt: skip
INTS = ("tokens_in", "tokens_out")
FLOATS = ("cost_usd", "latency_s")
FLAGS = ("retried",)
TEXTS = ("rationale", "detail")
# Hashes distinct per record, held as bytes in one numpy array: as Python strings they would
# each be an object made while the chunk's records were parsed, and a few of them per memory
# arena keep the whole arena of freed records from going back to the system.
HASHES = ("message_sha",)
FROM_FILE = ("raw", "first_raw")
HELD = (*CODED, *INTS, *FLOATS, *FLAGS, *TEXTS, *HASHES)
_KNOWN = frozenset((*HELD, *FROM_FILE))

ABSENT = 0  # the code of an absent field; None is code 1
_MISSING = object()
# A number's state: absent, null, or which Python type it was written as.
_ABSENT_NUM, _NULL_NUM, _INT_NUM, _FLOAT_NUM = 0, 1, 2, 3
_FLAG_VALUES = {0: _MISSING, 1: None, 2: False, 3: True}
_STATES: dict[Any, int] = {_MISSING: _ABSENT_NUM, None: _NULL_NUM, int: _INT_NUM, float: _FLOAT_NUM}


class _Builder:
    """Columns gathered a chunk of records at a time while the log is parsed: each chunk's
    columns become numpy arrays at once, so no list of Python numbers outlives its chunk."""

    def __init__(self) -> None:
        self.pool: list[Any] = [_MISSING, None]
        self.codes: dict[Any, int] = {_MISSING: ABSENT, None: 1}
        self.coded: dict[str, list[np.ndarray]] = {name: [] for name in CODED}
        self.nums: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {
            name: [] for name in (*INTS, *FLOATS)
        }
        self.flags: dict[str, list[np.ndarray]] = {name: [] for name in FLAGS}
        self.texts: dict[str, list[Any]] = {name: [] for name in TEXTS}
        self.hashes: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {n: [] for n in HASHES}
        self.same: dict[str, str] = {}  # each distinct rationale or detail, held once
        self.files: dict[str, list[np.ndarray]] = {name: [] for name in FROM_FILE}
        self.extra: dict[int, Record] = {}
        self.offsets: list[np.ndarray] = []
        self.lengths: list[np.ndarray] = []
        self.count = 0

    def add(self, records: list[Record], chunk: bytes, start: int) -> None:
        """The records parsed from `chunk` (whole lines beginning at byte `start`), a field at
        a time (one pass in C per field rather than a Python loop per record)."""
        self._add_offsets(records, chunk, start)
        codes = self.codes
        for name in CODED:
            values = _field(records, name)
            for new in set(values).difference(codes):
                codes[new] = len(self.pool)
                self.pool.append(new)
            self.coded[name].append(np.fromiter(map(codes.__getitem__, values), np.int32))
        for name in (*INTS, *FLOATS):
            values = _field(records, name)
            state = np.fromiter(map(_STATES.__getitem__, map(_state_key, values)), np.int8)
            filled = [v if type(v) in (int, float) else 0 for v in values]
            kind = np.int64 if name in INTS else np.float64
            self.nums[name].append((np.array(filled, dtype=kind), state))
        for name in FLAGS:
            flags = _field(records, name)
            self.flags[name].append(
                np.array(
                    [0 if f is _MISSING else 1 if f is None else 3 if f else 2 for f in flags],
                    dtype=np.int8,
                )
            )
        for name in TEXTS:
            values = _field(records, name)
            if len(self.same) < _SAME_MAX:  # one object per distinct text, while they repeat
                values = [self.same.setdefault(v, v) if type(v) is str else v for v in values]
            self.texts[name].extend(values)
        for name in HASHES:
            values = _field(records, name)
            if _all_short_ascii(values):  # the common case, converted by numpy at once
                self.hashes[name].append(
                    (np.array(values, dtype=np.bytes_), np.full(len(values), _HASH_HELD, np.int8))
                )
                continue
            kinds = [_hash_kind(v) for v in values]
            data = [
                v.encode() if k == _HASH_HELD else b"" for v, k in zip(values, kinds, strict=True)
            ]
            self.hashes[name].append(
                (np.array(data or [b""])[: len(data)], np.array(kinds, np.int8))
            )
            for n, got in enumerate(kinds):
                if got == _HASH_ELSEWHERE:  # not a short ASCII text: kept as written
                    self.extra.setdefault(self.count + n, {})[name] = values[n]
        for name in FROM_FILE:
            self.files[name].append(np.array([name in r for r in records], dtype=bool))
        for n, record in enumerate(records):
            if not _KNOWN.issuperset(record):  # fields no column holds: kept as written
                self.extra.setdefault(self.count + n, {}).update(
                    {k: v for k, v in record.items() if k not in _KNOWN}
                )
        self.count += len(records)

    def _add_offsets(self, records: list[Record], chunk: bytes, start: int) -> None:
        """Where each record's line is in the file: its newlines found by numpy; a chunk with
        blank lines (their count differs from the records') is walked line by line."""
        ends = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
        if chunk and not chunk.endswith(b"\n"):  # a last record that lost its newline
            ends = np.append(ends, len(chunk))
        starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
        lengths = ends - starts
        kept = lengths > 0
        if int(kept.sum()) != len(records):  # whitespace-only lines: the exact, slow way
            kept = np.array(
                [
                    bool(chunk[a:b].strip())
                    for a, b in zip(starts.tolist(), ends.tolist(), strict=True)
                ],
                dtype=bool,
            )
        self.offsets.append(starts[kept] + start)
        self.lengths.append(lengths[kept].astype(np.int64))

    def result(self, path: Path, torn: bool) -> VerdictTable:
        def joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
            return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

        return VerdictTable(
            path=path,
            pool=self.pool,
            coded={k: joined(v, np.int32) for k, v in self.coded.items()},
            nums={
                k: (
                    joined([values for values, _ in v], np.int64 if k in INTS else np.float64),
                    joined([state for _, state in v], np.int8),
                )
                for k, v in self.nums.items()
            },
            flags={k: joined(v, np.int8) for k, v in self.flags.items()},
            texts=self.texts,
            hashes={
                k: (
                    joined([data for data, _ in v], np.bytes_),
                    joined([kind for _, kind in v], np.int8),
                )
                for k, v in self.hashes.items()
            },
            files={k: joined(v, np.bool_) for k, v in self.files.items()},
            extra=self.extra,
            offsets=joined(self.offsets, np.int64),
            lengths=joined(self.lengths, np.int64),
        )


_HASH_ABSENT, _HASH_NULL, _HASH_HELD, _HASH_ELSEWHERE = 0, 1, 2, 3
# A judge that words its rationales from a few stock phrases (a simulated one does) repeats the
# same text thousands of times: held once each. Past this many distinct texts they are taken
# as they come (a model's own words rarely repeat, and the lookup would only cost memory).
_SAME_MAX = 50_000


def _hash_kind(value: Any) -> int:
    if value is _MISSING:
        return _HASH_ABSENT
    if value is None:
        return _HASH_NULL
    if type(value) is str and len(value) <= 64 and value.isascii() and "\0" not in value:
        return _HASH_HELD
    return _HASH_ELSEWHERE


def _all_short_ascii(values: list[Any]) -> bool:
    """Whether every value is a text of at most 64 ASCII characters without a NUL (which
    numpy's byte strings would drop)."""
    if not values or set(map(type, values)) != {str}:
        return False
    joined = "".join(values)
    return joined.isascii() and "\0" not in joined and max(map(len, values)) <= 64


def _field(records: list[Record], name: str) -> list[Any]:
    """Field `name` of every record (`_MISSING` where absent), asked in C: no Python frame per
    record."""
    count = len(records)
    return list(map(dict.get, records, repeat(name, count), repeat(_MISSING, count)))


def _state_key(value: Any) -> Any:
    return value if value is _MISSING or value is None else type(value)


class VerdictTable:
    """Every record of a verdict log, in write order, as columns (see the module's note)."""

    def __init__(
        self,
        path: Path,
        pool: list[Any],
        coded: dict[str, np.ndarray],
        nums: dict[str, tuple[np.ndarray, np.ndarray]],
        flags: dict[str, np.ndarray],
        texts: dict[str, list[Any]],
        hashes: dict[str, tuple[np.ndarray, np.ndarray]],
        files: dict[str, np.ndarray],
        extra: dict[int, Record],
        offsets: np.ndarray,
        lengths: np.ndarray,
    ) -> None:
        self.path = path
        self.pool = pool
        self.coded = coded
        self.nums = nums
        self.flags = flags
        self.texts = texts
        self.hashes = hashes
        self.files = files
        self.extra = extra
        self.offsets = offsets
        self.lengths = lengths
        self._codes: dict[Any, int] | None = None
        self._columns: dict[str, list[Any]] = {}

    def __len__(self) -> int:
        return len(self.offsets)

    def code_of(self, value: Any) -> int:
        """The pool code of a value; -1 when no record holds it."""
        if self._codes is None:
            self._codes = {v: i for i, v in enumerate(self.pool) if v is not _MISSING}
        return self._codes.get(value, -1)

    def get_code(self, code: int) -> Any:
        """The value behind a pool code (None for null or absent)."""
        value = self.pool[code]
        return None if value is _MISSING else value

    def column(self, name: str) -> list[Any]:
        """A coded or text field of every record as a list (None where null or absent), made
        once: references to the pooled values, 8 bytes a record, read at list speed."""
        made = self._columns.get(name)
        if made is None:
            if name in self.texts:
                made = [None if v is _MISSING else v for v in self.texts[name]]
            elif name in self.hashes:
                made = [self.get(i, name) for i in range(len(self))]
            else:
                pool = [None if v is _MISSING else v for v in self.pool]
                made = [pool[c] for c in self.coded[name].tolist()]
            self._columns[name] = made
        return made

    def number(self, name: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, present) of a number field at `rows`: present is False where the field is
        null or absent (its value there is 0)."""
        values, state = self.nums[name]
        return values[rows], state[rows] >= _INT_NUM

    def extra_at(self, rows: np.ndarray) -> dict[int, Record]:
        """The fields kept as written (no column holds them) of the records at `rows`."""
        if not self.extra:
            return {}
        wanted = set(rows.tolist())
        return {i: rest for i, rest in self.extra.items() if i in wanted}

    def row(self, index: int) -> VerdictRow:
        """One record as a read-only mapping."""
        return VerdictRow(self, index)

    def rows(self, indices: np.ndarray) -> list[Mapping[str, Any]]:
        """The records at `indices`, in that order (a list that knows where they came from)."""
        return RowList(self, indices)

    def get(self, index: int, name: str, default: Any = None) -> Any:
        """Field `name` of record `index`, as the record holds it."""
        column = self.coded.get(name)
        if column is not None:
            value = self.pool[column[index]]
            return default if value is _MISSING else value
        if name in self.texts:
            value = self.texts[name][index]
            return default if value is _MISSING else value
        if name in self.hashes:
            data, kinds = self.hashes[name]
            kind = kinds[index]
            if kind == _HASH_HELD:
                return bytes(data[index]).decode()
            if kind == _HASH_NULL:
                return None
            if kind == _HASH_ABSENT:
                return default
        if name in self.nums:
            values, state = self.nums[name]
            kind = state[index]
            if kind == _ABSENT_NUM:
                return default
            if kind == _NULL_NUM:
                return None
            return int(values[index]) if kind == _INT_NUM else float(values[index])
        if name in self.flags:
            flag = _FLAG_VALUES[int(self.flags[name][index])]
            return default if flag is _MISSING else flag
        if name in self.files:
            if not self.files[name][index]:
                return default
            return self.line(index).get(name, default)
        extra = self.extra.get(index)
        return default if extra is None else extra.get(name, default)

    def has(self, index: int, name: str) -> bool:
        """Whether record `index` has field `name` (null counts as present)."""
        column = self.coded.get(name)
        if column is not None:
            return bool(column[index] != ABSENT)
        if name in self.texts:
            return self.texts[name][index] is not _MISSING
        if name in self.hashes:
            return bool(self.hashes[name][1][index] != _HASH_ABSENT)
        if name in self.nums:
            return bool(self.nums[name][1][index] != _ABSENT_NUM)
        if name in self.flags:
            return bool(self.flags[name][index] != 0)
        if name in self.files:
            return bool(self.files[name][index])
        extra = self.extra.get(index)
        return extra is not None and name in extra

    def names(self, index: int) -> list[str]:
        """The fields record `index` has, in the file's order (sorted)."""
        held = [name for name in (*HELD, *FROM_FILE) if self.has(index, name)]
        return sorted({*held, *self.extra.get(index, {})})

    def line(self, index: int) -> Record:
        """Record `index` read back whole from its line in the log."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            data = os.pread(fd, int(self.lengths[index]), int(self.offsets[index]))
        finally:
            os.close(fd)
        parsed: Record = pydantic_core.from_json(data)
        return parsed


class VerdictRow(Mapping[str, Any]):
    """One verdict record, read from its table's columns; equal to the record's dict."""

    __slots__ = ("_index", "_table")

    def __init__(self, table: VerdictTable, index: int) -> None:
        self._table = table
        self._index = index

    @property
    def table(self) -> VerdictTable:
        """The table the row belongs to."""
        return self._table

    @property
    def index(self) -> int:
        """The row's place in its table (the record's place among the log's records)."""
        return self._index

    def __getitem__(self, name: str) -> Any:
        value = self._table.get(self._index, name, _MISSING)
        if value is _MISSING:
            raise KeyError(name)
        return value

    def get(self, name: str, default: Any = None) -> Any:
        return self._table.get(self._index, name, default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._table.has(self._index, name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._table.names(self._index))

    def __len__(self) -> int:
        return len(self._table.names(self._index))

    def __repr__(self) -> str:
        return f"VerdictRow({dict(self)!r})"


# The tables made in this process, each kept until its log changes (as `log.PARSED` keeps
# parsed records): report, calibrate, judges and build share one.
TABLES = ParsedStreams()


def verdict_table(log: EvidenceLog) -> VerdictTable:
    """The run's verdict log as columns, parsed once per process and version of the file."""
    return log.read_into("verdicts", _TrimmedBuilder, TABLES)


class _TrimmedBuilder(_Builder):
    """The builder, handing the memory the parsed records took back to the system when done."""

    def result(self, path: Path, torn: bool) -> VerdictTable:
        table = super().result(path, torn)
        self.__dict__.clear()
        _trim_heap()
        return table


def _trim_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's malloc_trim): the chunks of
    records parsed and dropped leave holes that numpy's later arrays (mapped on their own) do
    not reuse, and that would otherwise count in the process's memory to the end."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        libc.malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        pass  # not glibc: nothing to do


def rows_of_one_table(
    records: Sequence[Mapping[str, Any]],
) -> tuple[VerdictTable, np.ndarray] | None:
    """(table, row indices) when every record is a row of one table: the columns can then
    answer for them at once. None otherwise (plain dicts, or rows of several tables)."""
    if type(records) is RowList and records.indices is not None:  # as the table made it
        return records.table, records.indices
    if not records or type(records[0]) is not VerdictRow:
        return None
    table = records[0].table
    if not all(type(r) is VerdictRow and r.table is table for r in records):
        return None
    return table, np.fromiter((r.index for r in records), np.int64, len(records))  # type: ignore[attr-defined]


class RowList(list[Mapping[str, Any]]):
    """Rows of one table in a plain list, which remembers the table and the row indices so the
    columns can answer for them without looking at each row."""

    def __init__(self, table: VerdictTable, indices: np.ndarray) -> None:
        super().__init__(VerdictRow(table, i) for i in indices.tolist())
        self.table = table
        self.indices: np.ndarray | None = indices


def _forgetting(name: str) -> Any:
    """A list method that, once it changes the list, lets go of the remembered indices."""
    method = getattr(list, name)

    def changed(self: RowList, *args: Any, **kwargs: Any) -> Any:
        self.indices = None
        return method(self, *args, **kwargs)

    changed.__name__ = name
    return changed


for _name in (
    "append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse",
    "__setitem__", "__delitem__", "__iadd__", "__imul__",
):  # fmt: skip
    setattr(RowList, _name, _forgetting(_name))
