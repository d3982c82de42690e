"""What the raw counts allow: floors under bootstrap intervals, and an exact test over tasks.

With few tasks, or tasks that all say the same thing, a task bootstrap has nothing to resample:
every resample equals the data and the interval collapses to a point ("85.8% [85.8%, 85.8%]"
from one task). An interval must never claim more than the raw counts would even if every
comparison were independent, so each bootstrap interval is widened to contain:

- for the raw win rate (a pooled proportion), the Wilson interval of the model's score over its
  comparisons (ties half);
- for log-strengths, their differences and the expected win rate against the field, the Wald
  interval from the Bradley-Terry Fisher information (the model-based standard error, again
  treating comparisons as independent), mapped to the win rate with the other models held at
  their estimates. Pooled Wilson would be the wrong floor for the expected win rate: against
  opponents of different strength the outcomes are less variable than one binomial, so it is
  wider than the data allow (on MT-Bench by about 40%) and over-covers in healthy fields.

Neither floor binds in a healthy field (the task bootstrap is wider, as tasks differ); they bind
where the bootstrap has collapsed. A model that wins all 75 of its comparisons gets an expected
win rate interval reaching below the Wilson bound of 75/75 (93.8% against 95.1%), not a point.
An ordering also has to pass an exact two-sided sign
test over tasks: with 5 tasks all won by the same model, p = 2/2^5 = 0.0625, so no claim.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .bt import (
    Comparisons,
    FloatArray,
    IntArray,
    PairMatrix,
    expected_win_rate,
    task_win_matrices,
    win_matrix,
)
from .diagnostics import wilson_interval
from .resample import Bootstrap, Interval
from .special import bdtr, expit, ndtri

_SIGN_BLOCK = 1 << 24  # (tasks x M^3) multiply-adds of the opponent expectations at once


def normal_critical(level: float) -> float:
    """The two-sided normal critical value at `level` (1.96 at 95%)."""
    return float(ndtri(0.5 + level / 2.0))


def hull(
    low: FloatArray, high: FloatArray, floor_low: FloatArray, floor_high: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """The smallest interval containing both; a NaN floor leaves the interval as it is."""
    new_low = np.where(np.isnan(floor_low), low, np.fmin(low, floor_low))
    new_high = np.where(np.isnan(floor_high), high, np.fmax(high, floor_high))
    return new_low, new_high


def wilson_bounds(
    score: FloatArray, count: FloatArray, level: float
) -> tuple[FloatArray, FloatArray]:
    """Wilson bounds of score/count per element; NaN where count is 0."""
    low = np.full(score.shape, np.nan)
    high = np.full(score.shape, np.nan)
    for k in np.flatnonzero(count > 0):
        low.flat[k], high.flat[k] = wilson_interval(
            float(score.flat[k]), float(count.flat[k]), level
        )
    return low, high


def fisher_covariance(wins: PairMatrix, beta: FloatArray, prior: float) -> FloatArray:
    """Covariance of the mean-0 log-strengths from the penalised Bradley-Terry information.

    Information: sum over pairs of n_ab p_ab (1 - p_ab) as a graph Laplacian, plus the prior's
    curvature (`prior` virtual wins and losses against the average model) on u = beta - mean.
    Its pseudo-inverse on the mean-0 subspace is the covariance (the constant direction is not
    identified and carries no variance).
    """
    m = beta.size
    counts = wins + wins.T
    p = expit(beta[:, None] - beta[None, :])
    w = counts * p * (1.0 - p)
    np.fill_diagonal(w, 0.0)
    info = np.diag(w.sum(axis=1)) - w
    if prior > 0.0:
        u = beta - beta.mean()
        s = expit(u)
        centre = np.eye(m) - np.full((m, m), 1.0 / m)
        info = info + centre @ np.diag(2.0 * prior * s * (1.0 - s)) @ centre
    cov: FloatArray = np.asarray(np.linalg.pinv(info, hermitian=True), dtype=np.float64)
    return cov


@dataclass(frozen=True)
class WaldFloor:
    """Half-widths of the Wald intervals: per model (M,) and per pair of models (M, M)."""

    model: FloatArray
    pair: PairMatrix


def wald_floor(wins: PairMatrix, beta: FloatArray, prior: float, level: float) -> WaldFloor:
    """Wald half-widths of each log-strength and of each difference, at `level`."""
    cov = fisher_covariance(wins, beta, prior)
    var = np.diag(cov)
    pair_var = var[:, None] + var[None, :] - 2.0 * cov
    z = normal_critical(level)
    return WaldFloor(
        model=z * np.sqrt(np.maximum(var, 0.0)), pair=z * np.sqrt(np.maximum(pair_var, 0.0))
    )


@dataclass(frozen=True)
class SignTests:
    """Per ordered pair (a, b): tasks on which a scored higher than b, lower, and the exact
    two-sided sign-test p-value over the tasks where they differ (1 where none do)."""

    higher: IntArray
    lower: IntArray
    p_value: PairMatrix


def sign_tests(comp: Comparisons, log_strength: FloatArray | None = None) -> SignTests:
    """Exact sign tests over tasks of every pair's per-task mean score.

    On each task a model's score is its mean over its comparisons there (a win 1, a tie 1/2);
    two models are compared on the tasks where both have comparisons, ties between their scores
    dropped. This asks what a BT ordering claims, "a does better than b", of the tasks
    one by one, so a handful of tasks can never support an ordering however unanimous.

    With `log_strength` (the fitted strengths), each score is taken less what it would be
    expected to be if a and b were equal (both at their mean strength) against the opponents
    each met: under a sparse design two models do not meet the same opponents on a task, and a
    model drawn against stronger ones (an adaptive design gives each its neighbours) would
    otherwise look worse for it. Where both met the same opponents, as when every pair is
    judged, the two expectations are equal and the test is the plain one.
    """
    per_task = task_win_matrices(comp)  # (T, M, M)
    won = per_task.sum(axis=2)
    count = won + per_task.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        score = np.where(count > 0, won / np.where(count > 0, count, 1.0), np.nan)
    diff = score[:, :, None] - score[:, None, :]  # (T, M, M)
    if log_strength is not None:
        _take_opponents_into_account(diff, per_task, count, log_strength)
    higher = (diff > 1e-12).sum(axis=0).astype(np.int64)  # NaN compares False: task skipped
    lower = (diff < -1e-12).sum(axis=0).astype(np.int64)
    n = higher + lower
    smaller = np.minimum(higher, lower)
    p = np.minimum(1.0, 2.0 * bdtr(smaller, np.maximum(n, 1), 0.5))
    p = np.where(n == 0, 1.0, p)
    return SignTests(higher=higher, lower=lower, p_value=p)


def _take_opponents_into_account(
    diff: FloatArray, per_task: FloatArray, count: FloatArray, beta: FloatArray
) -> None:
    """Subtract from diff[t, a, b] a's expected mean score on task t less b's, were both at
    (beta_a + beta_b)/2 (against each other 1/2 apiece), against the opponents each met there.
    In place, a block of tasks at a time: no array of the run's size beside `diff`."""
    m = beta.size
    middle = (beta[:, None] + beta[None, :]) / 2.0  # [a, b]
    expect = expit(middle[:, :, None] - beta[None, None, :])  # [a, b, c]
    idx = np.arange(m)
    expect[idx, :, idx] = 0.5  # c = a: a itself, at the middle strength
    expect[:, idx, idx] = 0.5  # c = b
    by_opponent = expect.transpose(0, 2, 1)  # [a, c, b]
    step = max(1, _SIGN_BLOCK // max(1, m**3))
    with np.errstate(invalid="ignore", divide="ignore"):
        for start in range(0, per_task.shape[0], step):
            block = slice(start, start + step)
            met = per_task[block] + per_task[block].transpose(0, 2, 1)  # comparisons of a, c
            # [t, a, b] = sum over c of a's comparisons with c times E[a, b, c]: one matrix
            # product per a, batched, (a, t, c) @ (a, c, b)
            total = np.matmul(met.transpose(1, 0, 2), by_opponent).transpose(1, 0, 2)
            mean = total / count[block][:, :, None]
            diff[block] -= mean - mean.transpose(0, 2, 1)


def floored_intervals(boot: Bootstrap, comp: Comparisons) -> dict[str, Interval]:
    """`boot.intervals()` widened to their floors: Wilson for the raw win rate, Wald for
    log-strength (so rating) and the expected win rate; models without comparisons keep no
    interval (NaN)."""
    out = boot.intervals()
    wins = win_matrix(comp)
    score = wins.sum(axis=1)
    count = score + wins.sum(axis=0)
    none = count == 0
    w_low, w_high = wilson_bounds(score, count, boot.level)
    low, high = hull(out["raw_win_rate"].lower, out["raw_win_rate"].upper, w_low, w_high)
    out["raw_win_rate"] = Interval(np.where(none, np.nan, low), np.where(none, np.nan, high))
    beta = boot.point.log_strength
    half = wald_floor(wins, beta, boot.point.prior, boot.level).model
    low, high = hull(out["log_strength"].lower, out["log_strength"].upper, beta - half, beta + half)
    low, high = np.where(none, np.nan, low), np.where(none, np.nan, high)
    out["log_strength"] = Interval(low, high)
    with np.errstate(over="ignore"):  # a log-strength past 709 is a rating of inf, as written
        out["rating"] = Interval(np.exp(low), np.exp(high))
    e_low, e_high = _own_win_rate(beta, beta - half), _own_win_rate(beta, beta + half)
    ewr = out["expected_win_rate"]
    low, high = hull(ewr.lower, ewr.upper, e_low, e_high)
    out["expected_win_rate"] = Interval(np.where(none, np.nan, low), np.where(none, np.nan, high))
    return out


def _own_win_rate(beta: FloatArray, moved: FloatArray) -> FloatArray:
    """Each model's expected win rate with its own log-strength moved, the others held."""
    m = beta.size
    trial = np.tile(beta, (m, 1))
    trial[np.arange(m), np.arange(m)] = moved
    result: FloatArray = np.diagonal(expected_win_rate(trial)).copy()
    return result
