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

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .bt import (
    BatchModelVector,
    BatchPairMatrix,
    Comparisons,
    FloatArray,
    IntArray,
    PairMatrix,
    newton_bt,
    raw_win_rate,
    single_threaded_blas,
)
from .newton import shared_inverse

_BATCH_ELEMENTS = 1 << 20  # fits x max(M x M, tasks) formed at once: 8 MB in float64
_EXACT_FLOAT32 = float(1 << 22)  # sums of halves below this are exact in float32
_BLOCK_ELEMENTS = 1 << 18  # (tasks x pairs) counted at once while packing the scores
_SHARED_STEP_UNITS = 100  # jackknife of this many units or more: first steps share a curvature


def batch_rows(n_models: int, n_units: int = 0) -> int:
    """How many fits of `n_models` to form and fit at once, each drawn from `n_units` tasks."""
    return max(1, _BATCH_ELEMENTS // max(n_models * n_models, n_units))


def task_scores(comp: Comparisons) -> npt.NDArray[np.floating]:
    """Score matrices of the tasks holding a comparison, flattened: (U, M*M), in task order.

    Row u, entry a*M+b is the score of a against b on the u-th such task. Float32 when the
    sums of up to U tasks stay exact in it (scores in halves), else float64. Built a block
    of tasks at a time from one key per comparison on the M(M-1)/2 unordered pairs, so the
    working arrays stay small beside the result.
    """
    halves = bool(np.all((comp.score == 0.0) | (comp.score == 0.5) | (comp.score == 1.0)))
    scores, largest = _task_scores(comp, np.float32 if halves else np.float64)
    per_task = np.bincount(comp.task, minlength=comp.n_tasks)
    used = np.flatnonzero(per_task)
    if scores.dtype == np.float32 and used.size * largest >= _EXACT_FLOAT32:
        scores, _ = _task_scores(comp, np.float64)
    return scores if used.size == comp.n_tasks else scores[used]


def _task_scores(
    comp: Comparisons, dtype: type[np.floating]
) -> tuple[npt.NDArray[np.floating], float]:
    """(T, M*M) score matrices of every task in `dtype`, and the largest entry."""
    m, n_tasks = comp.n_models, comp.n_tasks
    first, second = np.triu_indices(m, k=1)
    n_pairs = first.size
    pair_of = np.zeros(m * m, dtype=np.int64)
    pair_of[first * m + second] = np.arange(n_pairs)
    upper, lower = first * m + second, second * m + first
    out = np.zeros((n_tasks, m * m), dtype=dtype)
    # Comparisons in task order (stable: within a task their order is kept), cut in blocks
    # of whole tasks.
    order = None
    if comp.task.size > 1 and bool(np.any(comp.task[1:] < comp.task[:-1])):
        order = np.argsort(comp.task, kind="stable")
    ends = np.cumsum(np.bincount(comp.task, minlength=n_tasks))
    block = max(1, _BLOCK_ELEMENTS // n_pairs)
    largest = 0.0
    for t0 in range(0, n_tasks, block):
        t1 = min(t0 + block, n_tasks)
        start, stop = (int(ends[t0 - 1]) if t0 else 0), int(ends[t1 - 1])
        rows = slice(start, stop) if order is None else order[start:stop]
        i, j, score = comp.i[rows], comp.j[rows], comp.score[rows]
        key = pair_of[np.minimum(i, j) * m + np.maximum(i, j)]
        key += (comp.task[rows] - t0) * n_pairs
        flipped = i > j
        size = (t1 - t0) * n_pairs
        # The score of the lower-numbered model of each pair, and of the other one.
        won = np.bincount(key, weights=np.where(flipped, 1.0 - score, score), minlength=size)
        lost = np.bincount(key, weights=np.where(flipped, score, 1.0 - score), minlength=size)
        largest = max(largest, float(won.max(initial=0.0)), float(lost.max(initial=0.0)))
        part = out[t0:t1]
        part[:, upper] = won.reshape(t1 - t0, n_pairs)
        part[:, lower] = lost.reshape(t1 - t0, n_pairs)
    return out, largest


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
    first_step: FloatArray | None = None,
    offsets: FloatArray | None = None,
) -> BatchFits:
    """Fit each (k, M, M) batch of score matrices with `newton_bt`, keeping only the figures.

    Fits are independent, so batching does not change a bit of any result. The batches are
    formed inside the loop (they may be a generator), with BLAS on one thread. `first_step`
    goes to `newton_bt`, and so do `offsets` (n_fits, M), a batch at a time.
    """
    beta = np.empty((n_fits, n_models))
    raw = np.empty((n_fits, n_models))
    iterations_max, converged, start = 0, 0, 0
    with single_threaded_blas():
        for wins in batches:
            stop = start + wins.shape[0]
            offset = None if offsets is None else offsets[start:stop]
            res = newton_bt(wins, prior=prior, init=init, workers=workers, first_step=first_step,
                            offset=offset)
            beta[start:stop] = res.beta
            raw[start:stop] = raw_win_rate(wins)
            iterations_max = max(iterations_max, int(res.iterations.max(initial=0)))
            converged += int(res.converged.sum())
            start = stop
    if start != n_fits:
        raise ValueError(f"expected {n_fits} fits, the batches held {start}")
    return BatchFits(beta, raw, iterations_max, converged)


def task_weights(n_tasks: int, n_resamples: int, seed: int) -> IntArray:
    """How many times each task is drawn in each resample, (B, T); seeded."""
    batches = list(task_weight_batches(n_tasks, n_resamples, seed, max(1, n_resamples)))
    if not batches:
        return np.zeros((0, n_tasks), dtype=np.int64)
    return batches[0]


def task_weight_batches(n_tasks: int, n_resamples: int, seed: int, rows: int) -> Iterator[IntArray]:
    """`task_weights` a batch of `rows` resamples at a time, drawn from one generator in
    order, so that the batches together are exactly `task_weights(n_tasks, n_resamples, seed)`."""
    rng = np.random.default_rng(seed)
    for start in range(0, n_resamples, rows):
        k = min(rows, n_resamples - start)
        drawn = rng.integers(0, n_tasks, size=(k, n_tasks))
        drawn += n_tasks * np.arange(k)[:, None]
        weights: IntArray = np.bincount(drawn.ravel(), minlength=k * n_tasks).reshape(k, n_tasks)
        yield weights


def resampled_wins(
    scores: npt.NDArray[np.floating], n_resamples: int, seed: int, n_models: int
) -> Iterator[BatchPairMatrix]:
    """The task bootstrap's score matrices (k, M, M), a batch at a time: the resamples'
    task weights (`task_weight_batches`) times the per-task scores (`task_scores`). Exact
    sums, so the same bits whatever the batch size; every fit of a task bootstrap (plain or
    style-controlled) is fitted to these."""
    rows = batch_rows(n_models, scores.shape[0])
    for weights in task_weight_batches(scores.shape[0], n_resamples, seed, rows):
        yield (weights.astype(scores.dtype) @ scores).astype(np.float64).reshape(
            -1, n_models, n_models
        )


def left_out_wins(
    scores: npt.NDArray[np.floating], wins_all: PairMatrix
) -> Iterator[BatchPairMatrix]:
    """The jackknife's score matrices, each task left out in turn, a batch at a time."""
    m = wins_all.shape[0]
    rows = batch_rows(m, scores.shape[0])
    flat_all = wins_all.reshape(1, m * m)
    for k in range(0, scores.shape[0], rows):
        yield (flat_all - scores[k : k + rows]).reshape(-1, m, m)


def jackknife_first_step(
    wins_all: PairMatrix, init: FloatArray, prior: float, n_jack: int
) -> PairMatrix | None:
    """The first step every jackknife fit shares (`newton_bt`'s `first_step`), or None.

    Each jackknife fit leaves out one unit of many: the full data's curvature at the point
    estimate is close to its own, so it takes the first step of all of them."""
    return shared_inverse(wins_all, init, prior) if n_jack >= _SHARED_STEP_UNITS else None
