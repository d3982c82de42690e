"""Per-model pass rates of each check, with task-bootstrap intervals.

Tasks are resampled, not answers: a hard task fails most models, so answers to one task are not
independent draws. Pure: an outcome matrix in, frozen dataclasses out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

DEFAULT_RESAMPLES = 2000


@dataclass(frozen=True)
class PassRate:
    """One model's pass rate on one check: passed of n answers checked, with an interval."""

    model: str
    check: str
    passed: int
    n: int
    rate: float | None
    low: float | None
    high: float | None


def pass_rates(
    outcome: NDArray[np.float64],
    models: Sequence[str],
    check: str,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
    clusters: Sequence[int] | None = None,
) -> tuple[PassRate, ...]:
    """Pass rates per model from a (tasks, models) matrix of 1 (pass), 0 (fail), nan (no result).

    The interval is the percentile bootstrap of the same ratio (passes / answers checked),
    resampling tasks with replacement; a resample without any result for a model is skipped.
    `clusters` (a dense index per row) resamples groups of rows together instead: the turns of
    one conversation, whose outcomes are no more independent than one task's answers."""
    outcome = np.asarray(outcome, dtype=float)
    n_tasks, n_models = outcome.shape
    if n_models != len(models):
        raise ValueError(f"outcome has {n_models} columns for {len(models)} models")
    present = ~np.isnan(outcome)
    wins = np.where(present, outcome, 0.0)
    rng = np.random.default_rng(seed)
    groups = np.arange(n_tasks) if clusters is None else np.asarray(clusters, dtype=np.intp)
    if groups.shape != (n_tasks,):
        raise ValueError(f"clusters has {groups.size} entries for {n_tasks} rows")
    n_groups = int(groups.max()) + 1 if n_tasks else 0
    weights = np.zeros((resamples, n_tasks))
    if n_tasks:
        drawn = rng.multinomial(n_groups, np.full(n_groups, 1.0 / n_groups), size=resamples)
        weights[:] = drawn[:, groups]
    numerator = weights @ wins
    denominator = weights @ present.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        draws = np.where(denominator > 0, numerator / denominator, np.nan)
    tail = (1.0 - level) / 2.0 * 100.0
    out: list[PassRate] = []
    for m, model in enumerate(models):
        n = int(present[:, m].sum())
        passed = int(wins[:, m].sum())
        if n == 0:
            out.append(PassRate(model, check, 0, 0, None, None, None))
            continue
        column = draws[:, m][~np.isnan(draws[:, m])]
        low, high = np.percentile(column, [tail, 100.0 - tail])
        out.append(PassRate(model, check, passed, n, passed / n, float(low), float(high)))
    return tuple(out)
