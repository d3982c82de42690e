"""Suites: a rubric and tasks, loaded from YAML with errors that name file, line and field."""

from __future__ import annotations

import difflib
import hashlib
import re
import unicodedata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from konkord.configuration.names import SLUG, slug_problem
from konkord.configuration.turns import Turn, check_turns, turn_fields, turn_like_id_problem
from konkord.configuration.validated import NonEmptyText
from konkord.configuration.yamlpos import KIND_WORDS, Loc, Located, describe_loc, load_yaml, no_gc
from konkord.errors import SuiteError

KNOWN_CHECKS = ("compiles", "ruff_clean", "mypy_clean", "tests")
# The judge ends with the line "VERDICT: 1|2|TIE" (any case, markdown around it). A rubric that
# spells the token in capitals, or writes anything shaped like that line, competes with the
# response format the tool owns; the plain word ("a fair verdict") is harmless and allowed.
VERDICT_TOKEN = re.compile(r"\bVERDICT\b")
VERDICT_LINE_LIKE = re.compile(r"\bverdict[*_`\s]*:", re.IGNORECASE)


# Characters that render as nothing: "VER\u200bDICT" reads as VERDICT to a model.
INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")


def fold_lookalikes(text: str) -> str:
    """Text as a reader sees it: NFKC (fullwidth and styled letters become plain ones) and
    invisible characters dropped, so a spelling trick cannot hide a word from a check."""
    return INVISIBLE.sub("", unicodedata.normalize("NFKC", text))


def mentions_verdict(text: str) -> bool:
    """Whether a rubric mentions the verdict line the tool appends itself (in any spelling)."""
    text = fold_lookalikes(text)
    return bool(VERDICT_TOKEN.search(text) or VERDICT_LINE_LIKE.search(text))


class Task(BaseModel):
    """One prompt every model answers, or a conversation (`turns`: user messages answered in
    order, each model seeing its own earlier answers); `reference` and `tests` are optional
    ground truth. A conversation's `prompt`, `reference` and `tests` are its first turn's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    prompt: NonEmptyText
    reference: str | None = None
    checks: tuple[str, ...] = ()
    tests: str | None = Field(
        default=None,
        description="Python code with assert statements, run after the answer's code by `check`.",
    )
    turns: tuple[Turn, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _conversation(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "turns" not in data:
            return data
        raw = data["turns"]
        if not isinstance(raw, list | tuple) or not raw:
            return data  # the field's own validation names the problem
        turns = [turn_fields(turn) for turn in raw]
        first = turns[0]
        for name in ("prompt", "reference", "tests"):
            if data.get(name) is not None and data[name] != first.get(name):
                raise ValueError(
                    f"gives both {name} and turns: a conversation's {name} goes in its turns"
                )
        filled = {name: first[name] for name in ("prompt", "reference", "tests") if name in first}
        return {**data, **filled, "turns": turns}

    @field_validator("id")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not SLUG.match(value):
            raise ValueError(slug_problem(value))
        return value

    @field_validator("checks")
    @classmethod
    def _known_checks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if name not in KNOWN_CHECKS:
                raise ValueError(
                    f'has an unknown check "{name}" (valid: {", ".join(KNOWN_CHECKS)})'
                )
        return value

    @model_validator(mode="after")
    def _tests_present(self) -> Task:
        given = [turn.tests for turn in self.conversation()]
        if "tests" in self.checks and not any(tests and tests.strip() for tests in given):
            raise ValueError('declares the "tests" check but has no tests')
        return self

    @property
    def multi_turn(self) -> bool:
        """Whether the task is a conversation of more than one user message."""
        return len(self.turns) > 1

    def turn_task(self, turn: int) -> Task:
        """Turn `turn` (1-based) of a conversation as the task its replies are judged, labelled
        and checked under: its own id (`turns.unit_id`), prompt, reference and tests."""
        from konkord.configuration.turns import unit_id

        asked = self.conversation()[turn - 1]
        checks = tuple(c for c in self.checks if c != "tests" or asked.tests)
        return self.model_copy(
            update={
                "id": unit_id(self.id, turn),
                "prompt": asked.prompt,
                "reference": asked.reference,
                "tests": asked.tests,
                "checks": checks,
                "turns": (),
            }
        )

    def conversation(self) -> tuple[Turn, ...]:
        """The user turns in order: the task's own prompt as one turn when it has no `turns`."""
        if self.turns:
            return self.turns
        return (Turn(prompt=self.prompt, reference=self.reference, tests=self.tests),)


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
        if mentions_verdict(value):
            raise ValueError(
                "must not mention VERDICT: Konkord owns the judge's response format "
                "and adds the verdict instructions itself; remove that sentence"
            )
        return value

    @field_validator("tasks")
    @classmethod
    def _tasks(cls, value: tuple[Task, ...]) -> tuple[Task, ...]:
        if not value:
            raise ValueError("must list at least one task")
        from konkord.configuration.turns import unit_id

        ids = {task.id for task in value}
        for task in value:
            for turn in range(1, len(task.turns) + 1 if task.multi_turn else 1):
                if unit_id(task.id, turn) in ids:
                    raise ValueError(
                        f'has a task "{unit_id(task.id, turn)}", the id turn {turn} of the '
                        f'conversation "{task.id}" is judged under; rename one of them'
                    )
        return value

    def task(self, task_id: str) -> Task:
        """The task with this id, or a conversation's turn under its judged id ("poem-t2");
        a KeyError names the suite when it is missing."""
        from konkord.configuration.turns import split_unit

        base, turn = split_unit(task_id)
        for task in self.tasks:
            if task.id == task_id:
                return task
            if turn is not None and task.id == base and 1 <= turn <= len(task.turns):
                return task.turn_task(turn)
        raise KeyError(f"suite {self.name!r} has no task {task_id!r}")

    def judged_tasks(self) -> list[Task]:
        """The tasks verdicts, labels and checks are given under, in order: a task itself, or
        each turn of a conversation (`Task.turn_task`)."""
        return [
            unit
            for task in self.tasks
            for unit in (
                [task.turn_task(k) for k in range(1, len(task.turns) + 1)]
                if task.multi_turn
                else [task]
            )
        ]

    def judged_ids(self) -> list[str]:
        """The ids verdicts are given under, in order: a task's own, or each turn's of a
        conversation (`Task.turn_task`)."""
        return [unit.id for unit in self.judged_tasks()]

    def rubric_hash(self) -> str:
        """A short hash of the rubric, so drift between runs can be named precisely."""
        return hashlib.sha256(self.rubric.encode()).hexdigest()[:12]


