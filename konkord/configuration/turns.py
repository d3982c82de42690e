"""A suite's conversations checked as written: `turns:` mistakes named at their own line
(both `prompt` and `turns`, an empty list or turn, a turn that is not text) before pydantic
validates the fields, whose errors could only point at the task; and the Turn model itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from konkord.configuration.validated import NonEmptyText
from konkord.configuration.yamlpos import KIND_WORDS, Located
from konkord.errors import SuiteError


def check_turns(path: Path, located: Located) -> None:
    """The mistakes a conversation invites, named at their own line before field validation."""
    tasks = located.data.get("tasks") if isinstance(located.data, dict) else None
    for index, task in enumerate(tasks if isinstance(tasks, list) else []):
        if not isinstance(task, dict) or "turns" not in task:
            continue
        where = ("tasks", index, "turns")
        name = f"tasks[{index}].turns"
        if "prompt" in task:
            raise SuiteError(
                f"{path}:{located.line_of(('tasks', index, 'prompt'))}: tasks[{index}] gives both "
                "prompt and turns: write a single prompt, or the conversation's turns, not both"
            )
        turns = task["turns"]
        if not isinstance(turns, list) or not turns:
            kind = type(turns).__name__
            got = "an empty list" if isinstance(turns, list) else KIND_WORDS.get(kind, kind)
            raise SuiteError(
                f"{path}:{located.line_of(where)}: {name} should be a list of user messages, "
                f"not {got}"
            )
        for number, turn in enumerate(turns):
            line = located.line_of((*where, number))
            if isinstance(turn, dict) and "prompt" not in turn:
                raise SuiteError(f"{path}:{line}: {name}[{number}].prompt is required")
            text = turn.get("prompt") if isinstance(turn, dict) else turn
            if not isinstance(text, str):
                got = KIND_WORDS.get(type(text).__name__, type(text).__name__)
                field = f"{name}[{number}]" + (".prompt" if isinstance(turn, dict) else "")
                line = (
                    located.line_of((*where, number, "prompt")) if isinstance(turn, dict) else line
                )
                raise SuiteError(
                    f"{path}:{line}: {field} should be text (the user's message), not {got}"
                )
            if not text.strip():
                raise SuiteError(f"{path}:{line}: {name}[{number}] must not be empty")


def unit_id(task_id: str, turn: int) -> str:
    """The id a conversation's turn is judged, labelled and checked under ("poem-t2", as the
    MT-Bench import names its turns); a suite whose own task ids collide is refused."""
    return f"{task_id}-t{turn}"


def split_unit(unit: str) -> tuple[str, int | None]:
    """(task id, turn) of a judged id; turn None for a single-turn task's own id."""
    base, mark, turn = unit.rpartition("-t")
    if mark and turn.isdigit():
        return base, int(turn)
    return unit, None


def conversation_turn(unit: str) -> tuple[str, int]:
    """(conversation, turn) of a judged id, for everything that must keep a conversation's
    turns together: a conversation's turn ("poem-t2") and an MT-Bench turn the import wrote as a
    task of its own ("q81-t2") are turn 2 of "poem" and "q81"; any other task is a conversation
    of one turn, turn 1 of itself."""
    base, turn = split_unit(unit)
    return (unit, 1) if turn is None else (base, turn)


def task_clusters(task_ids: list[str]) -> dict[str, int]:
    """Index per task id, and the same index for each turn of a conversation under its
    `unit_id`: turns are separate comparisons within one task, so the bootstrap, which
    resamples task indices, still resamples whole tasks. Tasks that are one conversation's
    turns (the MT-Bench import's "q81-t1" and "q81-t2") share their conversation's index too.
    Indices are dense from 0, at most one per task id."""
    conversations: dict[str, int] = {}
    index = {
        task_id: conversations.setdefault(conversation_turn(task_id)[0], len(conversations))
        for task_id in task_ids
    }
    return _ClusterIndex(index)


def conversation_count(task_ids: list[str]) -> int:
    """How many conversations (`task_clusters`' indices) a suite's tasks make: what the
    bootstrap and the sign test count as tasks."""
    return len({conversation_turn(task_id)[0] for task_id in task_ids})


class _ClusterIndex(dict[str, int]):
    """A task index that also answers for a conversation's turn ids."""

    def __missing__(self, key: str) -> int:
        base, turn = split_unit(key)
        if turn is None or not dict.__contains__(self, base):
            raise KeyError(key)
        return self[base]

    def __contains__(self, key: object) -> bool:
        # `in` must agree with `[]`: a turn id is in the index when its conversation is
        if dict.__contains__(self, key):
            return True
        if not isinstance(key, str):
            return False
        base, turn = split_unit(key)
        return turn is not None and dict.__contains__(self, base)


class Turn(BaseModel):
    """One user message of a conversation, with its own optional ground truth."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt: NonEmptyText
    reference: str | None = None
    tests: str | None = Field(
        default=None, description="Python asserts run against this turn's code by `check`."
    )


def turn_fields(turn: object) -> dict[str, Any]:
    """A turn as given (text, mapping or Turn) as the mapping Turn validates."""
    if isinstance(turn, str):
        return {"prompt": turn}
    if isinstance(turn, Turn):
        return turn.model_dump(exclude_defaults=True)
    return dict(turn) if isinstance(turn, dict) else {"prompt": turn}


def turn_like_id_problem(tasks: list[tuple[str, bool]]) -> tuple[int, str] | None:
    """(index, message) of the first single-turn task whose id reads as a turn that is not
    there, else None. Ids ending in `-t<N>` are read as turn N of one conversation wherever
    turns are kept together (intervals, per-turn calibration), as the MT-Bench import names a
    question's turns (`q81-t1`, `q81-t2`). So such ids must come as a whole series from `-t1`,
    beside no task of the bare name: a lone `budget-t2` is never read as a turn of a task that
    is not there. `tasks` holds (id, is a conversation of several turns) in suite order."""
    ids = {task_id for task_id, _ in tasks}
    series: dict[str, set[int]] = {}
    for task_id, multi_turn in tasks:
        base, turn = split_unit(task_id)
        if turn is not None and not multi_turn:
            series.setdefault(base, set()).add(turn)
    for index, (task_id, multi_turn) in enumerate(tasks):
        base, turn = split_unit(task_id)
        if turn is None or multi_turn:
            continue
        missing = sorted(set(range(1, max(series[base]) + 1)) - series[base])
        if base in ids or (missing and turn > missing[0]):
            why = (
                f'the suite also has a task "{base}"'
                if base in ids
                else f'the suite has no "{base}-t{missing[0]}"'
            )
            return index, (
                f'tasks[{index}].id "{task_id}" reads as turn {turn} of "{base}" (ids ending '
                f"in -t<N> are kept for a conversation's turns), but {why}; rename it"
            )
    return None
