"""Where an adaptive round's comparisons separate the most neighbouring models.

A comparison of models a and b adds p(1 - p) to the Bradley-Terry information about
beta_a - beta_b (p the fitted win probability), and through the comparison graph it narrows
every difference whose path runs through that pair. So the round's comparisons are not shared
evenly among the unseparated neighbours: they go, a chunk at a time, to the pair of models
(neighbours, or up to `window` ranks apart) that most raises the expected number of
neighbouring pairs the final interval will separate.

That expectation is computed per open neighbour from what the run knows now: its observed
difference d and its standard error s (the bootstrap interval's half-width over its critical
value, so task effects are in it). With more comparisons the standard error would fall to s'
(s times the ratio of the model-based standard errors after and before: the Fisher
information, where the bootstrap cannot look ahead); the estimate moves by a further
N(0, s^2 - s'^2) on the way; the pair ends separated if it then lies more than c s' from 0.
So P(separated) = Phi((|d| - c s') / sqrt(s^2 - s'^2)) (+ the same on the other side). It
grows fastest for pairs close to separation with cheap information, and barely for pairs
whose gap is near 0, so the budget is not chased into near-ties (more looks at a near-tie
would only add chances of a wrong claim).

Pure: numpy in, arrays out.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .special import expit, ndtr

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

CHUNKS_PER_ROUND = 40  # a round's quota is given out in this many steps


def information(counts: FloatArray, estimate: FloatArray) -> FloatArray:
    """The Bradley-Terry information (M, M) of `counts[a, b]` comparisons (symmetric) at the
    fitted differences `estimate[a, b]` = beta_a - beta_b, made invertible by adding the
    all-ones matrix (differences are orthogonal to it, so their variances are unchanged)."""
    p = expit(estimate)
    w = counts * p * (1.0 - p)
    np.fill_diagonal(w, 0.0)
    m = counts.shape[0]
    laplacian: FloatArray = np.diag(w.sum(axis=1)) - w + np.ones((m, m))
    return laplacian


def separation_chance(
    gap: FloatArray, se_now: FloatArray, se_after: FloatArray, crit: float
) -> FloatArray:
    """P(an interval of half-width crit x se_after excludes 0 at the end), the estimate now
    `gap` with standard error `se_now`, moving by N(0, se_now^2 - se_after^2) until then."""
    spread = np.sqrt(np.maximum(se_now**2 - se_after**2, 1e-12))
    far = np.abs(gap)
    out: FloatArray = ndtr((far - crit * se_after) / spread) + ndtr(
        (-far - crit * se_after) / spread
    )
    return out


def allocate(
    neighbours: IntArray,
    estimate: FloatArray,
    se_now: FloatArray,
    counts: FloatArray,
    room: FloatArray,
    quota: int,
    crit: float,
    window_pairs: IntArray,
) -> dict[tuple[int, int], int]:
    """Comparisons per candidate pair for one round: `quota` of them, a chunk at a time, each
    to the pair (of `window_pairs`, rows (a, b) with a < b) that most raises the sum of
    `separation_chance` over the open `neighbours` (rows (upper, lower)), never more on a
    pair than its `room` (tasks not yet judged for it). `se_now` is each neighbour's standard
    error now, `counts` the comparisons made so far (symmetric). Returns {(a, b): count}."""
    m = counts.shape[0]
    counts = counts.astype(np.float64).copy()
    if neighbours.size == 0 or window_pairs.size == 0 or quota <= 0:
        return {}
    x = np.zeros((neighbours.shape[0], m))
    x[np.arange(neighbours.shape[0]), neighbours[:, 0]] = 1.0
    x[np.arange(neighbours.shape[0]), neighbours[:, 1]] = -1.0
    gap = estimate[neighbours[:, 0], neighbours[:, 1]]
    cov = np.linalg.inv(information(counts, estimate))
    model_se_now = np.sqrt(np.maximum(np.einsum("km,mn,kn->k", x, cov, x), 1e-18))
    inflate = se_now / model_se_now  # what task effects add to the model's standard error
    d = np.zeros((window_pairs.shape[0], m))
    d[np.arange(window_pairs.shape[0]), window_pairs[:, 0]] = 1.0
    d[np.arange(window_pairs.shape[0]), window_pairs[:, 1]] = -1.0
    p = expit(estimate[window_pairs[:, 0], window_pairs[:, 1]])
    weight = p * (1.0 - p)
    given = np.zeros(window_pairs.shape[0], dtype=np.int64)
    tasks_free = np.asarray(room, dtype=np.int64)
    chunk = max(1, -(-quota // CHUNKS_PER_ROUND))
    left = quota
    while left > 0 and (tasks_free > given).any():
        var = np.einsum("km,mn,kn->k", x, cov, x)
        now = separation_chance(gap, se_now, inflate * np.sqrt(var), crit)
        step = np.minimum(np.minimum(chunk, left), tasks_free - given).astype(np.float64)
        xd = x @ cov @ d.T  # (K, C)
        dd = np.einsum("cm,mn,cn->c", d, cov, d)
        shrink = (step * weight)[None, :] * xd**2 / (1.0 + step * weight * dd)[None, :]
        after = np.sqrt(np.maximum(var[:, None] - shrink, 1e-18))
        chance = separation_chance(gap[:, None], se_now[:, None], inflate[:, None] * after, crit)
        gain = (chance - now[:, None]).sum(axis=0) / np.maximum(step, 1.0)
        gain[step <= 0] = -np.inf
        best = int(np.argmax(gain))
        take = int(step[best])
        a, b = int(window_pairs[best, 0]), int(window_pairs[best, 1])
        given[best] += take
        left -= take
        counts[a, b] += take
        counts[b, a] += take
        u = cov @ d[best]
        cov = cov - np.outer(u, u) * (take * weight[best]) / (1.0 + take * weight[best] * dd[best])
    return {
        (int(a), int(b)): int(g)
        for (a, b), g in zip(window_pairs.tolist(), given, strict=True)
        if g > 0
    }
