"""A run's verdict log as columns, read side: the table (`VerdictTable`), its rows
(`VerdictRow`, each a read-only mapping that reads like the record it came from) and lists of
rows that remember their table (`RowList`), with the field layout both the builder
(`verdict_table.py`) and the readers share. Why columns: see `verdict_table.py`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
import pydantic_core

from konkord.evidence.changed_lists import MadeWhenRead, forget_when_changed
from konkord.evidence.log import Record

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
KNOWN = frozenset((*HELD, *FROM_FILE))

ABSENT, NULL = 0, 1  # the codes of an absent field and of null
MISSING = object()
# A number's state: absent, null, or which Python type it was written as.
ABSENT_NUM, NULL_NUM, INT_NUM, FLOAT_NUM = 0, 1, 2, 3
FLAG_VALUES = {0: MISSING, 1: None, 2: False, 3: True}


HASH_ABSENT, HASH_NULL, HASH_HELD, HASH_ELSEWHERE = 0, 1, 2, 3


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
        self._pool_values: list[Any] | None = None

    def __len__(self) -> int:
        return len(self.offsets)

    def code_of(self, value: Any) -> int:
        """The pool code of a value; -1 when no record holds it."""
        if self._codes is None:
            self._codes = {v: i for i, v in enumerate(self.pool) if v is not MISSING}
        return self._codes.get(value, -1)

    def get_code(self, code: int) -> Any:
        """The value behind a pool code (None for null or absent)."""
        value = self.pool[code]
        return None if value is MISSING else value

    def column(self, name: str) -> list[Any]:
        """A coded or text field of every record as a list (None where null or absent), made
        once: references to the pooled values, 8 bytes a record, read at list speed."""
        made = self._columns.get(name)
        if made is None:
            if name in self.texts:
                made = [None if v is MISSING else v for v in self.texts[name]]
            elif name in self.hashes:  # at once, then the few not held as bytes one by one
                data, kinds = self.hashes[name]
                made = [held.decode() for held in data.tolist()]
                for i in np.flatnonzero(kinds != HASH_HELD).tolist():
                    made[i] = self.get(i, name)
            else:
                pool = self.pool_values()
                made = [pool[c] for c in self.coded[name].tolist()]
            self._columns[name] = made
        return made

    def pool_values(self) -> list[Any]:
        """The pool as values: what each code stands for (None for null and absent)."""
        if self._pool_values is None:
            self._pool_values = [None if v is MISSING else v for v in self.pool]
        return self._pool_values

    def number(self, name: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, present) of a number field at `rows`: present is False where the field is
        null or absent (its value there is 0)."""
        values, state = self.nums[name]
        return values[rows], state[rows] >= INT_NUM

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
            return default if value is MISSING else value
        if name in self.texts:
            value = self.texts[name][index]
            return default if value is MISSING else value
        if name in self.hashes:
            data, kinds = self.hashes[name]
            kind = kinds[index]
            if kind == HASH_HELD:
                return bytes(data[index]).decode()
            if kind == HASH_NULL:
                return None
            if kind == HASH_ABSENT:
                return default
        if name in self.nums:
            values, state = self.nums[name]
            kind = state[index]
            if kind == ABSENT_NUM:
                return default
            if kind == NULL_NUM:
                return None
            return int(values[index]) if kind == INT_NUM else float(values[index])
        if name in self.flags:
            flag = FLAG_VALUES[int(self.flags[name][index])]
            return default if flag is MISSING else flag
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
            return self.texts[name][index] is not MISSING
        if name in self.hashes:
            return bool(self.hashes[name][1][index] != HASH_ABSENT)
        if name in self.nums:
            return bool(self.nums[name][1][index] != ABSENT_NUM)
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
        try:
            parsed: Record = pydantic_core.from_json(data)
        except ValueError:  # a lone surrogate escape, which only `json` reads as written
            parsed = json.loads(data)
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
        value = self._table.get(self._index, name, MISSING)
        if value is MISSING:
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


class RowList(MadeWhenRead):
    """Rows of one table in a plain list, which remembers the table and the row indices so the
    columns can answer for them without looking at each row. The rows are made when first
    read (`MadeWhenRead`): a report reads the columns, not 380,000 rows, at 20 x 1,000."""

    def __init__(self, table: VerdictTable, indices: np.ndarray) -> None:
        super().__init__(
            len(indices), lambda: map(VerdictRow, repeat(table), indices.tolist())
        )  # (no frame a row)
        self.table = table
        self.indices: np.ndarray | None = indices


forget_when_changed(RowList, "indices")  # changed, it lets go of the remembered indices
