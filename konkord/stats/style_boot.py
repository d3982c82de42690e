"""The task bootstrap of the style-controlled fit: the plain bootstrap's resamples and steps.

Each resample draws tasks with replacement exactly as the plain bootstrap does (the same
seeded `task_weights`: common random numbers, so the two rankings differ by the covariates
alone) and is fitted to convergence on its own data. With covariates the data no longer sum
into one score matrix, so the fits cannot be batched as in `newton.py`; instead:

- every resample's curvature at the point estimate is a weighted sum of per-task curvatures
  (one matrix product for all resamples), and so is its gradient there: the first Newton step
  of every resample costs one product and one small solve;
- later steps evaluate each resample's exact gradient over all its comparisons (the grid of
  `style_fit.py`, weights broadcast per task) and step with that same curvature. A fixed
  curvature converges linearly, at a rate r set by how far a resample moves from the point
  estimate, so the error left after a step is about r / (1 - r) times the step, with r
  measured as the ratio of the last two steps; a resample stops when that is below `tol`
  (1e-6 in log-odds). At 20 models x 1,000 tasks that takes two gradient passes for most
  resamples (r is about 0.02). A resample whose step stops shrinking (one far from the point
  estimate, as when a model wins nearly everything) is fitted from scratch by the point
  fit's own Newton method with step halving;
- last, as in the point fit (`style_fit.py`), each resample's log-strengths are refitted by
  the plain bootstrap's own batched Newton method on the same resampled score matrices,
  with each model's score shifted by the style's share of it (`score_shift`, as the last
  pass measured it, carried to the final step by the curvature). The shift is taken cell by
  cell as a difference, so covariates of 0 give a shift of exactly 0, and then every draw
  is the plain bootstrap's bit for bit.

The jackknife that BCa's acceleration needs is the plain bootstrap's too: every task left out
is fitted to convergence, its first step with the curvature of the remaining tasks (exact at
the point estimate), its second from a Taylor expansion of the full data's gradient
(`style_jackknife.py`: no pass over the data, an error of third order in the move, about
1e-9 at 1,000 tasks), or by passes like a resample where that is not below the tolerance.
A one-step jackknife, used before, was off by about 1e-4 in log-strength at 100 tasks, and
draws converged only to 1e-6 scrambled the plain draws that sit within 1e-7 of the point
estimate (with every pair met on every task, win rates bunch there); each moved an
interval's end by up to 1e-3 and claims on the edge of significance with it. Now, with every
covariate 0, the point estimate, draws, jackknife, intervals and claims are the plain
ranking's exactly, so whatever differs between the two is the covariates.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .batchfit import (
    fit_batches,
    jackknife_first_step,
    left_out_wins,
    resampled_wins,
    task_scores,
)
from .bt import (
    DEFAULT_PRIOR,
    DEFAULT_TOL,
    FloatArray,
    IntArray,
    expected_win_rate,
    single_threaded_blas,
    win_matrix,
)
from .resample import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    Bootstrap,
    Interval,
    Jackknife,
    task_weights,
)
from .style_fit import (
    StyleData,
    StyleFit,
    fit_style_bt,
    prior_terms,
    score_shift,
    style_curvature,
    task_terms,
)
from .style_gradients import BLOCK_FITS, FitSums, fit_gradients
from .style_jackknife import settle_left_out
from .style_series import Moments, largest, series_order
from .threads import default_threads

BOOT_TOL = 1e-6  # error left in any parameter, estimated from the last two steps
BOOT_MAX_ITER = 60
_PASS_FITS = 4 * BLOCK_FITS  # fits whose gradients a thread takes at a time (whole walk blocks)


@dataclass(frozen=True)
class StyleBootstrap:
    """The style-controlled fit with its task bootstrap.

    `bootstrap` is a plain `Bootstrap` of the log-strengths (style at 0), so floors, the
    sign test and the ranking treat it as they treat the plain fit; `coefficients` are the
    style coefficients' draws (B, K) and `coefficient_jackknife` their jackknife (U, K).
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


def _row_weights(weights: FloatArray, rows: IntArray) -> FloatArray:
    """Task weights (n, U) of fits `rows`: a resample's drawn counts for rows below B, and
    for row B + k the jackknife fit that leaves task k out (every task once, k never)."""
    n_resamples, n_units = weights.shape
    out = np.ones((rows.size, n_units))
    boot = rows < n_resamples
    out[boot] = weights[rows[boot]]
    jack = np.flatnonzero(~boot)
    out[jack, rows[jack] - n_resamples] = 0.0
    return out


