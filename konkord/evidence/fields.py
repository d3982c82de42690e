"""The type of each known field of an evidence record, checked as every record is read.

A record edited by hand (`text` a number, `model_a` a list, `cost_usd` a string) would
otherwise travel far before something trips on it with a traceback. Read here, it stops the
command with one line naming the file, the line and the field. Unknown fields pass: newer
records may carry more.
"""

from __future__ import annotations

from itertools import repeat

TEXT = (str,)
MAYBE_TEXT = (str, type(None))
MAYBE_INT = (int, type(None))
MAYBE_NUMBER = (int, float, type(None))
MAYBE_DICT = (dict, type(None))
MAYBE_LIST = (list, type(None))
MAYBE_BOOL = (bool, type(None))

_COMMON: dict[str, tuple[type, ...]] = {"kind": MAYBE_TEXT, "created_at": MAYBE_TEXT}
_CALL: dict[str, tuple[type, ...]] = {
    "finish_reason": MAYBE_TEXT, "tokens_in": MAYBE_INT, "tokens_out": MAYBE_INT,
    "cost_usd": MAYBE_NUMBER, "latency_s": MAYBE_NUMBER, "raw": MAYBE_TEXT,
}  # fmt: skip
FIELD_TYPES: dict[str, dict[str, tuple[type, ...]]] = {
    "answers": {
        **_COMMON, **_CALL, "task_id": TEXT, "model": TEXT, "settings_hash": TEXT,
        "text": MAYBE_TEXT, "error": MAYBE_TEXT, "error_kind": MAYBE_TEXT,
        "attempts": MAYBE_INT, "settings": MAYBE_DICT, "turn": MAYBE_INT,
    },
    "verdicts": {
        **_COMMON, **_CALL, "task_id": TEXT, "model_a": TEXT, "model_b": TEXT, "order": TEXT,
        "judge": TEXT, "frame_hash": MAYBE_TEXT, "position_winner": MAYBE_TEXT,
        "winner": MAYBE_TEXT, "rationale": MAYBE_TEXT, "answer_a_sha": MAYBE_TEXT,
        "answer_b_sha": MAYBE_TEXT, "message_sha": MAYBE_TEXT, "retried": MAYBE_BOOL,
        "first_raw": MAYBE_TEXT, "reason": MAYBE_TEXT, "detail": MAYBE_TEXT,
        "probs": MAYBE_DICT, "confidence": MAYBE_TEXT, "samples": MAYBE_LIST,
    },
    "prompts": {
        **_COMMON, "frame_hash": TEXT, "system_prompt": MAYBE_TEXT, "rubric_sha": MAYBE_TEXT,
        "judge": MAYBE_TEXT,
    },
    "labels": {
        **_COMMON, "task_id": TEXT, "model_a": TEXT, "model_b": TEXT, "labeller": TEXT,
        "winner": MAYBE_TEXT, "shown_first": MAYBE_TEXT, "source": MAYBE_TEXT,
    },
    "designs": {
        **_COMMON, "design": TEXT, "round": (int,), "label": MAYBE_TEXT, "rows": (list,),
        "pairs": MAYBE_LIST, "stop": MAYBE_TEXT, "budget_calls": MAYBE_INT,
    },
    "checks": {
        **_COMMON, "task_id": TEXT, "model": TEXT, "check": TEXT, "answer_sha": MAYBE_TEXT,
        "passed": (bool,), "reason": MAYBE_TEXT, "duration_s": MAYBE_NUMBER,
        "output": MAYBE_TEXT, "sandbox": MAYBE_TEXT, "tests_sha": MAYBE_TEXT,
        "verdict_by": MAYBE_TEXT, "limits": MAYBE_DICT, "code_source": MAYBE_TEXT,
    },
}  # fmt: skip
_NAMES = {str: "text", int: "a whole number", float: "a number", dict: "an object",
          list: "a list", bool: "true or false", type(None): "null"}  # fmt: skip


def _shown(value: object) -> str:
    """What a JSON value is, in a user's words."""
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    return _NAMES.get(type(value), type(value).__name__)


def _problem(types: dict[str, tuple[type, ...]], record: dict[str, object]) -> str | None:
    """What is wrong with one record's known fields, if anything."""
    for field, value in record.items():
        allowed = types.get(field)
        if allowed is None or type(value) in allowed:
            continue
        expected = " or ".join(dict.fromkeys(
            "a number" if kind in (int, float) and float in allowed else _NAMES[kind]
            for kind in allowed))  # fmt: skip
        return f'field "{field}" is {_shown(value)}, expected {expected}'
    return None


def check_fields(stream: str, records: list[dict[str, object]]) -> tuple[int, str] | None:
    """(index, problem) of the first record whose known field has the wrong type, or None.

    Records written by the same code share one shape (their field names and value types in
    order), so the shapes are gathered in one pass that stays in C and each distinct shape is
    checked once: a 200,000-record stream has a handful. bool is not taken for a number, nor a
    number for true or false."""
    types = FIELD_TYPES.get(stream)
    if types is None:
        return None
    kinds_of = map(tuple, map(map, repeat(type), map(dict.values, records)))
    shapes = set(zip(map(tuple, records), kinds_of, strict=True))
    for names, kinds in shapes:
        for name, kind in zip(names, kinds, strict=True):
            allowed = types.get(name)
            if allowed is not None and kind not in allowed:
                break
        else:
            continue
        for index, record in enumerate(records):  # a wrong shape: find its first record
            problem = _problem(types, record)
            if problem is not None:
                return index, problem
    return None
