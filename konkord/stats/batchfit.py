"""Many Bradley-Terry fits in bounded memory: per-task scores packed once, fits in batches.

A task bootstrap of 40 models x 5,000 tasks needs 6,000 fits (1,000 resamples and one
jackknife fit per task). Materialising every resample's and every leave-one-out score matrix
at once costs hundreds of megabytes; here they are formed a batch at a time, fitted, and
only the log-strengths and raw win rates kept. The per-task scores are summed in float32
when every sum the bootstrap can form is a multiple of one half below 2^22: such sums are
exact in float32, so the result is the same bit for bit as in float64, at half the memory
and twice the speed of the matrix product that forms the resamples.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .bt import (
    BatchModelVector,
    BatchPairMatrix,
    Comparisons,
    FloatArray,
    newton_bt,
    raw_win_rate,
    single_threaded_blas,
)

_BATCH_ELEMENTS = 1 << 20  # fits x max(M x M, tasks) formed at once: 8 MB in float64
_EXACT_FLOAT32 = float(1 << 22)  # sums of halves below this are exact in float32


def batch_rows(n_models: int, n_units: int = 0) -> int:
    """How many fits of `n_models` to form and fit at once, each drawn from `n_units` tasks."""
    return max(1, _BATCH_ELEMENTS // max(n_models * n_models, n_units))


def task_scores(comp: Comparisons) -> npt.NDArray[np.floating]:
    """Score matrices of the tasks holding a comparison, flattened: (U, M*M), in task order.

    Row u, entry a*M+b is the score of a against b on the u-th such task. Float32 when the
    sums of up to U tasks stay exact in it (scores in halves), else float64. Built from one
    key per comparison on the M(M-1)/2 unordered pairs, so the transient arrays are a
    quarter of a (T, M, M) float64 stack each.
    """
    m = comp.n_models
    first, second = np.triu_indices(m, k=1)
    n_pairs = first.size
    pair_of = np.zeros(m * m, dtype=np.int64)
    pair_of[first * m + second] = np.arange(n_pairs)
    # In place where it can be: these arrays are as long as the comparisons.
    key = np.minimum(comp.i, comp.j)
    key *= m
    key += np.maximum(comp.i, comp.j)
    np.take(pair_of, key, out=key, mode="clip")
    key += comp.task * n_pairs
    # The score of the lower-numbered model of each pair, then (in place) of the other one.
    score = comp.score.copy()
    flipped = comp.i > comp.j
    np.subtract(1.0, score, out=score, where=flipped)
    halves = bool(np.all((score == 0.0) | (score == 0.5) | (score == 1.0)))
    size = comp.n_tasks * n_pairs
    won = np.bincount(key, weights=score, minlength=size).reshape(comp.n_tasks, n_pairs)
    np.copyto(score, comp.score)
    np.subtract(1.0, score, out=score, where=~flipped)
    lost = np.bincount(key, weights=score, minlength=size).reshape(comp.n_tasks, n_pairs)
    del key, score, flipped
    used = np.flatnonzero(won.any(axis=1) | lost.any(axis=1))
    largest = max(float(won.max(initial=0.0)), float(lost.max(initial=0.0)))
    exact32 = halves and used.size * largest < _EXACT_FLOAT32
    out = np.zeros((used.size, m * m), dtype=np.float32 if exact32 else np.float64)
    every = used.size == comp.n_tasks
    out[:, first * m + second] = won if every else won[used]
    out[:, second * m + first] = lost if every else lost[used]
    return out


@dataclass(frozen=True)
class BatchFits:
    """Log-strengths and raw win rates of many fits, (N, M) each, and how the fits ended."""

    log_strength: BatchModelVector
    raw_win_rate: BatchModelVector
    iterations_max: int
    n_converged: int

    @property
    def n_fits(self) -> int:
        return int(self.log_strength.shape[0])


def fit_batches(
    batches: Iterable[BatchPairMatrix],
    n_fits: int,
    n_models: int,
    prior: float,
    init: FloatArray,
    workers: int | None,
) -> BatchFits:
    """Fit each (k, M, M) batch of score matrices with `newton_bt`, keeping only the figures.

    Fits are independent, so batching does not change a bit of any result. The batches are
    formed inside the loop (they may be a generator), with BLAS on one thread.
    """
    beta = np.empty((n_fits, n_models))
    raw = np.empty((n_fits, n_models))
    iterations_max, converged, start = 0, 0, 0
    with single_threaded_blas():
        for wins in batches:
            stop = start + wins.shape[0]
            res = newton_bt(wins, prior=prior, init=init, workers=workers)
            beta[start:stop] = res.beta
            raw[start:stop] = raw_win_rate(wins)
            iterations_max = max(iterations_max, int(res.iterations.max(initial=0)))
            converged += int(res.converged.sum())
            start = stop
    if start != n_fits:
        raise ValueError(f"expected {n_fits} fits, the batches held {start}")
    return BatchFits(beta, raw, iterations_max, converged)
