"""Lists that remember their columns or row indices let go of them once changed: a stale
summary read for other items would put wrong figures in a report."""

from __future__ import annotations

import copy
import pickle
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from konkord.evidence.changed_lists import CHANGING_METHODS, MadeWhenRead, forget_when_changed
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


class Counted:
    """A maker of items that counts how often it was called."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items
        self.calls = 0

    def __call__(self) -> list[Any]:
        self.calls += 1
        return list(self.items)


READS: dict[str, Callable[[list[Any]], object]] = {
    "iter": lambda x: list(iter(x)),
    "getitem": lambda x: (x[0], x[-1], x[1:]),
    "contains": lambda x: (2 in x, 9 in x),
    "reversed": lambda x: list(reversed(x)),
    "eq": lambda x: (x == [3, 1, 2], [3, 1, 2] == x, x != [3]),  # noqa: SIM300 (both sides)
    "order": lambda x: (x < [4], x <= [3, 1, 2], x > [3], x >= [3, 1, 2]),
    "add": lambda x: (x + [7], [7] + x, x * 2, 2 * x),  # noqa: RUF005 (the operators)
    "repr": repr,
    "copy": lambda x: x.copy(),
    "count": lambda x: x.count(1),
    "index": lambda x: x.index(2),
    "sorted": sorted,
    "unpack": lambda x: ([*x], (*x,), tuple(x), max(x)),
    "pickle": lambda x: pickle.loads(pickle.dumps(x)),
    "deepcopy": lambda x: list(copy.deepcopy(x)),
}


@pytest.mark.parametrize("name", sorted(READS))
def test_a_list_made_when_read_reads_as_the_list_it_makes(name: str) -> None:
    maker = Counted([3, 1, 2])
    lazy = MadeWhenRead(3, maker)
    assert len(lazy) == 3 and maker.calls == 0  # its length is known before its items
    assert READS[name](lazy) == READS[name]([3, 1, 2])
    assert maker.calls == 1
    assert READS[name](lazy) == READS[name]([3, 1, 2])
    assert maker.calls == 1 and len(lazy) == 3


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_a_list_made_when_read_makes_its_items_before_a_change(name: str) -> None:
    maker = Counted([3, 1, 2])
    lazy = MadeWhenRead(3, maker)
    plain = [3, 1, 2]
    CHANGES[name](lazy)
    CHANGES[name](plain)
    assert maker.calls == 1
    assert list(lazy) == plain and len(lazy) == len(plain)


def test_combined_and_row_lists_made_when_read_forget_when_changed() -> None:
    one = np.zeros(1, dtype=np.int64)
    columns = CombinedColumns(["t"], one, one, one, one == 0, one == 1, one + 1.0, one, one)
    maker = Counted(["verdict"])
    combined = CombinedList(maker, columns, 1)
    assert columns_of(combined) is columns and maker.calls == 0
    taken = combined.take(np.array([0, 0]))
    assert len(taken) == 2 and maker.calls == 0
    assert list(taken) == ["verdict", "verdict"] and maker.calls == 1
    combined.append("another")
    assert columns_of(combined) is None and list(combined) == ["verdict", "another"]


def test_two_threads_reading_at_once_make_the_items_once() -> None:
    started = threading.Barrier(2)

    calls: list[int] = []

    def make() -> list[int]:  # slow enough for the second reader to come while it runs
        calls.append(1)
        time.sleep(0.05)
        return [1, 2, 3]

    lazy = MadeWhenRead(3, make)
    seen: list[list[int]] = []

    def read() -> None:
        started.wait()
        seen.append(list(lazy))

    threads = [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [[1, 2, 3], [1, 2, 3]] and calls == [1]


def test_a_report_reads_the_verdicts_columns_without_making_each_verdict(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The promise the lists made when read keep: a report of a run with no labels, checks or
    conversations computes every figure and writes every task from the columns, and makes
    no combined verdict and no verdict row as an object (half a second at 20 x 1,000)."""
    from test_freshness import _report, _run

    from konkord.evidence import changed_lists

    _run(project)
    made: list[int] = []
    real = changed_lists.MadeWhenRead.made

    def counted(self: MadeWhenRead) -> MadeWhenRead:
        if self.__dict__.get("_pending") is not None:
            made.append(len(self))
        return real(self)

    monkeypatch.setattr(changed_lists.MadeWhenRead, "made", counted)
    _report()
    assert (project / "results" / "r.json").is_file()
    assert made == []
    # and a reader that wants them gets them: the same report, its verdicts made on reading
    from konkord.configuration.runspec import resolve_run
    from konkord.evidence.log import EvidenceLog
    from konkord.evidence.verdicts import combine_verdicts, load_verdicts

    records = load_verdicts(EvidenceLog(resolve_run("r").run_dir), "judge/j1")
    assert made == []
    combined = combine_verdicts(records)
    assert [c.task_id for c in combined] == [f"t{k:02d}" for k in range(6)]
    assert sorted(made) == [6, 12]  # the six verdicts, and the twelve rows they hold
