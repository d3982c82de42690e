"""The results file's tasks: each task's answers, every comparison with both orders, and the
labels, made one task at a time as the file is written.

At 20 models x 1,000 tasks they are 190,000 comparisons and 380,000 order verdicts. Each task
is made as plain data in `TaskView`'s shape (`konkord.results.schema.TaskData`) and written as
it is: building and validating a model per comparison and per order cost more than the rest of
writing the tasks, and the data is typed by construction (every field comes from a record whose
types the log checked on reading, or from the suite). `task_views` validates the same data into
models, for the callers that hold the results in memory; a test holds the two to the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from konkord.configuration.runspec import RunSpec
from konkord.evidence.log import Record
from konkord.evidence.verdicts import CombinedVerdict, OrderPair, VerdictRecord
from konkord.results import schema as R


def task_views(
    spec: RunSpec,
    answers: dict[tuple[str, str], Record],
    combined_by_judge: dict[str, list[CombinedVerdict]],
    labels: list[Record],
    checks: dict[tuple[str, str, str], Record],
    features: dict[tuple[str, str], dict[str, int]] | None = None,
) -> Iterator[R.TaskView]:
    """Each task's view as a validated model, one at a time (see `task_data`)."""
    for task in task_data(spec, answers, combined_by_judge, labels, checks, features):
        yield task.view()


def task_data(
    spec: RunSpec,
    answers: dict[tuple[str, str], Record],
    combined_by_judge: dict[str, list[CombinedVerdict]],
    labels: list[Record],
    checks: dict[tuple[str, str, str], Record],
    features: dict[tuple[str, str], dict[str, int]] | None = None,
) -> Iterator[R.TaskData]:
    """Each task's view (its answers, every comparison with both orders, the labels) as plain
    data, made one at a time as the results file is written: at 20 models x 1,000 tasks they
    are 190,000 comparisons, which held together cost more memory than the rest of the report."""
    labels_by_item: dict[tuple[str, str, str], list[dict[str, str]]] = {}
    for rec in labels:
        if rec.get("winner") is None:
            continue
        key = (rec["task_id"], rec["model_a"], rec["model_b"])
        labels_by_item.setdefault(key, []).append(
            {"labeller": str(rec["labeller"]), "winner": str(rec["winner"])}
        )
    # Grouped by task once: scanning every verdict for each task is quadratic in the tasks
    # (190 million visits at 20 models x 1,000 tasks).
    by_task: dict[str, list[tuple[str, CombinedVerdict]]] = {}
    for judge, combined in combined_by_judge.items():
        for c in combined:
            by_task.setdefault(c.task_id, []).append((judge, c))
    from konkord.evidence.verdict_table import VerdictRow

    # A row of the log's columns is read from them directly, at list speed (380,000 order
    # verdicts at 20 models x 1,000 tasks): its table's columns are taken once, and the loop
    # below stays inline (a call per order verdict cost a fifth of writing the tasks).
    table = None
    position_winners: list[Any] = []
    winners: list[Any] = []
    rationales: list[Any] = []
    kinds: list[Any] = []
    reasons: list[Any] = []
    details: list[Any] = []
    for task in spec.suite.judged_tasks():
        answer_views = [
            _answer_view(task.id, model, task.checks, answer, checks, features)
            for model in spec.models
            if (answer := answers.get((task.id, model))) is not None
        ]
        comparisons: list[dict[str, Any]] = []
        for judge, c in by_task.get(task.id, ()):
            pair = c.orders
            if type(pair) is OrderPair:
                ab, ba = pair.ab, pair.ba
            else:
                ab, ba = pair.get("ab"), pair.get("ba")
            shown = []
            for order, first, verdict in (("ab", c.model_a, ab), ("ba", c.model_b, ba)):
                if verdict is None:
                    continue
                if type(verdict) is not VerdictRow:
                    shown.append(_order_view(order, first, verdict))
                    continue
                if verdict.table is not table:
                    table = verdict.table
                    position_winners, winners, rationales, kinds, reasons, details = (
                        table.column(name) for name in _VIEW_FIELDS
                    )
                i = verdict.index
                shown.append(
                    {
                        "order": order,
                        "shown_first": first,
                        "position_winner": position_winners[i],
                        "winner": winners[i],
                        "rationale": rationales[i],
                        "failure": None
                        if kinds[i] == "verdict"
                        else _failure(reasons[i], details[i]),
                    }
                )
            comparisons.append(
                {
                    "judge": judge,
                    "model_a": c.model_a,
                    "model_b": c.model_b,
                    "winner": c.winner,
                    "flipped": c.flipped,
                    "complete": c.complete,
                    "orders": shown,
                    "labels": labels_by_item.get((task.id, c.model_a, c.model_b), []),
                    "cascade": None,
                }
            )
        yield R.TaskData(
            {
                "id": task.id,
                "prompt": task.prompt,
                "reference": task.reference,
                "tests": task.tests,
                "answers": answer_views,
                "comparisons": comparisons,
                "turn": None,
                "earlier": [],
                **_conversation(spec, task.id, answers),
            }
        )


