"""The style-controlled jackknife without a pass over the data per task left out.

Each jackknife fit leaves out one task of U, so it moves from the point estimate by about 1/U
of a task's pull: Newton's first step from the point estimate, with the exact curvature of the
remaining tasks there (`style_boot.py`), leaves an error of second order in that move. The
gradient of the remaining tasks at the first step's end is the full data's, less the task's
own; the task's own is exact (one task's cells), the full data's is its Taylor expansion at
the point estimate to second order, whose terms are moments of the residuals' second
derivative per slot, taken once for all U fits. One more step with the same curvature then
leaves an error of third order in the move: at 20 models x 1,000 tasks about 1e-9, where a
pass over all 190,000 comparisons per fit would cost a third of the whole bootstrap.

The estimate of what is left is conservative (the step times the largest change in any
comparison's log-odds, plus that change cubed times the move); a fit whose estimate is not
below the bootstrap's tolerance (fewer tasks, larger moves) goes through the passes like a
resample. The style's share of each model's score at the end (`style_fit.score_shift`) comes
from the same expansion, taken cell by cell as differences, so covariates of 0 give exactly 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .bt import FloatArray
from .special import expit
from .style_fit import StyleData, prior_terms


@dataclass(frozen=True)
class LeftOut:
    """The jackknife fits the expansion settles: `done` (U,) marks them, `theta` (U, P) and
    `shift` (U, M) hold their parameters and the style's share of each score (rows of the
    others are left as given)."""

    done: npt.NDArray[np.bool_]
    theta: FloatArray
    shift: FloatArray


def _task_terms(sub: StyleData, theta: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Task k's own gradient (U, P) at theta[k] (U, P), and its share of the style shift
    (U, M) there, as a difference cell by cell."""
    m = sub.n_models
    plain = theta[:, sub.lo] - theta[:, sub.hi]  # (U, S)
    styled = plain + np.einsum("tsk,tk->ts", sub.x, theta[:, m:])
    resid = sub.mask * (sub.score - expit(styled))
    edge = sub.edge()
    grad = np.concatenate([resid @ edge, np.einsum("ts,tsk->tk", resid, sub.x)], axis=1)
    shift: FloatArray = (sub.mask * (expit(plain) - expit(styled))) @ edge
    return grad, shift


def settle_left_out(
    sub: StyleData,
    theta_hat: FloatArray,
    first: FloatArray,
    info: FloatArray,
    g_task: FloatArray,
    h_task: FloatArray,
    style_curv: FloatArray,
    prior: float,
    tol: float,
) -> LeftOut:
    """Second steps of the U jackknife fits from their first steps `first` (U, P), with their
    curvatures `info` (U, P, P); `g_task` (U, P), `h_task` (U, P, P) and `style_curv`
    (U, M, P, `style_fit.style_curvature`) are each task's own at `theta_hat`."""
    m = sub.n_models
    mask, x = sub.mask, sub.x
    a_hat = (theta_hat[sub.lo] - theta_hat[sub.hi])[None, :]  # (1, S)
    eta_hat = a_hat + np.einsum("tsk,k->ts", x, theta_hat[m:])

    def second(eta: FloatArray) -> FloatArray:
        p = expit(eta)
        out: FloatArray = p * (1.0 - p) * (1.0 - 2.0 * p)
        return out

    curv2 = mask * second(eta_hat)  # (U, S)
    moment_a = curv2.sum(axis=0)  # (S,)
    weighted = curv2[:, :, None] * x  # (U, S, K)
    moment_b = weighted.sum(axis=0)  # (S, K)
    k = x.shape[2]
    # (S, K, K) per slot, and (K, K x K) over all cells: only the first is needed per slot
    moment_c = np.matmul(weighted.transpose(1, 2, 0), x.transpose(1, 0, 2))
    pairs = (x[:, :, :, None] * x[:, :, None, :]).reshape(-1, k * k)
    moment_d = weighted.reshape(-1, k).T @ pairs
    # for the shift: the plain second derivative less the styled one, per slot
    moment_a_shift = (mask * (second(a_hat) - second(eta_hat))).sum(axis=0)
    edge = sub.edge()

    def expanded(delta: FloatArray) -> tuple[FloatArray, FloatArray]:
        """The full data's gradient change beyond first order (U, P), and the full data's
        style shift change beyond first order (U, M), at theta_hat + delta, to second order."""
        u = delta[:, sub.lo] - delta[:, sub.hi]  # (U, S)
        w = delta[:, m:]  # (U, K)
        ww = (w[:, :, None] * w[:, None, :]).reshape(-1, k * k)
        bw = w @ moment_b.T  # (U, S)
        cww = ww @ moment_c.reshape(-1, k * k).T  # (U, S)
        slot = moment_a * u * u + 2.0 * u * bw + cww
        grad = np.empty_like(delta)
        grad[:, :m] = -0.5 * (slot @ edge)
        ucw = ((u @ moment_c.reshape(-1, k * k)).reshape(-1, k, k) @ w[:, :, None])[:, :, 0]
        grad[:, m:] = -0.5 * ((u * u) @ moment_b + 2.0 * ucw + ww @ moment_d.T)
        shift = 0.5 * ((moment_a_shift * u * u - 2.0 * u * bw - cww) @ edge)
        return grad, shift

    g_prior_hat, h_prior_hat = prior_terms(theta_hat[:m], theta_hat[m:], prior)
    shift_hat = (mask * (expit(a_hat) - expit(eta_hat))) @ edge  # (U, M) per task
    shift_all = shift_hat.sum(axis=0)

    def remainder(delta: FloatArray) -> FloatArray:
        """The remaining tasks' penalised gradient at theta_hat + delta, less its value and
        first-order change at theta_hat (which the first step cancels)."""
        theta = theta_hat + delta
        g_own, _ = _task_terms(sub, theta)
        own = g_own - g_task + np.einsum("upq,uq->up", h_task, delta)
        g_prior, _ = prior_terms(theta[:, :m], theta[:, m:], prior)
        penalty = g_prior - g_prior_hat + delta @ h_prior_hat
        out: FloatArray = expanded(delta)[0] - own + penalty
        return out

    step = np.linalg.solve(info, remainder(first)[..., None])[..., 0]
    delta = first + step
    spread = np.abs(delta[:, sub.lo] - delta[:, sub.hi]).max(axis=1) + np.abs(x).max(
        initial=0.0) * np.abs(delta[:, m:]).sum(axis=1)  # largest change in any log-odds
    left = (np.abs(step).max(axis=1) + np.abs(delta).max(axis=1) * spread**2) * spread
    theta = theta_hat + delta
    _, own_shift = _task_terms(sub, theta)
    # all tasks' shift, expanded at theta_hat, less the task's own, exact
    shift = (shift_all - delta @ style_curv.sum(axis=0).T) + expanded(delta)[1] - own_shift
    return LeftOut(left < tol, theta, shift)
