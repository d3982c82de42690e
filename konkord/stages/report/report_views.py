"""The descriptive parts of the results file: cost per model and judge, and pass rates of
executed checks (the per-task views are in `task_source`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from konkord.configuration.runs_config import Price
from konkord.configuration.runspec import RunSpec
from konkord.evidence.log import Record
from konkord.evidence.verdicts import VerdictRecord
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
