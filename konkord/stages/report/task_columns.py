"""What a report's tasks are made from, field by field (`task_source.TaskSource` holds them):
the shown fields of every order verdict as the verdict log's columns (`OrderColumns`), and each
judge's comparisons (`JudgeComparisons`), both as the arrays the log's columns already are
where they can be, so that they are made and pickled to the task-file worker at array speed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from konkord.evidence.combined_columns import key_runs
from konkord.evidence.verdict_rows import VerdictTable

# The fields of an order verdict a task shows, as the log's columns hold them.
VIEW_FIELDS = ("position_winner", "winner", "rationale", "kind", "reason", "detail")

# An order of a comparison: a row of the shared columns, its fields (a record read some other
# way), or None where the order was not judged.
OrderRef = int | dict[str, Any] | None
# A field of a judge's comparisons: a list, or a numpy array (codes, flags or rows).
FieldValues = Any


@dataclass
class OrderColumns:
    """The shown fields of every record of the verdict log (`VIEW_FIELDS`): each coded field
    as the log's codes (an array) with the pool of values they index, each text field as a
    list of references to the log's texts (None where absent).

    Codes, not lists: a list holds a reference per record (380,000 at 20 models x 1,000
    tasks), made one by one in the report's process and pickled one by one to the worker;
    an array of codes is the table's own, pickled as its bytes. The lists are made where the
    tasks are made (`column`)."""

    pool: list[Any]  # code -> value (None for null and absent)
    codes: dict[str, Any]  # coded field -> numpy array of codes, one per record
    texts: dict[str, list[Any]]

    @classmethod
    def of(cls, table: VerdictTable) -> OrderColumns:
        coded = {name: table.coded[name] for name in VIEW_FIELDS if name in table.coded}
        texts = {name: table.column(name) for name in VIEW_FIELDS if name not in coded}
        return cls(table.pool_values(), coded, texts)

    def column(self, name: str) -> list[Any]:
        """Field `name` of every record, as a list."""
        if name in self.texts:
            return self.texts[name]
        return list(map(self.pool.__getitem__, self.codes[name].tolist()))

    def failures(self) -> list[str | None]:
        """Each record's failure as a task shows it (None for a verdict): made only for the
        records that are not verdicts."""
        kinds = self.codes["kind"]
        out: list[str | None] = [None] * len(kinds)
        pool = self.pool
        verdict = [code for code, value in enumerate(pool) if value == "verdict"]
        failed = np.flatnonzero(~np.isin(kinds, verdict))
        if not failed.size:
            return out
        reasons = self.codes["reason"][failed].tolist()
        details = self.texts["detail"]
        for row, reason in zip(failed.tolist(), reasons, strict=True):
            out[row] = failure_text(pool[reason], details[row])
        return out


@dataclass
class JudgeComparisons:
    """One judge's combined verdicts, field by field in the combined list's order: as lists,
    or, taken from the list's columns, as the arrays it already holds (the task and models as
    codes into `values`, the orders as rows, -1 where missing), made lists by `lists` only
    where the tasks are made."""

    judge: str
    task_id: FieldValues
    model_a: FieldValues
    model_b: FieldValues
    winner: list[str | None]
    flipped: FieldValues
    complete: FieldValues
    ab: FieldValues
    ba: FieldValues
    values: list[Any] | None = None  # the log's values, where the fields are its codes

    def __len__(self) -> int:
        return len(self.task_id)

    def rows_by_task(self) -> dict[str, Any]:
        """Each task's comparisons (their places, in order): an array of them where the
        fields are arrays, else a list."""
        if self.values is None:
            found: dict[str, list[int]] = {}
            for n, task_id in enumerate(self.task_id):
                found.setdefault(task_id, []).append(n)
            return found
        order, starts = key_runs(self.task_id)
        ends = [*starts.tolist()[1:], len(order)] if len(starts) else []
        return {
            self.values[code]: order[start:end]
            for code, start, end in zip(
                self.task_id[order[starts]].tolist(), starts.tolist(), ends, strict=True
            )
        }

    def take(self, rows: Any) -> tuple[list[Any], ...]:
        """(model_a, model_b, winner, flipped, complete, ab, ba) of the comparisons at `rows`,
        each a list; an order a row of the shared columns, its fields, or None."""
        if self.values is None:
            return tuple(
                [field[n] for n in rows]
                for field in (self.model_a, self.model_b, self.winner, self.flipped,
                              self.complete, self.ab, self.ba)
            )  # fmt: skip
        pick = self.values.__getitem__
        winner = self.winner
        return (
            list(map(pick, self.model_a[rows].tolist())),
            list(map(pick, self.model_b[rows].tolist())),
            [winner[n] for n in rows.tolist()],
            self.flipped[rows].tolist(),
            self.complete[rows].tolist(),
            *([None if row < 0 else row for row in orders[rows].tolist()]
              for orders in (self.ab, self.ba)),
        )  # fmt: skip


def failure_text(reason: Any, detail: Any) -> str:
    """Why an order has no verdict, as the task page shows it."""
    return f"{reason}: {detail or ''}".strip(": ")
