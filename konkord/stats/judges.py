"""Judges compared with each other: consensus match, per-task consistency, length preference.

Input representation: `panel_verdicts(...)` packs the combined verdicts of J judges on one run
(parallel arrays, one entry per judge, task and pair); `panel_wins` turns a block of its tasks
into score matrices `wins[j, t, a, b]` = score of model a against model b by judge j on task t
(a win 1, a tie half to each side), shape (J, T, M, M). A model takes part in a fit on a task when it has
at least one comparison there; models without one are left out of every figure for that task.

Definitions (what the Judges page prints):

- A judge's *ranking of a task* is the Bradley-Terry fit (the run's estimator, weak prior) to its
  own combined verdicts on that task. The *consensus of the others* on a task is the same fit to
  the verdicts of every other judge pooled: never the judge's own (leave one judge out).
- *Pair-order agreement* of two rankings over the models both place: for every pair of models,
  1 when both rankings order the pair the same strict way, 0 when opposite ways, 1/2 when either
  ranks the two level; averaged over pairs. It equals (1 + Kendall's tau-a) / 2: 1 is the same
  order, 1/2 what an unrelated order scores on average, 0 the reversed order.
- *Consensus match* of a judge: its pair-order agreement with the others' consensus, per task,
  averaged over tasks, with a task-bootstrap interval. It needs three judges (with two the
  "consensus" would be a single other judge).
- *Consistency* of a judge, per task: the mean fitted probability that each model beats the one
  its own ranking puts just below it; averaged over tasks. Its fit has a vanishing prior
  (`diagnostics.CONSISTENCY_PRIOR`), so a judge that orders a task cleanly scores near 100%
  whatever the number of models (the ranking's prior capped it at 0.68 with 12 models). It measures how tightly the verdicts
  hang together, not whether they are right: a judge that always prefers the answer whose text
  sorts first alphabetically is perfectly consistent and knows nothing of quality.
- *Length preference*: among decided pairs whose answers differ in length, the share won by the
  longer answer (0.5 is no preference), with a Wilson interval.

All (J x T) per-task fits, own and leave-one-out, run batched through `newton_bt`, a block of
tasks at a time (`panel_figures`), so memory stays bounded for long runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .bt import DEFAULT_PRIOR, FloatArray, IntArray, index_arrays, newton_bt
from .diagnostics import CONSISTENCY_PRIOR, wilson_interval
from .resample import DEFAULT_LEVEL, DEFAULT_RESAMPLES, bootstrap_interval, task_weights

LEVEL_TOLERANCE = 1e-6  # fitted log-strengths closer than this rank two models level
MIN_JUDGES_FOR_CONSENSUS = 3


@dataclass(frozen=True)
class PanelVerdicts:
    """Combined verdicts of J judges: parallel arrays, one entry per (judge, task, pair), sorted
    by task so a range of tasks is one slice. Build with `panel_verdicts(...)`."""

    judge: IntArray
    task: IntArray
    i: IntArray
    j: IntArray
    score: FloatArray
    n_judges: int
    n_models: int
    n_tasks: int


def panel_verdicts(
    judge: npt.ArrayLike,
    task: npt.ArrayLike,
    i: npt.ArrayLike,
    j: npt.ArrayLike,
    score: npt.ArrayLike,
    n_judges: int,
    n_models: int,
    n_tasks: int,
) -> PanelVerdicts:
    """Validate and pack; `score` is 1 when model i won, 0.5 for a tie, 0 when model j won.
    ValueError names the first bad entry."""
    t, a, b, s = index_arrays(
        ("task", "i", "j", "score"), (task, i, j, score), n_models, n_tasks, "verdict"
    )
    g = np.asarray(judge, dtype=np.int64).reshape(-1)
    if g.shape != t.shape:
        raise ValueError(f"judge must have the length of task; got {g.size} and {t.size}")
    bad = np.flatnonzero((g < 0) | (g >= n_judges))
    if bad.size:
        raise ValueError(f"judge[{bad[0]}] = {g[bad[0]]} is outside 0..{n_judges - 1}")
    bad = np.flatnonzero(~((s >= 0.0) & (s <= 1.0)))
    if bad.size:
        raise ValueError(f"score[{bad[0]}] = {s[bad[0]]} is outside 0..1")
    order = np.argsort(t, kind="stable")
    return PanelVerdicts(
        g[order], t[order], a[order], b[order], s[order], int(n_judges), int(n_models), int(n_tasks)
    )


def panel_wins(panel: PanelVerdicts, first: int = 0, stop: int | None = None) -> FloatArray:
    """Per-judge, per-task score matrices (J, tasks, M, M) for tasks first..stop-1 (all by
    default): [g, t, a, b] = score of model a against model b by judge g on task first + t."""
    stop = panel.n_tasks if stop is None else stop
    lo, hi = np.searchsorted(panel.task, [first, stop])
    g, t = panel.judge[lo:hi], panel.task[lo:hi] - first
    a, b, s = panel.i[lo:hi], panel.j[lo:hi], panel.score[lo:hi]
    m, n_t = panel.n_models, stop - first
    size = panel.n_judges * n_t * m * m
    cell = (g * n_t + t) * m
    flat = np.bincount((cell + a) * m + b, weights=s, minlength=size)
    flat += np.bincount((cell + b) * m + a, weights=1.0 - s, minlength=size)
    out: FloatArray = flat.astype(np.float64).reshape(panel.n_judges, n_t, m, m)
    return out


def _present(wins: FloatArray) -> npt.NDArray[np.bool_]:
    """(..., M): models with at least one comparison in each score matrix."""
    out: npt.NDArray[np.bool_] = (wins + np.swapaxes(wins, -1, -2)).sum(axis=-1) > 0
    return out


def task_strengths(wins: FloatArray, prior: float = DEFAULT_PRIOR) -> FloatArray:
    """Bradley-Terry log-strengths of every score matrix (..., M, M) -> (..., M), one batch."""
    shape = wins.shape
    m = shape[-1]
    flat = wins.reshape(-1, m, m)
    beta = np.zeros((flat.shape[0], m))
    informative = flat.reshape(flat.shape[0], -1).any(axis=1)
    if informative.any():
        beta[informative] = newton_bt(flat[informative], prior=prior).beta
    out: FloatArray = beta.reshape(shape[:-1])
    return out


def pair_order_agreement(
    beta_x: FloatArray, beta_y: FloatArray, present: npt.NDArray[np.bool_]
) -> tuple[FloatArray, IntArray]:
    """Pair-order agreement of two rankings (..., M) over the models `present` in both.

    Returns the agreement (NaN with fewer than two models) and the number of pairs, each (...)."""
    dx = np.sign(_level(beta_x[..., :, None] - beta_x[..., None, :]))
    dy = np.sign(_level(beta_y[..., :, None] - beta_y[..., None, :]))
    m = beta_x.shape[-1]
    upper = np.triu(np.ones((m, m), dtype=bool), k=1)
    pairs = present[..., :, None] & present[..., None, :] & upper
    # 1 when the same strict order, 0 when opposite, 1/2 when either ranks the pair level
    value = np.where((dx == 0) | (dy == 0), 0.5, (dx == dy).astype(np.float64))
    n_pairs = pairs.sum(axis=(-1, -2))
    total = np.where(pairs, value, 0.0).sum(axis=(-1, -2))
    with np.errstate(invalid="ignore", divide="ignore"):
        share: FloatArray = np.where(n_pairs > 0, total / np.maximum(n_pairs, 1), np.nan)
    return share, n_pairs.astype(np.int64)


def _level(diff: FloatArray) -> FloatArray:
    out: FloatArray = np.where(np.abs(diff) < LEVEL_TOLERANCE, 0.0, diff)
    return out


@dataclass(frozen=True)
class TaskFigure:
    """A per-task figure of each judge, its mean over tasks and a task-bootstrap interval."""

    per_task: FloatArray  # (J, T), NaN where undefined on a task
    mean: FloatArray  # (J,), NaN where undefined on every task
    lower: FloatArray  # (J,)
    upper: FloatArray  # (J,)
    n_tasks: IntArray  # (J,) tasks where the figure is defined


def task_mean(
    per_task: FloatArray,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> TaskFigure:
    """Mean over tasks of per-task values (J, T), NaN left out, with an interval from resampling
    tasks (one set of draws for every judge, so judges are compared on the same resamples).

    The interval is the expanded BCa the rankings use (`bootstrap_interval`), with the
    acceleration from the leave-one-task-out means. A judge whose per-task values are all
    equal gets no interval at all: the bootstrap has nothing to resample and would give a
    point ("1.00 [1.00, 1.00]" from three tasks), and tasks that never differ cannot say how
    the figure would vary over new ones. (A Wilson floor over the pairs behind the figure was
    tried and rejected: pairs ordered by one ranking are not independent outcomes, and on the
    demo's 29 tasks it widened healthy intervals by a fifth.)"""
    values = np.asarray(per_task, dtype=np.float64)
    n_judges, n_tasks = values.shape
    defined = ~np.isnan(values)
    filled = np.where(defined, values, 0.0)
    count = defined.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, filled.sum(axis=1) / np.maximum(count, 1), np.nan)
    lower = np.full(n_judges, np.nan)
    upper = np.full(n_judges, np.nan)
    if n_tasks:
        weights = task_weights(n_tasks, n_resamples, seed).astype(np.float64)  # (B, T)
        sums = weights @ filled.T  # (B, J)
        counts = weights @ defined.T.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            draws = np.where(counts > 0, sums / counts, np.nan)
        for k in range(n_judges):
            if count[k] < 2:
                continue
            keep = defined[k]
            left_out = (filled[k, keep].sum() - filled[k, keep]) / (count[k] - 1)
            column = draws[:, k]
            column = column[~np.isnan(column)]
            iv = bootstrap_interval(
                np.asarray(mean[k]),
                column,
                level=level,
                method="bca",
                jackknife=left_out,
                n_units=int(count[k]),
            )
            lower[k], upper[k] = float(iv.lower), float(iv.upper)
    if n_tasks:
        top = np.where(defined, values, -np.inf).max(axis=1)
        bottom = np.where(defined, values, np.inf).min(axis=1)
        flat = (count > 0) & (top - bottom <= 1e-12)
        lower[flat], upper[flat] = np.nan, np.nan
    return TaskFigure(values, mean, lower, upper, count.astype(np.int64))


