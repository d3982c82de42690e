"""A task's JSON written straight from its parts, as `TaskView.model_dump_json` writes it.

At 20 models x 1,000 tasks the tasks are 190,000 comparisons and 380,000 order verdicts. Made
into a dict each and serialised by pydantic, they cost about 1.5 s of the report's task
worker; as msgspec structs, whose fields are the model's in the model's order, half a second.
The rest of a task (its answers, whose numbers pydantic writes in its own way, NaN included)
is serialised by pydantic as before. msgspec writes text, booleans, null and lists as pydantic
does (every code point escaped or not alike); a test holds every task to the bytes its
validated model writes.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any

import msgspec
import pydantic_core


class OrderJson(msgspec.Struct):
    """One order's verdict (`konkord.results.tasks.OrderVerdict`)."""

    order: str
    shown_first: str
    position_winner: Any
    winner: Any
    rationale: Any
    failure: str | None


class ComparisonJson(msgspec.Struct):
    """One comparison (`konkord.results.tasks.ComparisonView`), with no cascade."""

    judge: str
    model_a: str
    model_b: str
    winner: Any
    flipped: bool
    complete: bool
    orders: list[OrderJson]
    labels: list[dict[str, str]]
    cascade: None = None


_ENCODER = msgspec.json.Encoder()


def task_json(
    head: dict[str, Any], comparisons: list[ComparisonJson], tail: dict[str, Any]
) -> bytes:
    """A task's JSON: the fields before its comparisons (`head`, in the model's order), the
    comparisons, and the fields after them (`tail`)."""
    before = pydantic_core.to_json(head, inf_nan_mode="constants")
    after = pydantic_core.to_json(tail, inf_nan_mode="constants")
    return b"".join(
        (before[:-1], b',"comparisons":', _ENCODER.encode(comparisons), b",", after[1:])
    )


NO_LABELS: list[dict[str, str]] = []  # (shared by every comparison without labels: only read)


def comparisons_of_rows(
    judge: str,
    task_id: str,
    pairs: tuple[list[Any], ...],
    shown: tuple[list[Any], ...],
    labels: dict[tuple[str, str, str], list[dict[str, str]]],
) -> list[ComparisonJson]:
    """A task's comparisons by one judge where both orders of each are rows of the log's
    shared columns: `pairs` is (model_a, model_b, winner, flipped, complete, ab rows, ba
    rows), one list each; `shown` the columns' (position_winner, winner, rationale, failure)
    of every row. Made a field at a time at C speed, not a comparison at a time (190,000
    comparisons and 380,000 orders at 20 models x 1,000 tasks): the same structs."""
    model_a, model_b, winner, flipped, complete, ab, ba = pairs
    position_winners, winners, rationales, failures = shown

    def orders(order: str, first: list[Any], rows: list[int]) -> list[OrderJson]:
        return list(
            map(
                OrderJson, repeat(order), first, map(position_winners.__getitem__, rows),
                map(winners.__getitem__, rows), map(rationales.__getitem__, rows),
                map(failures.__getitem__, rows),
            )
        )  # fmt: skip

    both = map(list, zip(orders("ab", model_a, ab), orders("ba", model_b, ba), strict=True))
    found = map(labels.get, zip(repeat(task_id), model_a, model_b), repeat(NO_LABELS))
    return list(
        map(ComparisonJson, repeat(judge), model_a, model_b, winner, flipped, complete, both, found)
    )
