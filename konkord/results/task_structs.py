"""A task file read for its pages: `konkord.results.tasks.TaskView` decoded by msgspec into
read-only structs instead of pydantic models.

A task of 20 models is about 600 models' worth of objects (190 comparisons, 380 order
verdicts, 20 answers): pydantic validated it in about 2.2 ms, a tenth of rendering its pages;
msgspec decodes it in about 0.5 ms. The structs are made from the models themselves (`_struct_of`:
each field's name, type and default, a model inside it replaced by its struct), so they cannot
drift from the schema. They refuse what the models refuse for the files Konkord writes; anything
else they refuse (a number written as 3.0 where an integer is due, NaN, an unknown field) is
handed to the pydantic model, which accepts it as it always did or names the problem as it
always did.

Only the site reads tasks this way (`TaskShelf`): it reads their fields and nothing else.
"""

from __future__ import annotations

import functools
import operator
import types
import typing
from typing import Any, cast

import msgspec
from pydantic import BaseModel

from konkord.configuration.display_names import Names, rename_data
from konkord.results.tasks import TaskView

_STRUCTS: dict[type[BaseModel], type[msgspec.Struct]] = {}


def _as_struct_type(annotation: Any) -> Any:
    """A field's type with every results model in it replaced by its struct."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _struct_of(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is None or origin is typing.Literal or not args:
        return annotation
    inner = tuple(_as_struct_type(arg) for arg in args)
    if origin in (types.UnionType, typing.Union):
        return functools.reduce(operator.or_, inner)
    return origin[inner if len(inner) > 1 else inner[0]]


def _struct_of(model: type[BaseModel]) -> type[msgspec.Struct]:
    """The struct of a results model: its fields in its order, with its defaults; unknown
    fields refused (as `Strict` refuses them); read-only."""
    if model not in _STRUCTS:
        fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
        for name, info in model.model_fields.items():
            kind = _as_struct_type(info.annotation)
            fields.append((name, kind) if info.is_required() else (name, kind, info.default))
        _STRUCTS[model] = msgspec.defstruct(
            f"{model.__name__}Read", fields, kw_only=True, frozen=True,
            forbid_unknown_fields=True, module=__name__,
        )  # fmt: skip
    return _STRUCTS[model]


TaskRead = _struct_of(TaskView)
_DECODER = msgspec.json.Decoder(TaskRead)


def struct_of(model: type[BaseModel]) -> type[msgspec.Struct]:
    """The struct a results model inside a task is read as (for tests and tools)."""
    return _struct_of(model)


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
