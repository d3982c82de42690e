"""The gradients of many style-controlled fits at once, for the style bootstrap's passes
(`style_boot`): the plain part from each fit's score matrix, and the style's share of the
residuals summed over the tasks, from one covariate's moments (`style_series`) or by a walk
over every cell.

May import: numpy and the statistics modules it names; nothing else of konkord.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .bt import FloatArray, IntArray
from .style_fit import StyleData, prior_terms
from .style_series import Moments

BLOCK_FITS = 32  # fits walked through the grid together
BLOCK_ELEMENTS = 1 << 16  # (fits x tasks x slots) per block: 256 KB, stays in cache


@dataclass(frozen=True)
class FitSums:
    """What a fit's gradient needs that its parameters do not change, for fits (n,): its
    score matrix (n, M, M) in double, its covariates summed against the centred scores
    (n, K), and per slot against the comparisons' counts (n, S, K), in single precision."""

    wins: FloatArray
    feature_centred: FloatArray
    slot_features: FloatArray


def fit_gradients(
    data: StyleData,
    theta: FloatArray,
    weights: FloatArray,
    sums: FitSums,
    prior: float,
    series: tuple[Moments, IntArray] | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Exact gradients (n, P) of n fits' penalised log-likelihoods at theta (n, P), and the
    style's share of each model's score (n, M) there (`style_fit.score_shift`).

    A cell's residual is score - sigmoid(eta), eta = (beta_lo - beta_hi) + x . gamma. Its
    plain part, with x . gamma left out, sums over a fit's score matrix in double precision.
    The rest, (tanh(eta / 2) - tanh((beta_lo - beta_hi) / 2)) / 2, is summed over the tasks
    from the moments of one covariate where `series` gives them with the fits' rows
    (`style_series`), else by `walk`."""
    m = data.n_models
    edge = data.edge()
    beta, gamma_all = theta[:, :m], theta[:, m:]
    grad, _ = prior_terms(beta, gamma_all, prior)
    counts = sums.wins + np.swapaxes(sums.wins, 1, 2)
    spread = np.tanh(0.5 * (beta[:, :, None] - beta[:, None, :]))
    grad[:, :m] += sums.wins.sum(axis=2) - 0.5 * counts.sum(axis=2) - 0.5 * (
        counts * spread).sum(axis=2)
    grad[:, m:] += sums.feature_centred
    if series is None:
        by_slot, by_feature = walk(data, theta, weights, sums)
    else:
        moments, rows = series
        half = 0.5 * theta
        pair = half[:, data.lo] - half[:, data.hi]
        by_slot, diff_feature = moments.diff_sums(rows, pair, half[:, m])
        plain = np.tanh(pair.astype(np.float32))  # the plain share as `walk` takes it
        by_feature = diff_feature[:, None] + np.einsum("rs,rsk->rk", plain, sums.slot_features)
    shift = -0.5 * (by_slot @ edge)
    grad[:, :m] += shift
    grad[:, m:] -= 0.5 * by_feature
    return grad, shift


def walk(
    data: StyleData, theta: FloatArray, weights: FloatArray, sums: FitSums
) -> tuple[FloatArray, FloatArray]:
    """Per fit, the style's share of the residuals summed per slot (n, S), and against the
    covariates (n, K), by a walk over every cell.

    It is walked a block of tasks at a time for a few fits at once, laid out (fit, task, slot)
    so that x . gamma is one small matrix product and every other step one pass over a block
    that stays in cache. Within a block tanh is taken in single precision, where numpy's tanh
    is vectorised (five times faster than in double), and summed into double-precision totals
    block by block: each residual is then off by about 1e-7, and a gradient over 190,000
    comparisons by about 1e-5, which moves the optimum by about 1e-8 in log-odds. Where
    x . gamma is 0 both tanh are the same number and the difference exactly 0."""
    m, k = data.n_models, data.n_features
    n_units, n_slots = data.score.shape
    single = np.float32
    mask = None if bool(np.all(data.mask == 1.0)) else data.mask.astype(single)
    x_flat_t = np.ascontiguousarray(data.x.reshape(n_units * n_slots, k).T.astype(single))
    weights = weights.astype(single)
    by_slot = np.zeros((theta.shape[0], n_slots))
    by_feature = np.zeros((theta.shape[0], k))
    rows = min(BLOCK_FITS, theta.shape[0])
    tasks = max(1, BLOCK_ELEMENTS // max(1, rows * n_slots))
    for start in range(0, theta.shape[0], rows):
        part = slice(start, start + rows)
        half = 0.5 * theta[part]  # (r, P)
        pair = (half[:, data.lo] - half[:, data.hi]).astype(single)[:, None, :]  # (r, 1, S)
        plain = np.tanh(pair)
        gamma = half[:, m:].astype(single)  # (r, K)
        diff_slot = np.zeros((pair.shape[0], n_slots))
        diff_feature = np.zeros((k, pair.shape[0]))
        # pair and plain laid out for a whole block of tasks once: added to a block as they
        # are, (r, 1, S) broadcast over its tasks, numpy walks 190 cells at a time, four
        # times slower (the same sums, bit for bit)
        block = (pair.shape[0], tasks, n_slots)
        pair_block = np.ascontiguousarray(np.broadcast_to(pair, block))
        plain_block = np.ascontiguousarray(np.broadcast_to(plain, block))
        # (numpy's matmul does not hand an inner dimension of 1 to BLAS: its own loop took
        # 180 us a block against 26 us by `dot`, the same products bit for bit)
        product = np.dot if k == 1 else np.matmul
        for t0 in range(0, n_units, tasks):
            t1 = min(t0 + tasks, n_units)
            cells = slice(t0 * n_slots, t1 * n_slots)
            eta = product(gamma, x_flat_t[:, cells]).reshape(-1, t1 - t0, n_slots)
            eta += pair_block[:, : t1 - t0]
            diff = np.tanh(eta, out=eta)
            diff -= plain_block[:, : t1 - t0]
            if mask is not None:
                diff *= mask[t0:t1]
            diff *= weights[part, t0:t1, None]
            diff_slot += np.matmul(np.ones((1, t1 - t0), single), diff)[:, 0, :]
            diff_feature += x_flat_t[:, cells] @ diff.reshape(-1, (t1 - t0) * n_slots).T
        by_slot[part] = diff_slot
        # the plain tanh's share of the features' sums: the counts per slot times it
        by_feature[part] = diff_feature.T + np.einsum(
            "rs,rsk->rk", plain[:, 0, :], sums.slot_features[part]
        )
    return by_slot, by_feature
