"""The descriptive parts of the results file: cost per model and judge, the per-task view of
every answer and verdict, and pass rates of executed checks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Literal

import numpy as np

from konkord.configuration.runs_config import Price
from konkord.configuration.runspec import RunSpec
from konkord.evidence.log import Record
from konkord.evidence.verdicts import CombinedVerdict, VerdictRecord
from konkord.results import schema as R
from konkord.stages.decisions import CostFigure, cost_of


def cost_line(
    who: str,
    role: Literal["generation", "judge"],
    records: Sequence[VerdictRecord],
    price: Price | None = None,
    figure: CostFigure | None = None,
) -> R.CostLine:
    """The results file's cost line, under the one cost rule (`konkord.stages.decisions`)."""
    got = figure if figure is not None else cost_of(records, who, price)
    return R.CostLine(
        who=who,
        role=role,
        calls=got.calls,
        tokens_in=got.tokens_in,
        tokens_out=got.tokens_out,
        cost_usd=got.cost_usd,
        known_cost_usd=got.known_cost_usd,
        unknown_price_calls=got.unknown_calls,
        median_latency_s=got.median_latency_s,
    )


def task_views(
    spec: RunSpec,
    answers: dict[tuple[str, str], Record],
    combined_by_judge: dict[str, list[CombinedVerdict]],
    labels: list[Record],
    checks: dict[tuple[str, str, str], Record],
    features: dict[tuple[str, str], dict[str, int]] | None = None,
) -> Iterator[R.TaskView]:
    """Each task's view (its answers, every comparison with both orders, the labels), made one
    at a time as the results file is written: at 20 models x 1,000 tasks they are 190,000
    comparisons, which held together cost more memory than the rest of the report."""
    labels_by_item: dict[tuple[str, str, str], list[R.LabelView]] = {}
    for rec in labels:
        if rec.get("winner") is None:
            continue
        key = (rec["task_id"], rec["model_a"], rec["model_b"])
        labels_by_item.setdefault(key, []).append(
            R.LabelView(labeller=str(rec["labeller"]), winner=str(rec["winner"]))
        )
    # Grouped by task once: scanning every verdict for each task is quadratic in the tasks
    # (190 million visits at 20 models x 1,000 tasks).
    by_task: dict[str, list[tuple[str, CombinedVerdict]]] = {}
    for judge, combined in combined_by_judge.items():
        for c in combined:
            by_task.setdefault(c.task_id, []).append((judge, c))
    columns: dict[int, list[list[Any]]] = {}  # a table's columns the pages show, by id
    for task in spec.suite.judged_tasks():
        answer_views = []
        for model in spec.models:
            answer = answers.get((task.id, model))
            if answer is None:
                continue
            rec = answer
            answer_views.append(
                R.AnswerView(
                    model=model,
                    text=rec.get("text"),
                    finish_reason=rec.get("finish_reason"),
                    truncated=rec.get("finish_reason") == "length" and rec.get("error") is None,
                    error=rec.get("error"),
                    tokens_out=rec.get("tokens_out"),
                    cost_usd=rec.get("cost_usd"),
                    latency_s=rec.get("latency_s"),
                    checks=[
                        R.CheckView(
                            check=check,
                            passed=bool(checks[(task.id, model, check)].get("passed")),
                            reason=checks[(task.id, model, check)].get("reason"),
                            sandbox=checks[(task.id, model, check)].get("sandbox"),
                        )
                        for check in task.checks
                        if (task.id, model, check) in checks
                    ],
                    style=(features or {}).get((task.id, model)),
                )
            )
        # Plain data, validated once per task by pydantic-core: one model built per verdict
        # costs a Python call each (half a million at 20 models x 1,000 tasks).
        comparisons: list[dict[str, Any]] = []
        for judge, c in by_task.get(task.id, []):
            orders = []
            for order in ("ab", "ba"):
                verdict = c.orders.get(order)
                if verdict is None:
                    continue
                position_winner, winner, rationale, kind, reason, detail = view_fields(
                    verdict, columns
                )
                orders.append(
                    {
                        "order": order,
                        "shown_first": c.model_a if order == "ab" else c.model_b,
                        "position_winner": position_winner,
                        "winner": winner,
                        "rationale": rationale,
                        "failure": None
                        if kind == "verdict"
                        else f"{reason}: {detail or ''}".strip(": "),
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
                    "orders": orders,
                    "labels": labels_by_item.get((task.id, c.model_a, c.model_b), []),
                }
            )
        yield R.TaskView.model_validate(
            {
                "id": task.id,
                "prompt": task.prompt,
                "reference": task.reference,
                "tests": task.tests,
                "answers": answer_views,
                "comparisons": comparisons,
                **_conversation(spec, task.id, answers),
            }
        )