def _per_fit(weights: FloatArray, per_task: list[FloatArray]) -> list[FloatArray]:
    """Each array of `per_task` (U, ...) summed over every fit's tasks: the B resamples'
    (task weights (B, U)) and then the U jackknife fits' (all tasks but one).

    The resamples' sums are one single-precision product for all the arrays together: they
    set the first step and the fixed curvature of each fit (where any error only slows the
    steps, never moves the optimum) and the features' counts per slot (already single in
    `_gradients`)."""
    flat = [a.reshape(a.shape[0], -1) for a in per_task]
    summed = weights.astype(np.float32) @ np.concatenate(flat, axis=1).astype(np.float32)
    out, start = [], 0
    for a, f in zip(per_task, flat, strict=True):
        part = summed[:, start : start + f.shape[1]].astype(np.float64)
        start += f.shape[1]
        both = np.concatenate([part, f.sum(axis=0)[None] - f])
        out.append(both.reshape(-1, *a.shape[1:]))
    return out


def _moments(
    data: StyleData, weights: FloatArray, coefficients: FloatArray, fits: IntArray
) -> Moments | None:
    """The covariate's moments for the series gradients (`style_series`) of `fits`, where there
    is one covariate and the series is short for fits whose coefficient is up to half as large
    again as the point estimate's (a fit beyond is walked); None otherwise."""
    if data.n_features != 1:
        return None
    x = data.x[:, :, 0]
    order = series_order(1.5 * abs(0.5 * float(coefficients[0])) * largest(x, data.mask) + 0.01)
    if order is None:
        return None
    return Moments.of(x, data.mask, weights, order, fits)


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
    # The plain bootstrap's resamples, drawn by the same seeded generator: both rankings
    # resample the same tasks (common random numbers), so they differ by the covariates only.
    weights = task_weights(n_units, n_resamples, seed).astype(np.float64)
    # Fits 0..B-1 are the resamples, B..B+U-1 the jackknife's (task k left out); each steps
    # with its own curvature at the point estimate (a jackknife fit's: H - H_k).
    n_fits = n_resamples + n_units
    centred = sub.mask * (sub.score - 0.5)
    slot_x = sub.mask[:, :, None] * sub.x  # (U, S, K)
    task_curv = style_curvature(sub, theta_hat)
    h_fit, g_fit, style_curv, slot_features = _per_fit(
        weights, [h_task, g_task, task_curv, slot_x])
    info = h_fit + h_prior
    first = _solve(info, g_fit + g_prior)
    scores = task_scores(data.comp)  # the plain bootstrap's score matrices, bit for bit
    wins_all = win_matrix(data.comp)
    wins = np.concatenate([np.zeros((0, m, m)), *resampled_wins(scores, n_resamples, seed, m),
                           *left_out_wins(scores, wins_all)])
    per_task = np.einsum("ts,tsk->tk", centred, sub.x)
    feature_centred = np.concatenate([weights @ per_task, per_task.sum(axis=0)[None] - per_task])
    sums = FitSums(wins, feature_centred, slot_features.astype(np.float32))
    theta = theta_hat + first
    shift = np.zeros((n_fits, m))  # the style's share of each score at each fit's last pass
    moved = np.zeros((n_fits, n_params))  # and each fit's step since that pass
    iterations = np.ones(n_fits, dtype=np.int64)  # the first step is one
    n_workers = max(1, default_threads() if workers is None else workers)
    last = np.abs(first).max(axis=1, initial=0.0)  # each fit's last step: largest move
    refit: list[int] = []  # fits the fixed curvature does not bring home

    moments: Moments | None = None  # taken below, for the fits passed over the data

    def gradients(job: tuple[IntArray, bool]) -> tuple[FloatArray, FloatArray]:
        at, series = job
        part = FitSums(sums.wins[at], sums.feature_centred[at], sums.slot_features[at])
        if series and moments is not None:
            return fit_gradients(sub, theta[at], weights, part, prior, (moments, at))
        return fit_gradients(sub, theta[at], _row_weights(weights, at), part, prior)

    def advance(active: IntArray, pool: ThreadPoolExecutor) -> IntArray:
        """One gradient pass and step for `active` fits; the ones still going on.

        The fits are cut into blocks of `_PASS_FITS` in their order, those the series serve
        apart from the others, whatever the number of threads: a fit's sums then come out of
        the same arrays, laid out alike, and so the same to the bit with one thread or four
        (numpy's sums vectorise by a row's place in its array)."""
        served = (
            np.zeros(active.size, dtype=bool)
            if moments is None
            else moments.serves(active, 0.5 * theta[active, m])
        )
        places = [np.flatnonzero(served), np.flatnonzero(~served)]
        blocks = [
            (group[start : start + _PASS_FITS], series)
            for group, series in zip(places, (True, False), strict=True)
            for start in range(0, group.size, _PASS_FITS)
        ]
        done = list(pool.map(gradients, [(active[block], series) for block, series in blocks]))
        gradient = np.empty((active.size, n_params))
        for (block, _), (grad, style_shift) in zip(blocks, done, strict=True):
            gradient[block] = grad
            shift[active[block]] = style_shift
        step = _solve(info[active], gradient)
        size = np.abs(step).max(axis=1)
        # A step that does not shrink means the curvature at the point estimate is too
        # far from this fit's own (a near-separated resample): fit it from scratch.
        growing = ~(size < last[active]) & ~(size < tol)
        refit.extend(active[growing].tolist())
        keep = ~growing
        active, step, size = active[keep], step[keep], size[keep]
        theta[active] += step
        moved[active] = step
        newton = iterations[active] == 1
        # A fixed curvature converges linearly: with rate r = this step / the last, the
        # error left after this step is about r / (1 - r) times it. Measured from the
        # second gradient pass on (the first step's ratio is Newton's quadratic one).
        rate = size / np.maximum(last[active], 1e-300)  # below 1: growing ones left
        left = np.where(~newton, size * rate / np.maximum(1.0 - rate, 1e-12), size)
        last[active] = size
        iterations[active] += 1
        going: IntArray = active[left >= tol]
        return going

    # The jackknife fits by the expansion where it is accurate (style_jackknife.py); the
    # others, and every resample, by passes over the data.
    left_out = settle_left_out(sub, theta_hat, first[n_resamples:], info[n_resamples:], g_task,
                               h_task, task_curv, prior, tol)
    settled = n_resamples + np.flatnonzero(left_out.done)
    theta[settled] = left_out.theta[left_out.done]
    shift[settled] = left_out.shift[left_out.done]
    iterations[settled] += 1
    active = np.setdiff1d(np.arange(n_fits), settled)
    moments = _moments(sub, weights, theta_hat[m:], active)
    with ThreadPoolExecutor(max_workers=n_workers) as pool:
        for _ in range(max_iter):
            if active.size == 0:
                break
            active = advance(active, pool)
    refit += active.tolist()
    # The shift at each fit's final point: the last pass's, carried over its last step.
    shift -= np.einsum("nmp,np->nm", style_curv, moved)
    for b in refit:
        row = _row_weights(weights, np.array([b]))[0]
        own = fit_style_bt(sub, prior=prior, weights=row, init=theta_hat)
        theta[b] = np.concatenate([own.fit.log_strength, own.coefficients])
        shift[b] = score_shift(sub, theta[b, :m], theta[b, m:], row)
        iterations[b] += own.fit.iterations
    unconverged = [b for b in refit
                   if not _converged(sub, theta[b], _row_weights(weights, np.array([b]))[0],
                                     prior)]
    # The log-strengths by the plain bootstrap's Newton method, resamples and jackknife alike.
    init = style.fit.log_strength
    fits = [
        fit_batches([wins[:n_resamples]] if n_resamples else [], n_resamples, m, prior, init,
                    workers, offsets=shift[:n_resamples]),
        fit_batches([wins[n_resamples:]], n_units, m, prior, init, workers,
                    jackknife_first_step(wins_all, init, prior, n_units),
                    offsets=shift[n_resamples:]),
    ]
    beta, jack = fits[0].log_strength, fits[1]
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
        raw_win_rate=fits[0].raw_win_rate,
        jackknife=Jackknife(jack.log_strength, jack.raw_win_rate, np.ones(n_units)),
        iterations_max=int(max(iterations.max(initial=0), *(f.iterations_max for f in fits))),
        # a fit counts once as unconverged, by its coefficients or by its log-strengths
        n_converged=max(0, sum(f.n_converged for f in fits) - len(unconverged)),
        n_fits=n_fits,
    )
    return StyleBootstrap(
        style=style,
        bootstrap=boot,
        coefficients=theta[:n_resamples, m:].copy(),
        coefficient_jackknife=theta[n_resamples:, m:].copy(),
        iterations_max=boot.iterations_max,
    )
