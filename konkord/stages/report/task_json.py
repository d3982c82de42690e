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
