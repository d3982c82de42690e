"""The site reads a task file as msgspec structs made from the pydantic models
(`konkord.results.task_structs`): the same fields, types, defaults and values as the model, the
same refusals, and the model itself for whatever only it takes."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fixtures_site import make_results
from pydantic import BaseModel, ValidationError

from konkord.configuration.display_names import renamed
from konkord.results.judging import CascadePair
from konkord.results.task_structs import TaskRead, read_task, renamed_task, struct_of
from konkord.results.tasks import (
    AnswerView,
    CheckView,
    ComparisonView,
    EarlierTurn,
    LabelView,
    OrderVerdict,
    TaskView,
)

MODELS: list[type[BaseModel]] = [
    CheckView, AnswerView, OrderVerdict, LabelView, CascadePair, ComparisonView, EarlierTurn,
    TaskView,
]  # fmt: skip
PAIRS = [(struct_of(model), model) for model in MODELS]
STRUCTS = {struct.__name__: model.__name__ for struct, model in PAIRS}


def _spelled(annotation: Any) -> str:
    """A field's type as text, each struct named as its model (`list[OrderVerdictRead]`
    reads `list[OrderVerdict]`), modules left out."""
    text = re.sub(r"\b[a-z_.]*\.(?=[A-Z])", "", str(annotation).replace("typing.", ""))
    text = re.sub(r"\b\w+Read\b", lambda m: STRUCTS[m.group(0)], text)
    return text.replace("Optional[", "Union[")


@pytest.mark.parametrize(("struct", "model"), PAIRS, ids=[m.__name__ for _, m in PAIRS])
def test_each_struct_has_its_models_fields_types_and_defaults(
    struct: type[msgspec.Struct], model: type[BaseModel]
) -> None:
    fields = msgspec.structs.fields(struct)
    assert [f.name for f in fields] == list(model.model_fields)
    hints = typing.get_type_hints(struct)
    for f in fields:
        info = model.model_fields[f.name]
        assert _spelled(hints[f.name]) == _spelled(info.annotation), f.name
        if info.is_required():
            assert f.required, f.name
        else:
            default = f.default_factory() if f.default is msgspec.NODEFAULT else f.default
            assert not f.required and default == info.default, f.name


def _task_files(tmp_path: Path, **options: Any) -> list[bytes]:
    results = make_results("structs", n_tasks=3, **options)
    return [task.model_dump_json().encode() for task in results.tasks]


@pytest.mark.parametrize("hostile", [False, True])
def test_a_task_reads_as_the_model_reads_it(tmp_path: Path, hostile: bool) -> None:
    for data in _task_files(tmp_path, hostile=hostile):
        read = read_task(data)
        assert isinstance(read, TaskRead)
        assert msgspec.to_builtins(read) == TaskView.model_validate_json(data).model_dump(
            mode="json"
        )


def _edited(data: bytes, edit: Any) -> bytes:
    task = json.loads(data)
    edit(task)
    return json.dumps(task).encode()


def test_what_only_the_model_takes_is_read_by_the_model(tmp_path: Path) -> None:
    data = _task_files(tmp_path)[0]

    def integral_float(task: dict[str, Any]) -> None:
        task["answers"][0]["tokens_out"] = 12.0

    lax = _edited(data, integral_float)
    read = read_task(lax)
    assert isinstance(read, TaskView)
    assert read.answers[0].tokens_out == 12
    not_a_number = data.replace(b'"cost_usd":', b'"cost_usd":NaN,"x":', 1)
    with pytest.raises(ValidationError):
        read_task(not_a_number)  # NaN taken, then the unknown field "x" refused by the model


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t.update(extra=1),  # an unknown field
        lambda t: t["comparisons"][0]["orders"][0].update(order="ac"),  # not a known order
        lambda t: t["answers"][0].update(model=None),  # a required text missing
        lambda t: t.pop("comparisons"),
    ],
    ids=["unknown-field", "bad-order", "null-model", "no-comparisons"],
)
def test_what_the_model_refuses_is_refused_with_its_message(tmp_path: Path, edit: Any) -> None:
    data = _edited(_task_files(tmp_path)[0], edit)
    with pytest.raises(ValidationError) as expected:
        TaskView.model_validate_json(data)
    with pytest.raises(ValidationError) as found:
        read_task(data)
    assert found.value.errors() == expected.value.errors()


def test_display_names_rename_a_struct_as_they_rename_the_model(tmp_path: Path) -> None:
    data = _task_files(tmp_path)[1]
    view = TaskView.model_validate_json(data)
    names = {view.answers[0].model: "Shown name", view.answers[1].model: "Other name"}
    read = renamed_task(read_task(data), names)
    assert isinstance(read, TaskRead)
    assert msgspec.to_builtins(read) == renamed(view, names).model_dump(mode="json")
    assert renamed_task(view, names) == renamed(view, names)
    unchanged = read_task(data)
    assert renamed_task(unchanged, {}) is unchanged
