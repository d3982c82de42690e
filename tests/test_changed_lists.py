"""Lists that remember their columns or row indices let go of them once changed: a stale
summary read for other items would put wrong figures in a report."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pytest

from konkord.evidence.changed_lists import CHANGING_METHODS, forget_when_changed
from konkord.evidence.combined_columns import CombinedColumns, CombinedList, columns_of
from konkord.evidence.verdict_rows import RowList, VerdictTable


class Remembering(list[Any]):
    def __init__(self, items: list[Any]) -> None:
        super().__init__(items)
        self.summary: object | None = "summary of the items"


forget_when_changed(Remembering, "summary")

CHANGES: dict[str, Callable[[list[Any]], object]] = {
    "append": lambda x: x.append(9),
    "extend": lambda x: x.extend([9]),
    "insert": lambda x: x.insert(0, 9),
    "remove": lambda x: x.remove(1),
    "pop": lambda x: x.pop(),
    "clear": lambda x: x.clear(),
    "sort": lambda x: x.sort(),
    "reverse": lambda x: x.reverse(),
    "__setitem__": lambda x: x.__setitem__(0, 9),
    "__delitem__": lambda x: x.__delitem__(0),
    "__iadd__": lambda x: x.__iadd__([9]),
    "__imul__": lambda x: x.__imul__(2),
}


def test_every_changing_method_is_covered() -> None:
    assert set(CHANGES) == set(CHANGING_METHODS)


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_a_change_lets_go_of_the_summary_and_still_changes(name: str) -> None:
    items = Remembering([3, 1, 2])
    plain = [3, 1, 2]
    CHANGES[name](items)
    CHANGES[name](plain)
    assert items.summary is None
    assert list(items) == plain


def test_reading_keeps_the_summary() -> None:
    items = Remembering([3, 1, 2])
    assert items[0] == 3 and len(items) == 3 and sorted(items) == [1, 2, 3] and 2 in items
    assert items.summary is not None


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_combined_lists_and_row_lists_forget(name: str) -> None:
    """Both kinds of list the report reads columns from, one verdict's columns each."""
    one = np.zeros(1, dtype=np.int64)
    columns = CombinedColumns(["t"], one, one, one, one == 0, one == 1, one + 1.0, one, one)
    combined = CombinedList([1], columns)
    rows = RowList(cast(VerdictTable, None), np.zeros(0, dtype=np.int64))
    lists: list[list[Any]] = [combined, cast(list[Any], rows)]
    list.append(lists[1], 1)  # a row list of no table's rows: only its indices are looked at
    rows.indices = np.zeros(1, dtype=np.int64)
    assert columns_of(combined) is columns and rows.indices is not None
    for changed in lists:
        changed.extend([2, 3])  # what every change below has to work on
    assert columns_of(combined) is None and rows.indices is None
    combined.columns, rows.indices = columns, np.zeros(3, dtype=np.int64)
    for changed in lists:
        CHANGES[name](changed)
    assert combined.columns is None and rows.indices is None
