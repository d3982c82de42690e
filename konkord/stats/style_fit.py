"""Style-controlled Bradley-Terry: the plain fit with style covariates.

The model: P(a's answer beats b's) = sigmoid(beta_a - beta_b + x . gamma), where x holds the
pair's normalised style differences (`style_features`, a's answer minus b's) and gamma one
coefficient per feature, in log-odds per unit of normalised difference. Everything else is the
plain fit's (`bt.py`): a tie is half a win to each side, the two orders of a pair are combined
before (one outcome per task and pair), and the prior is half a virtual win and half a virtual
loss of every model against an average opponent. Each coefficient gets the same weak prior (half
a win and half a loss at a unit difference in its feature), which keeps a feature that always
sides with the winner finite and leaves a feature no answer has at exactly 0. The
log-strengths have mean 0; `expected_win_rate` is then the win rate against the field with
the style differences set to 0: what the judge would say if the answers were alike in style.

Given the coefficients, the log-strengths are the plain fit's with each model's score shifted
by the share of it that the style differences explain (`score_shift`): the fit ends with the
plain fit's own Newton method (`newton_bt`) on the same score matrix with that shift. With
every covariate 0 the shift is exactly 0 and the log-strengths are the plain fit's, bit for bit.

Data is laid out per task on a grid of slots, one slot per model pair that occurs (more layers
when a task holds the same pair twice), so that a bootstrap resample's weights are a row of
task counts broadcast over the grid, never a gather (`style_boot.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .bt import (
    DEFAULT_MAX_ITER,
    DEFAULT_PRIOR,
    DEFAULT_TOL,
    BTFit,
    Comparisons,
    FloatArray,
    IntArray,
    expected_win_rate,
    newton_bt,
    raw_win_rate,
    win_matrix,
)
from .special import expit

GridArray = npt.NDArray[np.float64]  # (T, S) or (T, S, K)


@dataclass(frozen=True)
class StyleData:
    """Outcomes and covariates on a (task, slot) grid; slot s holds pair (lo[s], hi[s]).

    `score` is lo's score (0 in empty cells), `mask` 1 where a comparison sits, `x` the
    covariates oriented lo's answer minus hi's (0 in empty cells).
    """

    comp: Comparisons
    covariates: FloatArray  # (C, K) as given, model i's answer minus model j's
    lo: IntArray  # (S,)
    hi: IntArray  # (S,)
    score: GridArray  # (T, S)
    mask: GridArray  # (T, S)
    x: GridArray  # (T, S, K)

    @property
    def n_models(self) -> int:
        return self.comp.n_models

    @property
    def n_features(self) -> int:
        return int(self.x.shape[2])

    @property
    def n_params(self) -> int:
        return self.n_models + self.n_features

    def edge(self) -> FloatArray:
        """(S, M): +1 at lo, -1 at hi; maps slot sums to model sums."""
        out = np.zeros((self.lo.size, self.n_models))
        out[np.arange(self.lo.size), self.lo] = 1.0
        out[np.arange(self.lo.size), self.hi] -= 1.0
        return out


def style_data(comp: Comparisons, covariates: npt.ArrayLike) -> StyleData:
    """Lay comparisons and their covariates (C, K), model i's answer minus j's, on the grid."""
    x_in = np.asarray(covariates, dtype=np.float64)
    if x_in.ndim != 2 or x_in.shape[0] != len(comp):
        raise ValueError(
            f"covariates must be (comparisons, features) = ({len(comp)}, K); got {x_in.shape}"
        )
    if not np.all(np.isfinite(x_in)):
        bad = int(np.flatnonzero(~np.all(np.isfinite(x_in), axis=1))[0])
        raise ValueError(f"covariates[{bad}] is not finite")
    m = comp.n_models
    lo = np.minimum(comp.i, comp.j)
    hi = np.maximum(comp.i, comp.j)
    flip = comp.i > comp.j
    score_lo = np.where(flip, 1.0 - comp.score, comp.score)
    x_lo = np.where(flip[:, None], -x_in, x_in)
    pair = lo * m + hi
    # layer: how many earlier comparisons of the same task hold the same pair
    key = comp.task * (m * m) + pair
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    starts = np.r_[0, np.flatnonzero(sorted_key[1:] != sorted_key[:-1]) + 1]
    run_start = np.repeat(starts, np.diff(np.r_[starts, sorted_key.size]))
    layer = np.empty(key.size, dtype=np.int64)
    layer[order] = np.arange(key.size) - run_start
    slot_key = layer * (m * m) + pair
    slots, slot = np.unique(slot_key, return_inverse=True)
    n_slots = slots.size
    t = comp.n_tasks
    score = np.zeros((t, n_slots))
    mask = np.zeros((t, n_slots))
    x = np.zeros((t, n_slots, x_in.shape[1]))
    score[comp.task, slot] = score_lo
    mask[comp.task, slot] = 1.0
    x[comp.task, slot] = x_lo
    pairs = slots % (m * m)
    return StyleData(comp, x_in, pairs // m, pairs % m, score, mask, x)


def task_terms(
    data: StyleData,
    beta: FloatArray,
    gamma: FloatArray,
    curvature: bool = True,
    per_task: bool = True,
    weights: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray | None]:
    """Per-task gradient (T, P) of the log-likelihood at (beta, gamma), and per-task minus
    Hessian (T, P, P) when `curvature`; P = M + K, parameters in that order. No prior.
    With `per_task=False`, their sums over tasks instead ((1, P) and (1, P, P)): what a fit
    needs, at a fraction of the cost. `weights` (T,) counts each task that many times (a
    bootstrap resample)."""
    edge = data.edge()
    n_units, n_slots = data.score.shape
    m, k = data.n_models, data.n_features
    x_flat = data.x.reshape(n_units * n_slots, k)
    eta = (beta[data.lo] - beta[data.hi])[None, :] + (x_flat @ gamma).reshape(n_units, n_slots)
    p = expit(eta)
    mask = data.mask if weights is None else data.mask * weights[:, None]
    resid = mask * (data.score - p)
    rows = n_units if per_task else 1
    grad = np.empty((rows, m + k))
    if per_task:
        grad[:, :m] = resid @ edge
        grad[:, m:] = (resid[:, None, :] @ data.x)[:, 0, :]
    else:
        grad[0, :m] = resid.sum(axis=0) @ edge
        grad[0, m:] = resid.reshape(-1) @ x_flat
    if not curvature:
        return grad, None
    v = mask * p * (1.0 - p)
    info = np.zeros((rows, m + k, m + k))
    # beta-beta: a Laplacian per task from the slots' weights
    lap = np.zeros((data.lo.size, m * m))
    s = np.arange(data.lo.size)
    lap[s, data.lo * m + data.lo] += 1.0
    lap[s, data.hi * m + data.hi] += 1.0
    lap[s, data.lo * m + data.hi] -= 1.0
    lap[s, data.hi * m + data.lo] -= 1.0
    if per_task:
        info[:, :m, :m] = (v @ lap).reshape(-1, m, m)
        vx = np.swapaxes(v[:, :, None] * data.x, 1, 2)  # (T, K, S)
        cross = vx @ edge  # (T, K, M)
        info[:, m:, m:] = vx @ data.x
    else:
        info[0, :m, :m] = (v.sum(axis=0) @ lap).reshape(m, m)
        vx_flat = v.reshape(-1, 1) * x_flat  # (T S, K)
        cross = (vx_flat.reshape(n_units, n_slots, k).sum(axis=0).T @ edge)[None]
        info[0, m:, m:] = vx_flat.T @ x_flat
    info[:, m:, :m] = cross
    info[:, :m, m:] = np.swapaxes(cross, 1, 2)
    return grad, info


def score_shift(
    data: StyleData, beta: FloatArray, gamma: FloatArray, weights: FloatArray | None = None
) -> FloatArray:
    """(M,): each model's expected score with the style differences at 0 less its expected
    score with them, at (beta, gamma): added to its observed score, the plain Bradley-Terry
    gradient becomes the style-controlled one. Taken as a difference cell by cell, so that
    covariates of 0 give exactly 0; `weights` (T,) as in `task_terms`."""
    n_units, n_slots = data.score.shape
    plain = (beta[data.lo] - beta[data.hi])[None, :]
    styled = plain + (data.x.reshape(n_units * n_slots, -1) @ gamma).reshape(n_units, n_slots)
    mask = data.mask if weights is None else data.mask * weights[:, None]
    out: FloatArray = (mask * (expit(plain) - expit(styled))).sum(axis=0) @ data.edge()
    return out


def slot_wins(data: StyleData, weights: FloatArray | None = None) -> FloatArray:
    """(M, M) score matrix of the grid's comparisons ([a, b] = a's score against b), each
    task counted `weights` times; with no weights exactly `win_matrix` of the comparisons."""
    if weights is None:
        return win_matrix(data.comp)
    m = data.n_models
    won = weights @ (data.mask * data.score)
    lost = weights @ (data.mask * (1.0 - data.score))
    wins = np.zeros((m, m))
    np.add.at(wins, (data.lo, data.hi), won)
    np.add.at(wins, (data.hi, data.lo), lost)
    return wins


def style_curvature(sub: StyleData, theta: FloatArray) -> FloatArray:
    """(U, M, P) per task: minus the derivative of the style's share of each model's score
    (`score_shift`) with respect to the parameters, at theta; exactly 0 where x is 0."""
    m = sub.n_models
    n_units, n_slots = sub.score.shape
    plain = (theta[sub.lo] - theta[sub.hi])[None, :]
    styled = plain + (sub.x.reshape(n_units * n_slots, -1) @ theta[m:]).reshape(n_units, n_slots)

    def var(eta: FloatArray) -> FloatArray:
        p = expit(eta)
        out: FloatArray = p * (1.0 - p)
        return out

    v_diff = sub.mask * (var(styled) - var(plain))
    lap = np.zeros((n_slots, m * m))
    s = np.arange(n_slots)
    lap[s, sub.lo * m + sub.lo] += 1.0
    lap[s, sub.hi * m + sub.hi] += 1.0
    lap[s, sub.lo * m + sub.hi] -= 1.0
    lap[s, sub.hi * m + sub.lo] -= 1.0
    out = np.empty((n_units, m, m + sub.n_features))
    out[:, :, :m] = (v_diff @ lap).reshape(n_units, m, m)
    v = sub.mask * var(styled)
    out[:, :, m:] = np.swapaxes(np.swapaxes(v[:, :, None] * sub.x, 1, 2) @ sub.edge(), 1, 2)
    return out


def prior_terms(
    beta: FloatArray, gamma: FloatArray, prior: float
) -> tuple[FloatArray, FloatArray]:
    """Gradient (..., P) and minus Hessian (..., P, P) of the prior and of the mean-0 pin,
    for parameters batched over leading axes (beta (..., M), gamma (..., K))."""
    m = beta.shape[-1]
    k = gamma.shape[-1]
    lead = beta.shape[:-1]
    grad = np.zeros((*lead, m + k))
    info = np.zeros((*lead, m + k, m + k))
    info[..., :m, :m] = 1.0  # the pin -(sum beta)^2 / 2
    grad[..., :m] = -beta.sum(axis=-1, keepdims=True)
    if prior > 0.0:
        u = beta - beta.mean(axis=-1, keepdims=True)
        su = expit(u)
        r = prior * (1.0 - 2.0 * su)
        grad[..., :m] += r - r.mean(axis=-1, keepdims=True)
        d = 2.0 * prior * su * (1.0 - su)
        centre = np.eye(m) - 1.0 / m
        info[..., :m, :m] += centre @ (d[..., :, None] * centre)
        sg = expit(gamma)
        grad[..., m:] += prior * (1.0 - 2.0 * sg)
        idx = np.arange(m, m + k)
        info[..., idx, idx] += 2.0 * prior * sg * (1.0 - sg)
    return grad, info


@dataclass(frozen=True)
class StyleFit:
    """A style-controlled fit: the models' figures as a `BTFit` (style differences at 0) and
    the style coefficients, log-odds per unit of normalised difference."""

    fit: BTFit
    coefficients: FloatArray  # (K,)
    curvature: FloatArray  # (P, P) minus the Hessian at the optimum, prior and pin included


def fit_style_bt(
    data: StyleData,
    prior: float = DEFAULT_PRIOR,
    tol: float = DEFAULT_TOL,
    max_iter: int = DEFAULT_MAX_ITER,
    weights: FloatArray | None = None,
    init: FloatArray | None = None,
) -> StyleFit:
    """Fit beta and gamma by Newton's method with step halving on the gradient norm;
    `weights` (T,) counts each task that many times, `init` (M + K,) starts the fit."""
    if prior < 0.0:
        raise ValueError(f"prior must be >= 0, got {prior}")
    m, k = data.n_models, data.n_features
    theta = np.zeros(m + k) if init is None else np.array(init, dtype=np.float64)

    def terms(th: FloatArray, curv: bool) -> tuple[FloatArray, FloatArray | None]:
        g_task, h_task = task_terms(data, th[:m], th[m:], curv, per_task=False, weights=weights)
        g_prior, h_prior = prior_terms(th[:m], th[m:], prior)
        grad = g_task.sum(axis=0) + g_prior
        return grad, None if h_task is None else h_task.sum(axis=0) + h_prior

    grad, info = terms(theta, True)
    norm = float(np.linalg.norm(grad))
    iterations = 0
    while norm >= tol and iterations < max_iter:
        assert info is not None
        try:
            step = np.linalg.solve(info, grad)
        except np.linalg.LinAlgError as err:
            raise ValueError(
                "style-controlled fit is singular: with prior=0 every model and every feature "
                "needs variation and the comparison graph must be connected; use the default "
                "prior"
            ) from err
        # Halve the step while it makes the gradient norm worse (Newton's direction lowers
        # |gradient|^2 for a small enough step); the curvature comes with the accepted point.
        scale = 1.0
        for _ in range(30):
            trial = theta + scale * step
            new_grad, new_info = terms(trial, True)
            new_norm = float(np.linalg.norm(new_grad))
            if new_norm < norm:
                break
            scale *= 0.5
        theta, grad, info, norm = trial, new_grad, new_info, new_norm
        iterations += 1
    assert info is not None
    # The log-strengths by the plain fit's Newton method, the style's share of each score
    # added (see the module's docstring).
    wins = slot_wins(data, weights)
    shift = score_shift(data, theta[:m], theta[m:], weights)
    plain = newton_bt(wins[None], prior=prior, tol=tol, max_iter=max_iter, offset=shift[None])
    beta = plain.beta[0]
    counts = (wins + wins.T).sum(axis=1)
    fit = BTFit(
        log_strength=beta,
        rating=np.exp(beta),
        expected_win_rate=expected_win_rate(beta),
        raw_win_rate=raw_win_rate(wins),
        comparisons=np.rint(counts).astype(np.int64),
        iterations=iterations + int(plain.iterations[0]),
        gradient_norm=max(norm, float(plain.gradient_norm[0])),
        converged=norm < tol and bool(plain.converged[0]),
        prior=prior,
    )
    return StyleFit(fit=fit, coefficients=theta[m:].copy(), curvature=info)
