"""Pair outcomes and what is counted from them: the score matrices of a run and of each task,
and the win probabilities and win rates of given log-strengths. What the Bradley-Terry fit
(newton.py) and every other estimator of konkord/stats start from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

FloatArray: TypeAlias = npt.NDArray[np.float64]
IntArray: TypeAlias = npt.NDArray[np.int64]
BoolArray: TypeAlias = npt.NDArray[np.bool_]
# Shapes, by name: M models, T tasks, B resamples (a batch of fits), C comparisons.
ModelVector: TypeAlias = FloatArray  # (M,)
PairMatrix: TypeAlias = FloatArray  # (M, M), [a, b] = score of a against b
BatchModelVector: TypeAlias = FloatArray  # (B, M)
BatchPairMatrix: TypeAlias = FloatArray  # (B, M, M)
TaskPairMatrix: TypeAlias = FloatArray  # (T, M, M)

CHUNK_ELEMENTS = 1 << 20  # (fits x M x M) per chunk: 8 MB per temporary
_BLOCK_ROWS = 1 << 18  # comparisons counted at once


@dataclass(frozen=True)
class Comparisons:
    """Pair outcomes: parallel arrays, one entry per (task, model pair) outcome.

    `score` is 1 when model `i` won, 0.5 for a tie (a flipped pair counts as one), 0 when
    model `j` won. Build with `comparisons(...)`, which checks shapes and ranges.
    """

    task: IntArray  # (C,)
    i: IntArray  # (C,)
    j: IntArray  # (C,)
    score: FloatArray  # (C,)
    n_models: int
    n_tasks: int

    def __len__(self) -> int:
        return int(self.score.shape[0])


def index_arrays(
    names: tuple[str, str, str, str],
    arrays: tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike, npt.ArrayLike],
    n_models: int,
    n_tasks: int,
    unit: str,
) -> tuple[IntArray, IntArray, IntArray, FloatArray]:
    """Flatten (task, model, model, score) arrays and check lengths, index ranges and that no
    model meets itself; the ValueError names the first bad entry. Shared by every packer."""
    t = np.asarray(arrays[0], dtype=np.int64).reshape(-1)
    a = np.asarray(arrays[1], dtype=np.int64).reshape(-1)
    b = np.asarray(arrays[2], dtype=np.int64).reshape(-1)
    s = np.asarray(arrays[3], dtype=np.float64).reshape(-1)
    if not (t.shape == a.shape == b.shape == s.shape):
        raise ValueError(
            f"{', '.join(names[:3])} and {names[3]} must have one length; "
            f"got {t.size}, {a.size}, {b.size}, {s.size}"
        )
    for name, arr, bound in (
        (names[0], t, n_tasks),
        (names[1], a, n_models),
        (names[2], b, n_models),
    ):
        bad = np.flatnonzero((arr < 0) | (arr >= bound))
        if bad.size:
            raise ValueError(f"{name}[{bad[0]}] = {arr[bad[0]]} is outside 0..{bound - 1}")
    same = np.flatnonzero(a == b)
    if same.size:
        raise ValueError(f"{unit} {same[0]} pits model {a[same[0]]} against itself")
    return t, a, b, s


def comparisons(
    task: npt.ArrayLike,
    i: npt.ArrayLike,
    j: npt.ArrayLike,
    score: npt.ArrayLike,
    n_models: int,
    n_tasks: int,
) -> Comparisons:
    """Validate and pack pair outcomes; raises ValueError naming the first bad entry."""
    t, a, b, s = index_arrays(
        ("task", "i", "j", "score"), (task, i, j, score), n_models, n_tasks, "comparison"
    )
    bad = np.flatnonzero(~((s >= 0.0) & (s <= 1.0)))
    if bad.size:
        raise ValueError(f"score[{bad[0]}] = {s[bad[0]]} is outside 0..1")
    return Comparisons(t, a, b, s, int(n_models), int(n_tasks))


def task_win_matrices(comp: Comparisons) -> TaskPairMatrix:
    """Per-task score matrices, [t, a, b] = score of a against b on task t (aggregated once)."""
    m, n_t = comp.n_models, comp.n_tasks
    size = n_t * m * m
    forward = (comp.task * m + comp.i) * m + comp.j
    backward = (comp.task * m + comp.j) * m + comp.i
    flat = np.bincount(forward, weights=comp.score, minlength=size)
    flat += np.bincount(backward, weights=1.0 - comp.score, minlength=size)
    out: TaskPairMatrix = flat.astype(np.float64).reshape(n_t, m, m)
    return out


def win_matrix(comp: Comparisons) -> PairMatrix:
    """The score matrix of the whole run, [a, b] = score of a against b.

    Counted a block of comparisons at a time, so that millions of them need no temporary
    arrays as long as they are (sums of halves are exact in any order).
    """
    m = comp.n_models
    flat = np.zeros(m * m)
    for start in range(0, len(comp), _BLOCK_ROWS):
        rows = slice(start, start + _BLOCK_ROWS)
        i, j, score = comp.i[rows], comp.j[rows], comp.score[rows]
        flat += np.bincount(i * m + j, weights=score, minlength=m * m)
        flat += np.bincount(j * m + i, weights=1.0 - score, minlength=m * m)
    out: PairMatrix = flat.reshape(m, m)
    return out


def win_probability(beta: FloatArray) -> FloatArray:
    """Fitted P(a beats b) for log-strengths of shape (..., M); returns (..., M, M)."""
    diff = beta[..., :, None] - beta[..., None, :]
    return _sigmoid(diff)


def expected_win_rate(beta: FloatArray) -> FloatArray:
    """Mean over the other models of the fitted win probability; shape (..., M)."""
    m = beta.shape[-1]
    if m < 2:
        return np.full(beta.shape, np.nan)
    flat = beta.reshape(-1, m)
    out = np.empty(flat.shape)
    rows = max(1, (CHUNK_ELEMENTS // 4) // (m * m))  # keep the (rows, M, M) block in cache
    for start in range(0, flat.shape[0], rows):
        part = flat[start : start + rows]
        # P(a beats b) = e_a / (e_a + e_b) with e = exp(beta - max beta): M exponentials per
        # row instead of M^2 libm tanh calls (20 ns each, unvectorised). Rows that are not
        # finite or span more than 700 (where e would underflow) take the sigmoid.
        span = part.max(axis=1) - part.min(axis=1)
        if not np.all(span <= 700.0):
            prob = win_probability(part)
            out[start : start + rows] = (prob.sum(axis=-1) - 0.5) / (m - 1)
            continue
        e = np.exp(part - part.max(axis=1, keepdims=True))
        inv = np.add(e[:, :, None], e[:, None, :])
        np.reciprocal(inv, out=inv)
        out[start : start + rows] = (e * inv.sum(axis=-1) - 0.5) / (m - 1)
    result: FloatArray = out.reshape(beta.shape)
    return result


def raw_win_rate(wins: FloatArray) -> FloatArray:
    """(wins + ties/2) / comparisons from score matrices (..., M, M); NaN with no comparisons."""
    total = wins.sum(axis=-1)
    count = total + wins.sum(axis=-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: FloatArray = np.where(count > 0, total / np.where(count > 0, count, 1.0), np.nan)
    return out


def _sigmoid(x: FloatArray) -> FloatArray:
    out: FloatArray = 0.5 * (1.0 + np.tanh(0.5 * x))
    return out
