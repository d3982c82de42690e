"""The jackknife-t interval: estimate -+ t_{K-1} x the leave-one-unit-out standard error.

The anchored (prediction-powered) ranking needs it. Its task bootstrap fell short of 95%
(93.4% pooled, 80-90% at lambda 1 with few labels) for two reasons measured in
benchmarks/bench_validity.py (g), neither of them bias (the estimate's mean error is under
0.1 standard errors):

- a resample whose label correction pushes a pair past all-wins is clipped to what the
  comparisons allow (`ppi.feasible`), and such resamples are the tails: with the judge
  trusted fully (lambda 1) half to all resamples are clipped and the bootstrap's spread is
  4-14% below the estimate's true spread;
- a win rate's error is larger toward 1/2 than toward the nearer bound, so a symmetric
  interval on the win-rate scale misses where the estimate has run toward 0 or 1.

The jackknife refits the estimator with one task left out at a time (the same clipped fit as
the point, and a task is a small part of each pair's totals, so the clipping acts on the
leave-one-out fits as on the point). Its spread matched the true spread to within 1-4% in
every setting measured, and it is the cluster variance recommended with few or uneven
clusters (the "CV3" estimator with t_{G-1} critical values; MacKinnon, Nielsen and Webb 2023,
"Cluster-robust inference: a guide to empirical practice"). Win rates take it on the
log-odds scale, where the error does not depend on how near the bound the estimate is.
"""

from __future__ import annotations

import numpy as np

from .pairs import FloatArray
from .special import expit, stdtrit


def jackknife_se(values: FloatArray, weight: FloatArray | None = None) -> FloatArray:
    """Standard error from leave-one-unit-out values (K, ...): sqrt((K-1)/K sum (v_k - mean)^2),
    with unit k counted `weight[k]` times (K = the total weight)."""
    values = np.asarray(values, dtype=np.float64)
    w = np.ones(values.shape[0]) if weight is None else np.asarray(weight, dtype=np.float64)
    total = float(w.sum())
    w = w.reshape((-1,) + (1,) * (values.ndim - 1))
    mean = (w * values).sum(axis=0) / total
    out: FloatArray = np.sqrt((total - 1.0) / total * (w * (values - mean) ** 2).sum(axis=0))
    return out


def jackknife_t_critical(level: float, units: float) -> float:
    """The two-sided Student t critical value with units - 1 degrees of freedom."""
    return float(stdtrit(max(units - 1.0, 1.0), 0.5 + level / 2.0))


def _logit(p: FloatArray) -> FloatArray:
    with np.errstate(divide="ignore"):
        out: FloatArray = np.log(p) - np.log1p(-p)
    return out


def jackknife_t_bounds(
    point: FloatArray,
    jackknife: FloatArray,
    level: float,
    weight: FloatArray | None = None,
    proportion: bool = False,
) -> tuple[FloatArray, FloatArray]:
    """Lower and upper bounds, elementwise: point -+ t_{K-1} se_jack.

    With `proportion`, a value in 0..1 whose point and leave-one-out values are all strictly
    inside takes the interval on the log-odds scale, mapped back; one at 0 or 1 keeps the
    plain interval, cut to 0..1 (the floors of `floors` then widen it from the counts).
    """
    point = np.asarray(point, dtype=np.float64)
    jackknife = np.asarray(jackknife, dtype=np.float64)
    units = float(jackknife.shape[0] if weight is None else np.sum(weight))
    crit = jackknife_t_critical(level, units)
    half = crit * jackknife_se(jackknife, weight)
    lower, upper = point - half, point + half
    if not proportion:
        return lower, upper
    inside = (point > 0.0) & (point < 1.0) & ((jackknife > 0.0) & (jackknife < 1.0)).all(axis=0)
    safe = np.where(inside, point, 0.5)
    centre = _logit(safe)
    logit_half = crit * jackknife_se(_logit(np.where(inside, jackknife, 0.5)), weight)
    low_odds = expit(centre - logit_half)
    high_odds = expit(centre + logit_half)
    lower = np.where(inside, low_odds, np.clip(lower, 0.0, 1.0))
    upper = np.where(inside, high_odds, np.clip(upper, 0.0, 1.0))
    return lower, upper