def _answer_view(
    task_id: str,
    model: str,
    task_checks: Sequence[str],
    rec: Record,
    checks: dict[tuple[str, str, str], Record],
    features: dict[tuple[str, str], dict[str, int]] | None,
) -> dict[str, Any]:
    """One answer as `AnswerView` holds it (a number the log wrote as a whole number becomes
    the float the model makes of it)."""
    error = rec.get("error")
    return {
        "model": model,
        "text": rec.get("text"),
        "finish_reason": rec.get("finish_reason"),
        "truncated": rec.get("finish_reason") == "length" and error is None,
        "error": error,
        "tokens_out": rec.get("tokens_out"),
        "cost_usd": _float(rec.get("cost_usd")),
        "latency_s": _float(rec.get("latency_s")),
        "checks": [
            {
                "check": check,
                "passed": bool(found.get("passed")),
                "reason": found.get("reason"),
                "sandbox": found.get("sandbox"),
            }
            for check in task_checks
            if (found := checks.get((task_id, model, check))) is not None
        ],
        "style": (features or {}).get((task_id, model)),
    }


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


_VIEW_FIELDS = ("position_winner", "winner", "rationale", "kind", "reason", "detail")


def _order_view(order: str, shown_first: str, verdict: VerdictRecord) -> dict[str, Any]:
    """One order's verdict as `OrderVerdict` holds it, from a record."""
    kind, reason, detail = verdict.get("kind"), verdict.get("reason"), verdict.get("detail")
    return {
        "order": order,
        "shown_first": shown_first,
        "position_winner": verdict.get("position_winner"),
        "winner": verdict.get("winner"),
        "rationale": verdict.get("rationale"),
        "failure": None if kind == "verdict" else _failure(reason, detail),
    }


def _failure(reason: Any, detail: Any) -> str:
    """Why an order has no verdict, as the task page shows it."""
    return f"{reason}: {detail or ''}".strip(": ")


def _conversation(
    spec: RunSpec, task_id: str, answers: dict[tuple[str, str], Record]
) -> dict[str, Any]:
    """A conversation's turn: which turn, and the turns before it with each model's reply."""
    from konkord.configuration.turns import split_unit, unit_id

    base, turn = split_unit(task_id)
    if turn is None:
        return {}
    whole = next((t for t in spec.suite.tasks if t.id == base and t.multi_turn), None)
    if whole is None or task_id in {t.id for t in spec.suite.tasks}:
        return {}
    earlier = []
    for k, asked in enumerate(whole.turns[: turn - 1], start=1):
        replies = {}
        for model in spec.models:
            record = answers.get((unit_id(base, k), model))
            replies[model] = None if record is None else record.get("text")
        earlier.append({"turn": k, "prompt": asked.prompt, "replies": replies})
    return {"turn": turn, "earlier": earlier}