def _consensus_per_task(
    wins: FloatArray, own: FloatArray, prior: float
) -> tuple[FloatArray, IntArray]:
    """Pair-order agreement (J, T) of each judge's own per-task fit `own` (J, T, M) with the
    fit to the other judges' pooled verdicts, and the pairs it counts."""
    others = wins.sum(axis=0, keepdims=True) - wins  # each judge left out in turn
    consensus = task_strengths(others, prior)
    present = _present(wins) & _present(others)
    return pair_order_agreement(own, consensus, present)


def _consistency_per_task(wins: FloatArray, own: FloatArray) -> FloatArray:
    """Mean fitted P(model beats the next one down) under each judge's own fit, per task."""
    present = _present(wins)
    # Absent models sort last and are masked out: order by strength among the present ones.
    order = np.argsort(np.where(present, -own, np.inf), axis=-1, kind="stable")
    ranked = np.take_along_axis(own, order, axis=-1)
    ranked_present = np.take_along_axis(present, order, axis=-1)
    adjacent = 0.5 * (1.0 + np.tanh(0.5 * (ranked[..., :-1] - ranked[..., 1:])))
    valid = ranked_present[..., :-1] & ranked_present[..., 1:]
    n_adjacent = valid.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: FloatArray = np.where(
            n_adjacent > 0,
            np.where(valid, adjacent, 0.0).sum(axis=-1) / np.maximum(n_adjacent, 1),
            np.nan,
        )
    return out


