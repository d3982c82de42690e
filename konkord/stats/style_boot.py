"""The task bootstrap of the style-controlled fit: the same resamples, the same intervals.

Each resample draws tasks with replacement exactly as the plain bootstrap does (the same
seeded `task_weight_batches`, so both rankings resample the same tasks) and is fitted to
convergence on its own data. With covariates the data no longer sum into one score matrix, so
the fits cannot be batched as in `newton.py`; instead:

- every resample's curvature at the point estimate is a weighted sum of per-task curvatures
  (one matrix product for all resamples), and so is its gradient there: the first Newton step
  of every resample costs one product and one small solve;
- later steps evaluate each resample's exact gradient over all its comparisons (the grid of
  `style_fit.py`, weights broadcast per task) and step with that same curvature. A fixed
  curvature converges linearly, at a rate r set by how far a resample moves from the point
  estimate, so the error left after a step is about r / (1 - r) times the step, with r
  measured as the ratio of the last two steps; a resample stops when that is below `tol`
  (1e-6 in log-odds, far below the digits any interval is printed with). At 20 models x
  1,000 tasks that takes two gradient passes for every resample (r is about 0.02: the
  second step is about 1e-5 and leaves about 2e-7). The optimum is the resample's own, as
  in the plain fit; only the path to it differs. A resample whose step stops shrinking (one
  far from the point estimate, as when a model wins nearly everything) is fitted from
  scratch by the point fit's own Newton method with step halving.

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
    DEFAULT_TOL,
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

BOOT_TOL = 1e-6  # error left in any parameter, estimated from the last two steps
BOOT_MAX_ITER = 60
_BLOCK_RESAMPLES = 32  # resamples walked through the grid together
_BLOCK_ELEMENTS = 1 << 16  # (resamples x tasks x slots) per block: 256 KB, stays in cache


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


def _converged(data: StyleData, theta: FloatArray, weights: FloatArray, prior: float) -> bool:
    """Whether a resample's own fit reached the plain fit's gradient tolerance."""
    m = data.n_models
    g_task, _ = task_terms(data, theta[:m], theta[m:], False, per_task=False, weights=weights)
    g_prior, _ = prior_terms(theta[:m], theta[m:], prior)
    return bool(np.linalg.norm(g_task[0] + g_prior) < DEFAULT_TOL * 1e3)


def _solve(info: FloatArray, rhs: FloatArray) -> FloatArray:
    out: FloatArray = np.asarray(np.linalg.solve(info, rhs[..., None])[..., 0], dtype=np.float64)
    return out


def _gradients(data: StyleData, theta: FloatArray, weights: FloatArray, prior: float) -> FloatArray:
    """Exact gradients (n, P) of n resamples' penalised log-likelihoods at theta (n, P).

    A cell's residual is score - sigmoid(eta) = centred - mask tanh(eta / 2) / 2, with
    centred = mask (score - 1/2) fixed: its share of every resample's gradient is one matrix
    product of the weights. What depends on theta is walked a block of tasks at a time for
    a few resamples at once, laid out (resample, task, slot) so that x . gamma is one small
    matrix product and every other step one pass over a block that stays in cache. Within a
    block tanh is taken in single precision, where numpy's tanh is vectorised (five times
    faster than in double), and summed into double-precision totals block by block: each
    residual is then off by about 1e-7, and a gradient over 190,000 comparisons by about
    1e-5, which moves the optimum by about 1e-8 in log-odds."""
    m, k = data.n_models, data.n_features
    n_units, n_slots = data.score.shape
    single = np.float32
    centred = data.mask * (data.score - 0.5)  # 0 where empty
    mask = None if bool(np.all(data.mask == 1.0)) else data.mask.astype(single)
    x_flat = data.x.reshape(n_units * n_slots, k)
    x_flat_t = np.ascontiguousarray(x_flat.T.astype(single))
    edge = data.edge()
    grad, _ = prior_terms(theta[:, :m], theta[:, m:], prior)
    grad[:, :m] += (weights @ centred) @ edge
    grad[:, m:] += weights @ np.einsum("ts,tsk->tk", centred, data.x)
    weights = weights.astype(single)
    rows = min(_BLOCK_RESAMPLES, theta.shape[0])
    tasks = max(1, _BLOCK_ELEMENTS // max(1, rows * n_slots))
    for start in range(0, theta.shape[0], rows):
        part = slice(start, start + rows)
        half = 0.5 * theta[part]  # (r, P)
        pair = (half[:, data.lo] - half[:, data.hi]).astype(single)[:, None, :]  # (r, 1, S)
        gamma = half[:, m:].astype(single)  # (r, K)
        by_slot = np.zeros((pair.shape[0], n_slots))
        by_feature = np.zeros((k, pair.shape[0]))
        for t0 in range(0, n_units, tasks):
            t1 = min(t0 + tasks, n_units)
            cells = slice(t0 * n_slots, t1 * n_slots)
            eta = (gamma @ x_flat_t[:, cells]).reshape(-1, t1 - t0, n_slots)
            eta += pair
            spread = np.tanh(eta, out=eta)  # 2 sigmoid(eta) - 1
            if mask is not None:
                spread *= mask[t0:t1]
            spread *= weights[part, t0:t1, None]
            by_slot += np.matmul(np.ones((1, t1 - t0), single), spread)[:, 0, :]
            by_feature += x_flat_t[:, cells] @ spread.reshape(-1, (t1 - t0) * n_slots).T
        grad[part, :m] -= 0.5 * (by_slot @ edge)
        grad[part, m:] -= 0.5 * by_feature.T
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
    """Fit the style-controlled model and its task bootstrap (expanded BCa intervals).

    BLAS runs on one thread throughout (the products are small; threads come from the pool)."""
    with single_threaded_blas():
        return _style_bootstrap(data, n_resamples, seed, level, prior, tol, max_iter, workers)


def _style_bootstrap(
    data: StyleData,
    n_resamples: int,
    seed: int,
    level: float,
    prior: float,
    tol: float,
    max_iter: int,
    workers: int | None,
) -> StyleBootstrap:
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
    first = _solve(info, weights @ g_task + g_prior)
    theta = theta_hat + first
    iterations = np.ones(n_resamples, dtype=np.int64)
    n_workers = max(1, min(4, os.cpu_count() or 1) if workers is None else workers)
    active = np.arange(n_resamples)
    last = np.abs(first).max(axis=1, initial=0.0)  # each resample's last step: largest move
    refit: list[int] = []  # resamples the fixed curvature does not bring home
    with ThreadPoolExecutor(max_workers=n_workers) as pool:
        for _ in range(max_iter):
            if active.size == 0:
                break
            parts = np.array_split(active, min(n_workers, active.size))
            grads = list(
                pool.map(lambda idx: _gradients(sub, theta[idx], weights[idx], prior), parts)
            )
            step = _solve(info[active], np.concatenate(grads))
            size = np.abs(step).max(axis=1)
            # A step that does not shrink means the curvature at the point estimate is too
            # far from this resample's own (a near-separated resample): fit it from scratch.
            growing = ~(size < last[active]) & ~(size < tol)
            refit += active[growing].tolist()
            keep = ~growing
            active, step, size = active[keep], step[keep], size[keep]
            theta[active] += step
            # A fixed curvature converges linearly: with rate r = this step / the last, the
            # error left after this step is about r / (1 - r) times it. Measured from the
            # second gradient pass on (the first step's ratio is Newton's quadratic one).
            rate = size / np.maximum(last[active], 1e-300)  # below 1: growing ones left
            left = np.where(iterations[active] >= 2,
                            size * rate / np.maximum(1.0 - rate, 1e-12), size)
            last[active] = size
            iterations[active] += 1
            active = active[left >= tol]
    refit += active.tolist()
    for b in refit:
        own = fit_style_bt(sub, prior=prior, weights=weights[b], init=theta_hat)
        theta[b] = np.concatenate([own.fit.log_strength, own.coefficients])
        iterations[b] += own.fit.iterations
    active = np.array([b for b in refit if not _converged(sub, theta[b], weights[b], prior)],
                      dtype=np.int64)
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
