"""A task file read for its pages: the fields of `konkord.results.tasks.TaskView`, decoded by
msgspec into read-only structs instead of pydantic models.

A task of 20 models is about 600 models' worth of objects (190 comparisons, 380 order
verdicts, 20 answers): pydantic validated it in about 2.2 ms, a tenth of rendering its pages;
msgspec decodes it in about 0.5 ms. The structs have the models' field names, types and
defaults, and refuse what the models refuse for the files Konkord writes; anything else they
refuse (a number written as 3.0 where an integer is due, NaN, an unknown field) is handed to
the pydantic model, which accepts it as it always did or names the problem as it always did.
A test holds every field to the model's.

Only the site reads tasks this way (`TaskShelf`): it reads their fields and nothing else.
"""

from __future__ import annotations

from typing import Any, Literal, cast

import msgspec

from konkord.configuration.display_names import Names, rename_data
from konkord.results.tasks import TaskView

# Every struct: unknown fields refused (as `Strict` refuses them), read-only, fields by name.


class CheckRead(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    check: str
    passed: bool
    reason: str | None = None
    sandbox: str | None = None


class AnswerRead(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    model: str
    text: str | None
    finish_reason: str | None = None
    truncated: bool = False
    error: str | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    latency_s: float | None = None
    checks: list[CheckRead] = []
    style: dict[str, int] | None = None


class OrderRead(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    order: Literal["ab", "ba"]
    shown_first: str
    position_winner: str | None
    winner: str | None
    rationale: str | None = None
    failure: str | None = None


class LabelRead(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    labeller: str
    winner: str


class CascadeRead(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    decided_by: Literal["first_pass", "strong", "pending"]
    first_pass: str
    probs_ab: dict[str, float]
    probs_ba: dict[str, float]
    orders_agree: bool
    confidence: float
    lean: str
    orders_text: str = ""


class ComparisonRead(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    judge: str
    model_a: str
    model_b: str
    winner: str | None
    flipped: bool
    complete: bool
    orders: list[OrderRead]
    labels: list[LabelRead] = []
    cascade: CascadeRead | None = None


class EarlierRead(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    turn: int
    prompt: str
    replies: dict[str, str | None]


class TaskRead(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    id: str
    prompt: str
    reference: str | None = None
    tests: str | None = None
    answers: list[AnswerRead]
    comparisons: list[ComparisonRead]
    turn: int | None = None
    earlier: list[EarlierRead] = []


_DECODER = msgspec.json.Decoder(TaskRead)


def read_task(data: bytes) -> TaskView:
    """A task file's task: as structs where msgspec takes the file, else validated by the
    pydantic model (which raises its ValidationError for a file it refuses). Typed as the
    model: the structs have its fields, and the site only reads them."""
    try:
        return cast(TaskView, _DECODER.decode(data))
    except (msgspec.ValidationError, msgspec.DecodeError):
        return TaskView.model_validate_json(data)


def renamed_task(task: TaskView, names: Names) -> TaskView:
    """`task` with every model spec shown by its display name (`renamed`, for either kind)."""
    if not isinstance(task, TaskRead):
        from konkord.configuration.display_names import renamed

        return renamed(task, names)
    if not any(spec != name for spec, name in names.items()):
        return task
    data: Any = rename_data(msgspec.to_builtins(task), names)
    return cast(TaskView, msgspec.convert(data, TaskRead))
