"""A sandwich floor under the anchored ranking's bootstrap intervals.

The prediction-powered bootstrap (`ppi.anchored_bootstrap`) clips a resample's impossible
pair scores into what its comparisons allow; the clipping pulls in exactly the resamples
that make the tails, and the intervals fell short of their level (94% pooled over simulated
fields, 91% at lambda 1). The PPI++ estimate is an M-estimator, so its variance also has a
closed form: the sandwich H^-1 V H^-1, with V the covariance over tasks of the per-task
estimating function at the estimate (nothing clipped) and H the curvature of the effective
objective. Each interval is widened to contain estimate -+ c se with the few-task critical
value c = sqrt(T/(T-1)) t_{T-1} of the bootstrap's own intervals, as `floors` does for the
judge's ranking with its Wald floor.
"""

from __future__ import annotations

import numpy as np

from .bt import FloatArray, expected_win_rate
from .floors import hull
from .ppi import AnchoredData, AnchoredFit, effective_task_matrices
from .resample import Interval, critical_value


def sandwich_covariance(data: AnchoredData, lam: float, beta: FloatArray, prior: float) -> FloatArray:
    """Covariance (M, M) of the mean-0 anchored log-strengths: H^+ V H^+ over tasks."""
    per_task = effective_task_matrices(data, lam)
    counts = per_task + np.swapaxes(per_task, 1, 2)
    used = counts.reshape(data.n_tasks, -1).any(axis=1)
    per_task, counts = per_task[used], counts[used]
    n_tasks, m = per_task.shape[0], per_task.shape[1]
    prob = 1.0 / (1.0 + np.exp(-(beta[:, None] - beta[None, :])))
    # Per task, the gradient of the Bradley-Terry log loss: expected minus observed scores.
    grad = (counts * prob[None]).sum(axis=2) - per_task.sum(axis=2)
    grad -= grad.mean(axis=0)
    v = grad.T @ grad * (n_tasks / max(n_tasks - 1, 1))
    total = counts.sum(axis=0)
    w = total * prob * (1.0 - prob)
    np.fill_diagonal(w, 0.0)
    info = np.diag(w.sum(axis=1)) - w
    centre = np.eye(m) - np.full((m, m), 1.0 / m)
    if prior > 0.0:
        s = 1.0 / (1.0 + np.exp(-(beta - beta.mean())))
        info = info + centre @ np.diag(2.0 * prior * s * (1.0 - s)) @ centre
    h_inv = np.linalg.pinv(info, hermitian=True)
    cov: FloatArray = centre @ h_inv @ v @ h_inv @ centre
    return cov


def floored_anchored_intervals(
    fit: AnchoredFit, data: AnchoredData, base: dict[str, Interval] | None = None
) -> dict[str, Interval]:
    """`base` (default: the anchored bootstrap's own intervals), each widened to its
    sandwich floor: log-strength, rating and expected win rate; the raw win rate is kept, and
    so is a model with no interval in `base` (NaN: it has no comparisons)."""
    boot = fit.bootstrap
    out = dict(boot.intervals() if base is None else base)
    beta = boot.point.log_strength
    cov = sandwich_covariance(data, fit.lam, beta, boot.point.prior)
    half = critical_value(boot.level, boot.n_units) * np.sqrt(np.maximum(np.diag(cov), 0.0))
    none = np.isnan(out["log_strength"].lower)

    def widened(old: Interval, low: FloatArray, high: FloatArray) -> Interval:
        new_low, new_high = hull(old.lower, old.upper, low, high)
        return Interval(np.where(none, np.nan, new_low), np.where(none, np.nan, new_high))

    out["log_strength"] = widened(out["log_strength"], beta - half, beta + half)
    out["rating"] = Interval(np.exp(out["log_strength"].lower), np.exp(out["log_strength"].upper))
    e_low, e_high = _moved_win_rate(beta, beta - half), _moved_win_rate(beta, beta + half)
    out["expected_win_rate"] = widened(out["expected_win_rate"], e_low, e_high)
    return out


def _moved_win_rate(beta: FloatArray, moved: FloatArray) -> FloatArray:
    """Each model's expected win rate with its own log-strength moved, the others held."""
    m = beta.size
    trial = np.tile(beta, (m, 1))
    trial[np.arange(m), np.arange(m)] = moved
    result: FloatArray = np.diagonal(expected_win_rate(trial)).copy()
    return result