@dataclass(frozen=True)
class PanelFigures:
    """Consistency of every judge, and its consensus match (None with fewer than 3 judges)."""

    consistency: TaskFigure
    consensus: TaskFigure | None
    consensus_pairs: IntArray | None  # (J, T) model pairs the consensus match counts per task


CHUNK_BYTES = 32 << 20  # working memory per block of tasks: score matrices and their copies


def panel_figures(
    panel: PanelVerdicts,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
    prior: float = DEFAULT_PRIOR,
) -> PanelFigures:
    """Consistency and consensus match of every judge (see the module docstring), one block of
    tasks at a time, so memory stays bounded however many tasks a run has."""
    n_j, n_t, m = panel.n_judges, panel.n_tasks, panel.n_models
    with_consensus = n_j >= MIN_JUDGES_FOR_CONSENSUS
    steadiness = np.full((n_j, n_t), np.nan)
    match = np.full((n_j, n_t), np.nan)
    pairs = np.zeros((n_j, n_t), dtype=np.int64)
    block = max(1, CHUNK_BYTES // (8 * 4 * n_j * m * m))  # wins, others, and fit temporaries
    for first in range(0, n_t, block):
        stop = min(n_t, first + block)
        wins = panel_wins(panel, first, stop)
        steadiness[:, first:stop] = _consistency_per_task(
            wins, task_strengths(wins, CONSISTENCY_PRIOR)
        )
        if with_consensus:  # (each judge's own strengths per task serve the consensus alone)
            own = task_strengths(wins, prior)
            match[:, first:stop], pairs[:, first:stop] = _consensus_per_task(wins, own, prior)
    return PanelFigures(
        consistency=task_mean(steadiness, n_resamples, seed, level),
        consensus=task_mean(match, n_resamples, seed, level) if with_consensus else None,
        consensus_pairs=pairs if with_consensus else None,
    )


def consensus_match(
    wins: FloatArray,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
    prior: float = DEFAULT_PRIOR,
) -> tuple[TaskFigure, IntArray]:
    """Consensus match of every judge from score matrices (J, T, M, M), and the pairs counted
    per task; needs three or more judges. (`panel_figures` does the same a block at a time.)"""
    wins = np.asarray(wins, dtype=np.float64)
    n_judges = wins.shape[0]
    if n_judges < MIN_JUDGES_FOR_CONSENSUS:
        raise ValueError(
            f"consensus match needs at least {MIN_JUDGES_FOR_CONSENSUS} judges "
            f"(got {n_judges}): with two, the consensus of the others is one judge"
        )
    share, pairs = _consensus_per_task(wins, task_strengths(wins, prior), prior)
    return task_mean(share, n_resamples, seed, level), pairs


def task_consistency(
    wins: FloatArray,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
    prior: float = CONSISTENCY_PRIOR,
) -> TaskFigure:
    """Per task, the mean fitted P(model beats the one ranked just below it) under the judge's own
    fit, over the models present; averaged over tasks (see the module docstring)."""
    wins = np.asarray(wins, dtype=np.float64)
    per_task = _consistency_per_task(wins, task_strengths(wins, prior))
    return task_mean(per_task, n_resamples, seed, level)


@dataclass(frozen=True)
class LengthPreference:
    """Of the decided pairs whose answers differ in length, how many the longer answer won."""

    longer_won: int
    decided: int  # decided pairs with answers of different lengths
    share: float  # NaN when there are none
    low: float
    high: float


def length_preference(
    length_a: npt.ArrayLike, length_b: npt.ArrayLike, score_a: npt.ArrayLike
) -> LengthPreference:
    """Share of decided pairs won by the longer answer; `score_a` is 1 (a won), 0.5 or 0.

    Ties and pairs of equal length say nothing about length and are left out."""
    la = np.asarray(length_a, dtype=np.float64).reshape(-1)
    lb = np.asarray(length_b, dtype=np.float64).reshape(-1)
    s = np.asarray(score_a, dtype=np.float64).reshape(-1)
    if not (la.shape == lb.shape == s.shape):
        raise ValueError(
            f"length_a, length_b and score_a must have one length; got {la.size}, {lb.size}, {s.size}"
        )
    counted = (s != 0.5) & (la != lb)
    longer_won = int((counted & ((la > lb) == (s == 1.0))).sum())
    n = int(counted.sum())
    low, high = wilson_interval(longer_won, n)
    return LengthPreference(longer_won, n, longer_won / n if n else float("nan"), low, high)