_TYPE_WORDS = {
    "valid tuple": "list",
    "valid list": "list",
    "valid dictionary": "mapping of fields",
    "valid string": "text",
}


def _field_names(model: type[BaseModel], seen: set[type[BaseModel]] | None = None) -> set[str]:
    """Every field name of a model and the models nested in it, for spelling suggestions."""
    seen = seen if seen is not None else set()
    if model in seen:
        return set()
    seen.add(model)
    names = set(model.model_fields)
    for info in model.model_fields.values():
        for arg in _type_args(info.annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                names |= _field_names(arg, seen)
    return names


def _type_args(annotation: Any) -> list[Any]:
    out = [annotation]
    for arg in getattr(annotation, "__args__", ()) or ():
        out += _type_args(arg)
    return out


def _error_text(error: Any, model: type[BaseModel]) -> str:
    """One pydantic error in the words a suite author uses."""
    msg = str(error["msg"]).removeprefix("Value error, ")
    kind = str(error["type"])
    loc = error["loc"]
    if kind == "extra_forbidden":
        msg = "is not a known field"
        close = difflib.get_close_matches(str(loc[-1]), sorted(_field_names(model)), n=1)
        return msg + (f' (did you mean "{close[0]}"?)' if close else " (check the spelling)")
    if kind == "missing":
        return "is required"
    if kind == "finite_number":
        return f"should be a finite number, not {error.get('input')}"
    ctx = error.get("ctx") or {}
    bounds = {
        "greater_than_equal": ("must be at least", "ge"),
        "greater_than": ("must be more than", "gt"),
        "less_than_equal": ("must be at most", "le"),
        "less_than": ("must be less than", "lt"),
    }
    if kind in bounds:
        words, key = bounds[kind]
        return f"{words} {ctx.get(key)}"
    parsing = {
        "int_parsing": "a whole number",
        "float_parsing": "a number",
        "bool_parsing": "true or false",
    }
    if kind in parsing:
        got = type(error.get("input")).__name__
        return f"should be {parsing[kind]}, not {KIND_WORDS.get(got, got)}"
    if kind.endswith("_type") or kind in {"model_type", "model_attributes_type"}:
        got = type(error.get("input")).__name__
        for words, plain in _TYPE_WORDS.items():
            if words in msg:
                msg = f"should be {'a ' if plain in {'list'} else ''}{plain}"
                break
        return f"{msg}, not {KIND_WORDS.get(got, got)}"
    return msg


def _pydantic_message(
    path: Path, located: Located, exc: ValidationError, model: type[BaseModel]
) -> tuple[str, list[str]]:
    """The first validation error as `file:line: field message`, the way a person reads it
    (with a count of the others), and every error in that form."""
    # A misspelt key also makes its field "missing": the spelling hint is the useful message.
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    problems = []
    for error in errors:
        loc: Loc = tuple(p for p in error["loc"] if isinstance(p, str | int))
        problems.append(
            f"{path}:{located.line_of(loc)}: {describe_loc(loc)} {_error_text(error, model)}"
        )
    line = problems[0]
    if len(errors) > 1:
        line += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return line, problems


def parse_located(path: Path, located: Located, model: type[BaseModel]) -> Any:
    """Validate located data against a pydantic model, translating errors to file:line: field."""
    if not isinstance(located.data, dict):
        raise SuiteError(f"{path}:1: expected a mapping of fields at the top level")
    try:
        return model.model_validate(located.data)
    except ValidationError as exc:
        message, problems = _pydantic_message(path, located, exc, model)
        raise SuiteError(message, problems) from None


def _verdict_line(path: Path, located: Located) -> int:
    """The line inside the rubric that mentions VERDICT (the rubric's own line if not found)."""
    start = located.line_of(("rubric",))
    lines = path.read_text(encoding="utf-8").splitlines()
    for number in range(start, len(lines) + 1):
        if mentions_verdict(lines[number - 1]):
            return number
    return start


def load_suite(path: Path | str) -> Suite:
    """Load and validate a suite file; every problem is a SuiteError naming file, line and field."""
    path = Path(path)
    with no_gc():  # collections during validation walked the whole node tree: 30% of the time
        return _load_suite(path)


def _load_suite(path: Path) -> Suite:
    located = load_yaml(path)
    data = located.data
    rubric = data.get("rubric") if isinstance(data, dict) else None
    if isinstance(rubric, str) and mentions_verdict(rubric):
        raise SuiteError(
            f"{path}:{_verdict_line(path, located)}: rubric must not mention VERDICT: Konkord "
            "owns the judge's response format and adds the verdict instructions itself; "
            "remove that sentence"
        )
    check_turns(path, located)
    suite: Suite = parse_located(path, located, Suite)
    seen: dict[str, int] = {}
    for index, task in enumerate(suite.tasks):
        if task.id in seen:
            line = located.line_of(("tasks", index, "id"))
            raise SuiteError(
                f'{path}:{line}: tasks[{index}].id "{task.id}" repeats tasks[{seen[task.id]}].id '
                f"(line {located.line_of(('tasks', seen[task.id], 'id'))}); task ids must be unique"
            )
        seen[task.id] = index
    problem = turn_like_id_problem([(task.id, task.multi_turn) for task in suite.tasks])
    if problem is not None:
        index, message = problem
        raise SuiteError(f"{path}:{located.line_of(('tasks', index, 'id'))}: {message}")
    return suite


def tests_problems(path: Path | str, suite: Suite) -> list[str]:
    """`file:line: field message` for each task whose tests do not compile. `konkord validate`
    asks this; a stage does not (`konkord check` records such tests as the task's failure).
    The line is the failing line itself inside a block (`tests: |`), else the field's line."""
    path = Path(path)
    located: Located | None = None
    problems = []
    given: list[tuple[str, Loc]] = []
    for index, task in enumerate(suite.tasks):
        if task.turns:  # a conversation's tests are its turns' own
            for k, turn in enumerate(task.turns):
                if turn.tests:
                    given.append((turn.tests, ("tasks", index, "turns", k, "tests")))
        elif task.tests:
            given.append((task.tests, ("tasks", index, "tests")))
    for tests, loc in given:
        try:
            compile(tests, "tests.py", "exec")
        except SyntaxError as exc:
            if located is None:
                located = load_yaml(path)
            line = located.line_of(loc)
            text = path.read_text(encoding="utf-8").splitlines()
            header = text[line - 1].split(":", 1)[-1] if line <= len(text) else ""
            if header.strip()[:1] in ("|", ">") and exc.lineno:
                line += exc.lineno
            problems.append(f"{path}:{line}: {describe_loc(loc)} do not compile: {exc.msg}")
    return problems
