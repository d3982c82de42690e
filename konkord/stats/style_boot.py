"""The task bootstrap of the style-controlled fit: the same resamples, the same intervals.

Each resample draws tasks with replacement exactly as the plain bootstrap does (the same
seeded `task_weight_batches`, so both rankings resample the same tasks) and is fitted to
convergence on its own data. With covariates the data no longer sum into one score matrix, so
the fits cannot be batched as in `newton.py`; instead:

- every resample's curvature at the point estimate is a weighted sum of per-task curvatures
  (one matrix product for all resamples), and so is its gradient there: the first Newton step
  of every resample costs one product and one small solve;
- later steps evaluate each resample's exact gradient over all its comparisons (the grid of
  `style_fit.py`, weights broadcast per task) and step with that same curvature, until no
  parameter moves by `tol` (1e-6 in log-odds, far below the digits any interval is printed
  with). The optimum is the resample's own, as in the plain fit; only the path to it differs
  (a fixed curvature converges linearly, at a rate set by how far a resample moves from the
  point estimate: about four gradient passes at 1,000 tasks).

The jackknife that BCa's acceleration needs is the one-step approximation: each task left
out moves the estimate by one Newton step from the point estimate, with the curvature of the
remaining tasks. The acceleration is a third-moment correction to the percentiles; the step's
error is of a smaller order than the leave-one-out moves it measures.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .batchfit import task_scores
from .bt import (
    DEFAULT_PRIOR,
    FloatArray,
    expected_win_rate,
    raw_win_rate,
    single_threaded_blas,
)
from .resample import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    Bootstrap,
    Interval,
    Jackknife,
    task_weight_batches,
)
from .style_fit import StyleData, StyleFit, fit_style_bt, prior_terms, task_terms

BOOT_TOL = 1e-6  # largest change of any parameter in the last step: far below printed digits
BOOT_MAX_ITER = 60
_GRID_ELEMENTS = 1 << 19  # (fits x tasks x slots) evaluated at once: 4 MB per temporary


@dataclass(frozen=True)
class StyleBootstrap:
    """The style-controlled fit with its task bootstrap.

    `bootstrap` is a plain `Bootstrap` of the log-strengths (style at 0), so floors, the
    sign test and the ranking treat it as they treat the plain fit; `coefficients` are the
    style coefficients' draws (B, K) and `coefficient_jackknife` their one-step jackknife.
    """

    style: StyleFit
    bootstrap: Bootstrap
    coefficients: FloatArray
    coefficient_jackknife: FloatArray
    iterations_max: int

    def coefficient_intervals(self, level: float | None = None) -> Interval:
        """The coefficients' intervals by the bootstrap's own method (expanded BCa)."""
        return self.bootstrap.interval(
            self.style.coefficients, self.coefficients, self.coefficient_jackknife, level
        )


def _solve(info: FloatArray, rhs: FloatArray) -> FloatArray:
    out: FloatArray = np.asarray(np.linalg.solve(info, rhs[..., None])[..., 0], dtype=np.float64)
    return out


def _gradients(data: StyleData, theta: FloatArray, weights: FloatArray, prior: float) -> FloatArray:
    """Exact gradients (n, P) of n resamples' penalised log-likelihoods at theta (n, P).

    sigmoid(eta) = (1 + tanh(eta / 2)) / 2, and tanh is several times faster than expit here;
    x . gamma is formed one feature at a time (a product with an inner dimension of five is
    slow in BLAS)."""
    m, k = data.n_models, data.n_features
    n_units, n_slots = data.score.shape
    centred = data.mask * (data.score - 0.5)  # a cell's score minus 1/2, 0 where empty
    half_mask = None if bool(np.all(data.mask == 1.0)) else 0.5 * data.mask
    features = [np.ascontiguousarray(data.x[:, :, f]) for f in range(k)]
    x_flat = data.x.reshape(n_units * n_slots, k)
    edge = data.edge()
    grad, _ = prior_terms(theta[:, :m], theta[:, m:], prior)
    rows = max(1, _GRID_ELEMENTS // max(1, n_units * n_slots))
    for start in range(0, theta.shape[0], rows):
        part = slice(start, start + rows)
        beta, gamma = 0.5 * theta[part, :m], 0.5 * theta[part, m:]
        half = np.empty((beta.shape[0], n_units, n_slots))
        half[:] = (beta[:, data.lo] - beta[:, data.hi])[:, None, :]
        for f in range(k):
            half += gamma[:, f, None, None] * features[f]
        resid = np.tanh(half, out=half)  # 2 sigmoid(eta) - 1
        resid *= -0.5 if half_mask is None else half_mask
        resid += centred  # score - sigmoid(eta), 0 where empty
        w = weights[part]
        grad[part, :m] += np.matmul(w[:, None, :], resid)[:, 0, :] @ edge
        resid *= w[:, :, None]
        grad[part, m:] += resid.reshape(resid.shape[0], -1) @ x_flat
    return grad


def style_bootstrap(
    data: StyleData,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
    prior: float = DEFAULT_PRIOR,
    tol: float = BOOT_TOL,
    max_iter: int = BOOT_MAX_ITER,
    workers: int | None = None,
) -> StyleBootstrap:
    """Fit the style-controlled model and its task bootstrap (expanded BCa intervals)."""
    style = fit_style_bt(data, prior=prior)
    m = data.n_models
    theta_hat = np.concatenate([style.fit.log_strength, style.coefficients])
    tasks = np.flatnonzero(data.mask.sum(axis=1) > 0)  # as the plain bootstrap: used tasks
    n_units = tasks.size
    sub = StyleData(data.comp, data.covariates, data.lo, data.hi, data.score[tasks],
                    data.mask[tasks], data.x[tasks])
    g_task, h_task = task_terms(sub, theta_hat[:m], theta_hat[m:], True)
    assert h_task is not None
    n_params = theta_hat.size
    g_prior, h_prior = prior_terms(theta_hat[:m], theta_hat[m:], prior)
    h_flat = h_task.reshape(n_units, n_params * n_params)
    weights = np.concatenate(
        list(task_weight_batches(n_units, n_resamples, seed, max(1, n_resamples)))
    ).astype(np.float64) if n_resamples else np.zeros((0, n_units))
    info = (weights @ h_flat).reshape(-1, n_params, n_params) + h_prior
    theta = theta_hat + _solve(info, weights @ g_task + g_prior)
    iterations = np.ones(n_resamples, dtype=np.int64)
    n_workers = max(1, min(4, os.cpu_count() or 1) if workers is None else workers)
    active = np.arange(n_resamples)
    with single_threaded_blas(), ThreadPoolExecutor(max_workers=n_workers) as pool:
        for _ in range(max_iter):
            if active.size == 0:
                break
            parts = np.array_split(active, min(n_workers, active.size))
            grads = list(
                pool.map(lambda idx: _gradients(sub, theta[idx], weights[idx], prior), parts)
            )
            step = _solve(info[active], np.concatenate(grads))
            theta[active] += step
            iterations[active] += 1
            active = active[np.abs(step).max(axis=1) >= tol]
    converged = n_resamples - active.size
    beta = theta[:, :m] - theta[:, :m].mean(axis=1, keepdims=True)
    # One-step jackknife: leave each task out of the full data's curvature and gradient.
    h_all = h_task.sum(axis=0) + h_prior
    g_all = g_task.sum(axis=0) + g_prior
    jack = theta_hat + _solve(h_all[None] - h_task, g_all[None] - g_task)
    jack_beta = jack[:, :m] - jack[:, :m].mean(axis=1, keepdims=True)
    scores = task_scores(data.comp).astype(np.float64)
    raw = raw_win_rate((weights @ scores).reshape(-1, m, m))
    flat_all = scores.sum(axis=0)
    jack_raw = raw_win_rate((flat_all[None] - scores).reshape(-1, m, m))
    boot = Bootstrap(
        mode="task",
        method="bca",
        expand=True,
        level=level,
        seed=seed,
        n_units=n_units,
        n_tasks=n_units,
        point=style.fit,
        log_strength=beta,
        rating=np.exp(beta),
        expected_win_rate=expected_win_rate(beta),
        raw_win_rate=raw,
        jackknife=Jackknife(jack_beta, jack_raw, np.ones(n_units)),
        iterations_max=int(iterations.max(initial=0)),
        n_converged=int(converged),
        n_fits=n_resamples,
    )
    return StyleBootstrap(
        style=style,
        bootstrap=boot,
        coefficients=theta[:, m:].copy(),
        coefficient_jackknife=jack[:, m:].copy(),
        iterations_max=int(iterations.max(initial=0)),
    )
