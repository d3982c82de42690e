"""Suites: a rubric and tasks, loaded from YAML with errors that name file, line and field."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from konkord.errors import SuiteError
from konkord.yamlpos import Located, Loc, describe_loc, load_yaml

SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
VERDICT_TOKEN = re.compile(r"verdict", re.IGNORECASE)
KNOWN_CHECKS = ("compiles", "ruff_clean", "mypy_clean", "tests")


class Task(BaseModel):
    """One prompt every model answers; `reference` and `tests` are optional ground truth."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    prompt: str
    reference: str | None = None
    checks: tuple[str, ...] = ()
    tests: str | None = Field(
        default=None,
        description="Python code with assert statements, run after the answer's code by `check`.",
    )

    @field_validator("id")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not SLUG.match(value):
            raise ValueError(
                f'"{value}" is not a slug (use lower case, digits, \'-\', \'_\' or \'.\')'
            )
        return value

    @field_validator("prompt")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("checks")
    @classmethod
    def _known_checks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if name not in KNOWN_CHECKS:
                raise ValueError(f'unknown check "{name}" (valid: {", ".join(KNOWN_CHECKS)})')
        return value

    @model_validator(mode="after")
    def _tests_present(self) -> Task:
        if "tests" in self.checks and not (self.tests and self.tests.strip()):
            raise ValueError('declares the "tests" check but has no tests')
        return self


class Suite(BaseModel):
    """A named set of tasks and the rubric both the judge and the human labeller read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    rubric: str
    answer_language: str | None = None
    context: str | None = None
    tasks: tuple[Task, ...]

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("rubric")
    @classmethod
    def _rubric(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty: write the criteria the judge should apply")
        if VERDICT_TOKEN.search(value):
            raise ValueError(
                "must not mention VERDICT: Konkord owns the judge's response format "
                "and adds the verdict instructions itself"
            )
        return value

    @field_validator("tasks")
    @classmethod
    def _tasks(cls, value: tuple[Task, ...]) -> tuple[Task, ...]:
        if not value:
            raise ValueError("must list at least one task")
        return value

    def task(self, task_id: str) -> Task:
        """The task with this id; a KeyError names the suite when it is missing."""
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(f"suite {self.name!r} has no task {task_id!r}")

    def rubric_hash(self) -> str:
        """A short hash of the rubric, so drift between runs can be named precisely."""
        return hashlib.sha256(self.rubric.encode()).hexdigest()[:12]


def _pydantic_message(path: Path, located: Located, exc: ValidationError) -> str:
    """The first validation error as `file:line: field message`, the way a person reads it."""
    lines = []
    for error in exc.errors():
        loc: Loc = tuple(p for p in error["loc"] if isinstance(p, str | int))
        msg = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            msg = "is not a known field (check the spelling)"
        elif error["type"] == "missing":
            msg = "is required"
        elif error["type"].endswith("_type") or error["type"] == "model_type":
            got = error.get("input")
            msg = f"{msg} (got {type(got).__name__})"
        lines.append(f"{path}:{located.line_of(loc)}: {describe_loc(loc)} {msg}")
    return lines[0] if len(lines) == 1 else lines[0] + f" (and {len(lines) - 1} more)"


def parse_located(path: Path, located: Located, model: type[BaseModel]) -> Any:
    """Validate located data against a pydantic model, translating errors to file:line: field."""
    if not isinstance(located.data, dict):
        raise SuiteError(f"{path}:1: expected a mapping of fields at the top level")
    try:
        return model.model_validate(located.data)
    except ValidationError as exc:
        raise SuiteError(_pydantic_message(path, located, exc)) from None


def load_suite(path: Path | str) -> Suite:
    """Load and validate a suite file; every problem is a SuiteError naming file, line and field."""
    path = Path(path)
    located = load_yaml(path)
    suite: Suite = parse_located(path, located, Suite)
    seen: dict[str, int] = {}
    for index, task in enumerate(suite.tasks):
        if task.id in seen:
            line = located.line_of(("tasks", index, "id"))
            raise SuiteError(
                f'{path}:{line}: tasks[{index}].id "{task.id}" repeats tasks[{seen[task.id]}].id'
            )
        seen[task.id] = index
    return suite
