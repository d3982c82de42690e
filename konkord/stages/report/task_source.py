"""The results file's tasks: each task's answers, every comparison with both orders, and the
labels, as the JSON its validated `TaskView` writes (`konkord.results.files.TaskData`), made one
task at a time from a `TaskSource`, plain data one pickle can carry to another process.

Building and validating a model per comparison and per order cost more than the rest of writing
the tasks, and the data is typed by construction (every field comes from a record whose types
the log checked on reading, or from the suite); a test holds it to the bytes the validated
model writes (`task_json` writes the comparisons).

At 20 models x 1,000 tasks the tasks are 190,000 comparisons and 380,000 order verdicts, 136 MB
of JSON: about a second of work that holds the interpreter. Made from a `TaskSource` they can
be made in this process (a thread beside the figures) or in a worker process of their own
(`task_worker`), by the same code, so the two give the same bytes. A judge's comparisons are
held field by field (the arrays of their columns, or lists); each order as a row of the log's
columns (taken from them once for every judge), or, for a record read some other way, as the
few fields a task shows (`task_columns`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from konkord.configuration.runspec import RunSpec
from konkord.configuration.suite import Suite
from konkord.evidence.combined_columns import columns_of
from konkord.evidence.log import Record
from konkord.evidence.verdict_rows import VerdictRow, VerdictTable
from konkord.evidence.verdicts import CombinedVerdict, OrderPair
from konkord.results.files import TaskData
from konkord.stages.report.task_columns import (
    VIEW_FIELDS,
    JudgeComparisons,
    OrderColumns,
    OrderRef,
    failure_text,
)
from konkord.stages.report.task_json import (
    ComparisonJson,
    OrderJson,
    comparisons_of_rows,
    task_json,
)


@dataclass
class TaskSource:
    """Everything the tasks are made from (see the module's docstring)."""

    suite: Suite
    models: tuple[str, ...]
    answers: dict[tuple[str, str], Record]
    comparisons: list[JudgeComparisons]
    orders: OrderColumns | None
    labels: list[Record]
    checks: dict[tuple[str, str, str], Record]
    features: dict[tuple[str, str], dict[str, int]] | None

    @property
    def size(self) -> int:
        """How many comparisons the tasks hold."""
        return sum(len(judged) for judged in self.comparisons)


def answer_features(answers: dict[tuple[str, str], Record]) -> dict[tuple[str, str], dict[str, int]]:
    """Style features of every answer that has text, counted once (for the style-controlled
    ranking and the task pages; in the task-file worker where one waits: `task_worker`)."""
    from konkord.stats.style_features import style_features

    return {
        key: style_features(str(rec["text"]))
        for key, rec in answers.items()
        if rec.get("error") is None and isinstance(rec.get("text"), str)
    }


def task_source(
    spec: RunSpec,
    answers: dict[tuple[str, str], Record],
    combined_by_judge: Mapping[str, list[CombinedVerdict]],
    labels: list[Record],
    checks: dict[tuple[str, str, str], Record],
    features: dict[tuple[str, str], dict[str, int]] | None = None,
) -> TaskSource:
    """What the run's tasks are made from: each judge's combined verdicts taken apart field
    by field (as the arrays of their columns where the list has them, else verdict by
    verdict)."""
    tables: list[VerdictTable] = []
    comparisons = [
        _comparisons(judge, combined, tables) for judge, combined in combined_by_judge.items()
    ]
    orders = OrderColumns.of(tables[0]) if tables else None
    return TaskSource(
        spec.suite, spec.models, answers, comparisons, orders, labels, checks, features
    )


def _comparisons(
    judge: str, combined: list[CombinedVerdict], tables: list[VerdictTable]
) -> JudgeComparisons:
    """One judge's combined verdicts as lists; `tables` holds the one table whose rows are
    given by number (found here if it is empty)."""
    columns = columns_of(combined)
    table = _table_of(combined) if columns is not None else None
    if columns is not None and table is not None and (not tables or tables[0] is table):
        if not tables:
            tables.append(table)
        winners = (
            [c.winner for c in combined] if columns.winner is None else columns.winner.tolist()
        )
        return JudgeComparisons(
            judge, columns.task, columns.model_a, columns.model_b, winners, columns.flipped,
            columns.complete, columns.ab, columns.ba, columns.values,
        )  # fmt: skip
    winner = [c.winner for c in combined]
    ab: list[OrderRef] = []
    ba: list[OrderRef] = []
    for c in combined:
        pair = c.orders
        if type(pair) is OrderPair:
            first, second = pair.ab, pair.ba
        else:
            first, second = pair.get("ab"), pair.get("ba")
        ab.append(_order_ref(first, tables))
        ba.append(_order_ref(second, tables))
    return JudgeComparisons(
        judge,
        [c.task_id for c in combined],
        [c.model_a for c in combined],
        [c.model_b for c in combined],
        winner,
        [c.flipped for c in combined],
        [c.complete for c in combined],
        ab,
        ba,
    )


def _table_of(combined: list[CombinedVerdict]) -> VerdictTable | None:
    """The table the orders' rows belong to (the first verdict's), if they are rows."""
    known = getattr(combined, "table", None)  # a combined list of a table's rows says which
    if isinstance(known, VerdictTable):
        return known
    for c in combined:
        pair = c.orders
        for verdict in (pair.ab, pair.ba) if type(pair) is OrderPair else pair.values():
            if type(verdict) is VerdictRow:
                return verdict.table
            if verdict is not None:
                return None
    return None


def _order_ref(verdict: Mapping[str, Any] | None, tables: list[VerdictTable]) -> OrderRef:
    """An order as a row of the shared table where it is one, else as its shown fields."""
    if verdict is None:
        return None
    if type(verdict) is VerdictRow:
        if not tables:
            tables.append(verdict.table)
        if verdict.table is tables[0]:
            return verdict.index
    return {name: verdict.get(name) for name in VIEW_FIELDS}


def tasks_of(source: TaskSource) -> Iterator[TaskData]:
    """Each task's view (its answers, every comparison with both orders, the labels) as the
    JSON of a `TaskView`, made one at a time as the results file is written: at 20
    models x 1,000 tasks they are 190,000 comparisons, which held together cost more memory
    than the rest of the report."""
    labels_by_item: dict[tuple[str, str, str], list[dict[str, str]]] = {}
    for rec in source.labels:
        if rec.get("winner") is None:
            continue
        key = (rec["task_id"], rec["model_a"], rec["model_b"])
        labels_by_item.setdefault(key, []).append(
            {"labeller": str(rec["labeller"]), "winner": str(rec["winner"])}
        )
    # Grouped by task once: scanning every verdict for each task is quadratic in the tasks
    # (190 million visits at 20 models x 1,000 tasks); each task's fields taken as lists
    # when it is made, so no list of every comparison's fields is held.
    by_task = [(judged, judged.rows_by_task()) for judged in source.comparisons]
    # The shared columns read at list speed, the loop below inline (a call per order verdict
    # cost a fifth of writing the tasks).
    orders = source.orders
    position_winners: list[Any] = []
    winners: list[Any] = []
    rationales: list[Any] = []
    failures: list[str | None] = []  # each row's failure as a task shows it, taken once
    if orders is not None:
        position_winners, winners, rationales = (
            orders.column(name) for name in ("position_winner", "winner", "rationale")
        )
        failures = orders.failures()
    shown_columns = (position_winners, winners, rationales, failures)
    answers, checks, features = source.answers, source.checks, source.features
    for task in source.suite.judged_tasks():
        answer_views = [
            _answer_view(task.id, model, task.checks, answer, checks, features)
            for model in source.models
            if (answer := answers.get((task.id, model))) is not None
        ]
        comparisons: list[ComparisonJson] = []
        for judged, rows_of in by_task:
            rows = rows_of.get(task.id)
            if rows is None:
                continue
            judge = judged.judge
            pairs = judged.take(rows)
            if judged.values is not None and None not in pairs[5] and None not in pairs[6]:
                # every order a row of the shared columns (as the log's columns give them)
                comparisons += comparisons_of_rows(
                    judge, task.id, pairs, shown_columns, labels_by_item
                )
                continue
            for model_a, model_b, winner, flipped, complete, ab, ba in zip(*pairs, strict=True):
                shown = []
                for order, first, ref in (("ab", model_a, ab), ("ba", model_b, ba)):
                    if ref is None:
                        continue
                    if isinstance(ref, dict):
                        shown.append(_order_json(order, first, ref))
                        continue
                    i = ref
                    shown.append(
                        OrderJson(
                            order, first, position_winners[i], winners[i], rationales[i],
                            failures[i],
                        )
                    )
                comparisons.append(
                    ComparisonJson(
                        judge, model_a, model_b, winner, bool(flipped), bool(complete), shown,
                        labels_by_item.get((task.id, model_a, model_b), []),
                    )
                )
        head = {
            "id": task.id,
            "prompt": task.prompt,
            "reference": task.reference,
            "tests": task.tests,
            "answers": answer_views,
        }
        tail = {"turn": None, "earlier": [], **_conversation(source, task.id)}
        yield TaskData(task.id, task_json(head, comparisons, tail))


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


def _order_json(order: str, shown_first: str, fields: dict[str, Any]) -> OrderJson:
    """One order's verdict as `OrderVerdict` holds it, from its shown fields."""
    failure = None if fields["kind"] == "verdict" else failure_text(fields["reason"], fields["detail"])
    return OrderJson(
        order, shown_first, fields["position_winner"], fields["winner"], fields["rationale"],
        failure,
    )


def _conversation(source: TaskSource, task_id: str) -> dict[str, Any]:
    """A conversation's turn: which turn, and the turns before it with each model's reply."""
    from konkord.configuration.turns import split_unit, unit_id

    base, turn = split_unit(task_id)
    if turn is None:
        return {}
    suite = source.suite
    whole = next((t for t in suite.tasks if t.id == base and t.multi_turn), None)
    if whole is None or task_id in {t.id for t in suite.tasks}:
        return {}
    earlier = []
    for k, asked in enumerate(whole.turns[: turn - 1], start=1):
        replies = {}
        for model in source.models:
            record = source.answers.get((unit_id(base, k), model))
            replies[model] = None if record is None else record.get("text")
        earlier.append({"turn": k, "prompt": asked.prompt, "replies": replies})
    return {"turn": turn, "earlier": earlier}
