"""Combined verdicts with their columns: the list `combine_verdicts` gives when it read the
log's columns, which also holds, as arrays in the list's order, what the report's figures
read of every pair (its task and models as the log's codes, complete, flipped, the score of
model_a). At 20 models x 1,000 tasks the list holds 190,000 pairs; a figure that reads the
arrays does not visit them one by one. Changing the list lets go of its columns, and a list
without them is read pair by pair, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import Any, cast

import numpy as np

from konkord.evidence.changed_lists import MadeWhenRead, forget_when_changed


@dataclass(frozen=True)
class CombinedColumns:
    """One array per field, one entry per combined verdict, in the list's order."""

    values: list[Any]  # the log's pool: code -> value
    task: np.ndarray  # codes
    model_a: np.ndarray
    model_b: np.ndarray
    complete: np.ndarray  # bool
    flipped: np.ndarray  # bool
    score: np.ndarray  # model_a's score: 1, 0.5 (a tie, or flipped), 0; NaN while incomplete
    ab: np.ndarray  # the table's row of each order's record, -1 where the order is missing
    ba: np.ndarray
    winner: np.ndarray | None = None  # each verdict's winner (text, "tie" or None), objects

    def __len__(self) -> int:
        return len(self.task)

    def take(self, rows: np.ndarray) -> CombinedColumns:
        """The columns of the verdicts at `rows`, in that order."""
        return CombinedColumns(
            self.values, self.task[rows], self.model_a[rows], self.model_b[rows],
            self.complete[rows], self.flipped[rows], self.score[rows], self.ab[rows],
            self.ba[rows], None if self.winner is None else self.winner[rows],
        )  # fmt: skip

    def index_of(self, name: str, index: Callable[[Any], int | None]) -> np.ndarray:
        """`index(value)` of field `name` of every verdict (-1 where it gives None), asked once
        per distinct value."""
        distinct, inverse = dense_codes(getattr(self, name), len(self.values))
        found = [index(self.values[code]) for code in distinct.tolist()]
        lookup = np.array([-1 if k is None else k for k in found], dtype=np.int64)
        out: np.ndarray = lookup[inverse]
        return out

    def lookup_pairs(
        self, name: str, other: str, found: Callable[[Any, Any], int | None]
    ) -> np.ndarray:
        """`found(value of name, value of other)` of every verdict (-1 where it gives None),
        asked once per distinct pair of values."""
        values = self.values
        first, first_at = dense_codes(getattr(self, name), len(values))
        second, second_at = dense_codes(getattr(self, other), len(values))
        key = first_at * len(second) + second_at
        keys, key_at = dense_codes(key, len(first) * len(second))
        # each distinct pair's two values looked up in plain lists (a numpy scalar index, and
        # the division, cost more than the lookup itself: 20,000 pairs at 20 x 1,000)
        firsts = [values[code] for code in first.tolist()]
        seconds = [values[code] for code in second.tolist()]
        at_first, at_second = np.divmod(keys, len(second))
        got = [
            found(firsts[a], seconds[b])
            for a, b in zip(at_first.tolist(), at_second.tolist(), strict=True)
        ]
        lookup = np.array([-1 if k is None else k for k in got], dtype=np.int64)
        out: np.ndarray = lookup[key_at]
        return out

    def text(self, name: str) -> list[str]:
        """Field `name` of every verdict, as text."""
        values = self.values
        return [str(values[code]) for code in getattr(self, name).tolist()]


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-d array of integers in increasing order: np.unique(values),
    by one sort. numpy 2.4's np.unique hashes instead, which took 111 ms for the 190,000 pair
    keys of 20 models x 1,000 tasks against 3 ms this way."""
    ordered = np.sort(values)
    if ordered.size == 0:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def key_runs(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a stable order of `key`, where each run of equal keys starts in it): the entries of
    the k-th smallest distinct key are order[starts[k]:starts[k + 1]], in their own order.
    One sort for what np.unique(key, return_index=True, return_inverse=True) gives and more
    (the last of each key too)."""
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    new = np.ones(len(ordered), dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    return order, np.flatnonzero(new)


def dense_codes(codes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct codes in increasing order, each code's place among them) of codes below
    `size`: what np.unique(codes, return_inverse=True) gives, by a count rather than a sort."""
    present = np.zeros(size, dtype=bool)
    present[codes] = True
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present), rank[codes].astype(np.int64)


_ARRAYS = ("task", "model_a", "model_b", "complete", "flipped", "score", "ab", "ba")


class CombinedList(MadeWhenRead):
    """Combined verdicts (`konkord.evidence.verdicts.CombinedVerdict`, which this module does
    not import: verdicts imports it) in a plain list that also holds their columns, and the
    table their orders' records are rows of, if they are (`table`).

    Given `size`, `verdicts` is a function that makes them, called when they are first read
    (`MadeWhenRead`): the figures read the columns, and at 20 models x 1,000 tasks nothing
    else of a report reads the 190,000 verdicts themselves."""

    def __init__(
        self,
        verdicts: Iterable[Any] | Callable[[], Iterable[Any]],
        columns: CombinedColumns,
        size: int | None = None,
        table: object = None,
    ) -> None:
        if size is None:
            made = list(cast(Iterable[Any], verdicts))
            super().__init__(len(made), lambda: made)
            self.made()
        else:
            super().__init__(size, cast(Callable[[], Iterable[Any]], verdicts))
        self.columns: CombinedColumns | None = columns if len(self) == len(columns) else None
        self.table = table

    def take(self, rows: np.ndarray) -> CombinedList:
        """The verdicts at `rows` (indices into this list), with their columns: made from this
        list's when first read."""
        columns = self.columns
        at = rows.tolist()

        def picked() -> Iterator[Any]:
            return map(list.__getitem__, repeat(self.made()), at)

        return CombinedList(
            picked, _EMPTY if columns is None else columns.take(rows), len(at), self.table
        )


def columns_of(combined: object) -> CombinedColumns | None:
    """The columns of a list of combined verdicts, or None when it holds none (made pair by
    pair, or changed since)."""
    if type(combined) is CombinedList:
        return combined.columns
    return None


def complete_only(combined: list[Any]) -> list[Any]:
    """The complete verdicts, in order (with their columns where the list has them)."""
    columns = columns_of(combined)
    if columns is None:
        return [c for c in combined if c.complete]
    assert isinstance(combined, CombinedList)
    return combined.take(np.flatnonzero(columns.complete))


def index_map(names: Mapping[str, int]) -> Callable[[Any], int | None]:
    """A value's index in `names`, None where it has none (or is not text)."""
    return lambda value: names.get(value) if isinstance(value, str) else None


forget_when_changed(CombinedList, "columns")  # changed, it lets go of its columns

_EMPTY = CombinedColumns(
    [], *(np.zeros(0, dtype=bool if n in ("complete", "flipped") else np.int64) for n in _ARRAYS)
)