_VIEW_FIELDS = ("position_winner", "winner", "rationale", "kind", "reason", "detail")


def view_fields(verdict: VerdictRecord, columns: dict[int, list[list[Any]]]) -> list[Any]:
    """The fields a task page shows of one verdict record; from a row of the log's columns,
    read from them directly (at list speed: 380,000 records at 20 models x 1,000 tasks).
    `columns` keeps each table's lists between calls."""
    from konkord.evidence.verdict_table import VerdictRow

    if type(verdict) is VerdictRow:
        table, index = verdict.table, verdict.index
        lists = columns.get(id(table))
        if lists is None:
            lists = columns[id(table)] = [table.column(name) for name in _VIEW_FIELDS]
        a, b, c, d, e, f = lists
        return [a[index], b[index], c[index], d[index], e[index], f[index]]
    return [verdict.get(name) for name in _VIEW_FIELDS]


def _conversation(
    spec: RunSpec, task_id: str, answers: dict[tuple[str, str], Record]
) -> dict[str, Any]:
    """A conversation's turn: which turn, and the turns before it with each model's reply."""
    from konkord.configuration.turns import split_unit, unit_id

    base, turn = split_unit(task_id)
    whole = next((t for t in spec.suite.tasks if t.id == base and t.multi_turn), None)
    if turn is None or whole is None or task_id in {t.id for t in spec.suite.tasks}:
        return {}
    earlier = []
    for k, asked in enumerate(whole.turns[: turn - 1], start=1):
        replies = {}
        for model in spec.models:
            record = answers.get((unit_id(base, k), model))
            replies[model] = None if record is None else record.get("text")
        earlier.append({"turn": k, "prompt": asked.prompt, "replies": replies})
    return {"turn": turn, "earlier": earlier}


def pass_rates_block(
    spec: RunSpec,
    answers: dict[tuple[str, str], Record],
    checks: dict[tuple[str, str, str], Record],
) -> list[R.PassRate]:
    """Per-model pass rates per check with task-bootstrap intervals, where checks were run."""
    if not checks:
        return []
    from konkord.configuration.turns import task_clusters
    from konkord.stats import wilson_interval
    from konkord.stats.passrates import pass_rates

    models = list(spec.models)
    task_ids = spec.suite.judged_ids()
    index = task_clusters(task_ids)  # a conversation's turns resample together
    clusters = [index[task_id] for task_id in task_ids]
    rows: list[R.PassRate] = []
    for check in sorted({str(k[2]) for k in checks}):
        outcome = np.full((len(task_ids), len(models)), np.nan)
        for t, task_id in enumerate(task_ids):
            for m, model in enumerate(models):
                rec = checks.get((task_id, model, check))
                if rec is not None and (task_id, model) in answers:
                    outcome[t, m] = 1.0 if rec.get("passed") else 0.0
        for rate in pass_rates(outcome, models, check, clusters=clusters):
            low, high = rate.low, rate.high
            if rate.n:
                # With one answer per task, the task bootstrap of a pass rate collapses to a
                # point at 0/n or n/n; the Wilson interval does not, so the wider one is shown.
                w_low, w_high = wilson_interval(rate.passed, rate.n)
                low = w_low if low is None else min(low, w_low)
                high = w_high if high is None else max(high, w_high)
            rows.append(
                R.PassRate(
                    model=rate.model,
                    check=check,
                    passed=rate.passed,
                    total=rate.n,
                    rate=R.Interval(estimate=rate.rate, low=low, high=high),
                )
            )
    return rows
