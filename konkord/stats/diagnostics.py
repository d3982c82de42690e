"""Diagnostics that say whether the judge and the design can be trusted.

Order flips and the positional split need the judge's single calls (`Verdicts`, one per
task, pair and order); cycles and connectivity use the combined outcomes (`Comparisons`);
consistency uses the fitted log-strengths.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .bt import (
    Comparisons,
    FloatArray,
    IntArray,
    ModelVector,
    PairMatrix,
    fit_bt_wins,
    index_arrays,
    task_win_matrices,
    win_matrix,
    win_probability,
)
from .components import connected_components
from .special import ndtri


@dataclass(frozen=True)
class Verdicts:
    """The judge's single calls: parallel arrays, one entry per (task, pair, order).

    `first` is the model shown as Answer 1, `second` the other; `score_first` is 1 when the
    first-shown answer won, 0.5 for a tie, 0 when the second won.
    """

    task: IntArray
    first: IntArray
    second: IntArray
    score_first: FloatArray
    n_models: int
    n_tasks: int

    def __len__(self) -> int:
        return int(self.score_first.shape[0])


def verdicts(
    task: npt.ArrayLike,
    first: npt.ArrayLike,
    second: npt.ArrayLike,
    score_first: npt.ArrayLike,
    n_models: int,
    n_tasks: int,
) -> Verdicts:
    """Validate and pack single calls; at most one call per (task, pair, order)."""
    t, a, b, s = index_arrays(
        ("task", "first", "second", "score_first"),
        (task, first, second, score_first),
        n_models,
        n_tasks,
        "call",
    )
    if not np.all(np.isin(s, (0.0, 0.5, 1.0))):
        raise ValueError("score_first must be 0, 0.5 or 1")
    key = (t * n_models + a) * n_models + b
    uniq, counts = np.unique(key, return_counts=True)
    if np.any(counts > 1):
        k = int(uniq[counts > 1][0])
        raise ValueError(
            f"task {k // (n_models * n_models)}: models {(k // n_models) % n_models} and "
            f"{k % n_models} were judged twice in the same order"
        )
    return Verdicts(t, a, b, s, int(n_models), int(n_tasks))


@dataclass(frozen=True)
class FlipRates:
    """How often the verdict changed when the answers swapped places.

    Only (task, pair)s judged in both orders count; a flip is any disagreement in model terms
    (a win against a tie included), which is also when the combined verdict becomes a tie.
    """

    overall: float  # NaN when no pair was judged in both orders
    n_flipped: int
    n_pairs: int
    per_pair: PairMatrix  # symmetric, NaN where no pair was judged in both orders
    pair_count: IntArray  # (M, M) pairs judged in both orders
    per_task: FloatArray  # (T,), NaN where none
    task_count: IntArray  # (T,)

    def worst_pairs(self, k: int = 3) -> list[tuple[int, int, float, int]]:
        """The k pairs (a, b, rate, count) with the highest flip rate, a < b."""
        a, b = np.triu_indices(self.per_pair.shape[0], k=1)
        rate = self.per_pair[a, b]
        keep = np.flatnonzero(~np.isnan(rate))
        ranked = keep[np.lexsort((-self.pair_count[a[keep], b[keep]], -rate[keep]))][:k]
        return [
            (int(a[x]), int(b[x]), float(rate[x]), int(self.pair_count[a[x], b[x]])) for x in ranked
        ]


def flip_rates(calls: Verdicts) -> FlipRates:
    """Order-flip rate overall, per model pair and per task."""
    m, n_t = calls.n_models, calls.n_tasks
    lo = np.minimum(calls.first, calls.second)
    hi = np.maximum(calls.first, calls.second)
    lo_first = calls.first == lo
    score_lo = np.where(lo_first, calls.score_first, 1.0 - calls.score_first)
    key = (calls.task * m + lo) * m + hi
    size = n_t * m * m
    fwd = np.full(size, np.nan)
    bwd = np.full(size, np.nan)
    fwd[key[lo_first]] = score_lo[lo_first]
    bwd[key[~lo_first]] = score_lo[~lo_first]
    both = np.flatnonzero(~np.isnan(fwd) & ~np.isnan(bwd))
    flipped = fwd[both] != bwd[both]
    t_idx = both // (m * m)
    pair = both % (m * m)
    pair_count = np.bincount(pair, minlength=m * m).reshape(m, m)
    pair_flips = np.bincount(pair, weights=flipped, minlength=m * m).reshape(m, m)
    pair_count = pair_count + pair_count.T
    pair_flips = pair_flips + pair_flips.T
    task_count = np.bincount(t_idx, minlength=n_t)
    task_flips = np.bincount(t_idx, weights=flipped, minlength=n_t)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_pair = np.where(pair_count > 0, pair_flips / np.maximum(pair_count, 1), np.nan)
        per_task = np.where(task_count > 0, task_flips / np.maximum(task_count, 1), np.nan)
    n_pairs = int(both.size)
    n_flipped = int(flipped.sum())
    return FlipRates(
        overall=n_flipped / n_pairs if n_pairs else float("nan"),
        n_flipped=n_flipped,
        n_pairs=n_pairs,
        per_pair=per_pair,
        pair_count=pair_count.astype(np.int64),
        per_task=per_task,
        task_count=task_count.astype(np.int64),
    )


@dataclass(frozen=True)
class PositionSplit:
    """Share of decided calls (not ties) won by the answer shown first; 0.5 is unbiased."""

    share_first: float  # NaN when no call was decided
    first_won: int
    decided: int
    ties: int
    wilson_low: float
    wilson_high: float


def wilson_interval(
    successes: float, n: float, level: float = 0.95, critical: float | None = None
) -> tuple[float, float]:
    """Wilson score interval of a proportion; (nan, nan) when n is 0. `critical` replaces
    the normal critical value of `level` (e.g. a few-cluster one, 18 at 2 clusters)."""
    if n == 0:
        return float("nan"), float("nan")
    z = float(ndtri(0.5 + level / 2.0)) if critical is None else critical
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At k = 0 or k = n the bound is exactly 0 or 1; floating point gives 1.0000000000000002.
    low = 0.0 if successes <= 0 else max(0.0, float(centre - half))
    high = 1.0 if successes >= n else min(1.0, float(centre + half))
    return low, high


def position_split(calls: Verdicts) -> PositionSplit:
    """How often the first-shown answer won among decided calls, with a Wilson interval."""
    decided = calls.score_first != 0.5
    n = int(decided.sum())
    first_won = int((calls.score_first == 1.0).sum())
    low, high = wilson_interval(first_won, n)
    return PositionSplit(
        share_first=first_won / n if n else float("nan"),
        first_won=first_won,
        decided=n,
        ties=len(calls) - n,
        wilson_low=low,
        wilson_high=high,
    )


@dataclass(frozen=True)
class CycleStats:
    """Intransitive triples within tasks: a beat b, b beat c, c beat a on one task.

    Only triples whose three pairs were all compared on the task count; a triple is decided
    when none of its three outcomes is a tie, and only decided triples can be cycles.
    """

    rate: float  # cyclic / decided; NaN when no triple was decided
    cyclic: int
    decided: int
    undecided: int
    per_task_cyclic: IntArray  # (T,)
    per_task_decided: IntArray  # (T,)
    per_task_undecided: IntArray  # (T,)

    @property
    def per_task_rate(self) -> FloatArray:
        with np.errstate(invalid="ignore", divide="ignore"):
            out: FloatArray = np.where(
                self.per_task_decided > 0,
                self.per_task_cyclic / np.maximum(self.per_task_decided, 1),
                np.nan,
            )
        return out


def _triangles(adj: FloatArray) -> FloatArray:
    """trace(A^3) per task for (T, M, M) matrices."""
    out: FloatArray = np.einsum("tij,tjk,tki->t", adj, adj, adj, optimize=True)
    return out


def cycle_rate(comp: Comparisons) -> CycleStats:
    """Per-task cycle counts over decided triples, with the count of undecided ones."""
    per_task = task_win_matrices(comp)
    transposed = np.swapaxes(per_task, 1, 2)
    compared = ((per_task + transposed) > 0).astype(np.float64)
    beat = (per_task > transposed).astype(np.float64)
    decided_edges = beat + np.swapaxes(beat, 1, 2)
    cyclic = np.rint(_triangles(beat) / 3.0).astype(np.int64)
    decided = np.rint(_triangles(decided_edges) / 6.0).astype(np.int64)
    complete = np.rint(_triangles(compared) / 6.0).astype(np.int64)
    undecided = complete - decided
    total_decided = int(decided.sum())
    total_cyclic = int(cyclic.sum())
    return CycleStats(
        rate=total_cyclic / total_decided if total_decided else float("nan"),
        cyclic=total_cyclic,
        decided=total_decided,
        undecided=int(undecided.sum()),
        per_task_cyclic=cyclic,
        per_task_decided=decided,
        per_task_undecided=undecided,
    )


class DisconnectedGraphError(ValueError):
    """The comparison graph falls apart, so no common scale exists; the message names parts."""

    def __init__(self, components: tuple[tuple[int, ...], ...], names: Sequence[str]) -> None:
        self.components = components
        parts = "; ".join("{" + ", ".join(names[k] for k in comp) + "}" for comp in components)
        super().__init__(
            f"the comparison graph is disconnected into {len(components)} groups that were "
            f"never compared with each other: {parts}. Compare at least one pair across "
            "groups, or rank each group separately."
        )


@dataclass(frozen=True)
class Connectivity:
    """Connected components of the comparison graph, each sorted, ordered by first member."""

    components: tuple[tuple[int, ...], ...]

    @property
    def connected(self) -> bool:
        return len(self.components) <= 1

    def require_connected(self, names: Sequence[str] | None = None) -> None:
        """Raise DisconnectedGraphError naming the components, if there is more than one."""
        if not self.connected:
            n = sum(len(c) for c in self.components)
            labels = list(names) if names is not None else [f"model {k}" for k in range(n)]
            raise DisconnectedGraphError(self.components, labels)


def connectivity(comp: Comparisons) -> Connectivity:
    """Which models are linked, directly or through others, by at least one comparison."""
    wins = win_matrix(comp)
    n, labels = connected_components((wins + wins.T) > 0)
    groups: dict[int, list[int]] = {}
    for model, label in enumerate(labels.tolist()):
        groups.setdefault(label, []).append(model)
    ordered = sorted((tuple(g) for g in groups.values()), key=lambda g: g[0])
    assert len(ordered) == n
    return Connectivity(tuple(ordered))


def disconnected_resamples(wins: npt.NDArray[np.float64], active: npt.NDArray[np.bool_]) -> int:
    """How many of a batch of score matrices (B, M, M) leave the `active` models (those with
    comparisons in the data) in more than one part: a resample that drew no task linking two
    parts. Identical graphs are checked once (most resamples share the full data's graph)."""
    keep = np.flatnonzero(active)
    if keep.size < 2 or wins.shape[0] == 0:
        return 0
    sub = wins if keep.size == wins.shape[1] else wins[:, keep][:, :, keep]
    linked = (sub + np.swapaxes(sub, 1, 2)) > 0
    packed = np.packbits(linked.reshape(linked.shape[0], -1), axis=1)
    # Counted by their bytes: np.unique(axis=0) sorts the rows as structured records, which
    # took most of a second per thousand resamples at 150 models.
    counts: dict[bytes, int] = {}
    for row in packed:
        key = row.tobytes()
        counts[key] = counts.get(key, 0) + 1
    k = keep.size
    disconnected = 0
    for key, count in counts.items():
        graph = np.unpackbits(np.frombuffer(key, dtype=np.uint8))[: k * k].reshape(k, k)
        n_parts, _ = connected_components(graph)
        disconnected += count if n_parts > 1 else 0
    return disconnected


@dataclass(frozen=True)
class Consistency:
    """Fitted P(model beats the one ranked just below it), for each adjacent pair."""

    order: IntArray  # models best first
    adjacent: FloatArray  # (M-1,) P(order[k] beats order[k+1])
    mean: float  # NaN with fewer than two models


CONSISTENCY_PRIOR = 1e-3


def consistency_of_wins(wins: PairMatrix) -> Consistency:
    """Consistency on its source's scale: of a fit whose prior only keeps it finite.

    The ranking's prior (half a win and loss against the average) caps the figure: a judge
    that orders every pair cleanly scored 0.82 with 2 models, 0.74 with 5 and 0.68 with 12
    on one task, so the figure fell with the number of models, not with the judge. Fitted
    with a prior of 0.001, that judge scores 0.99-1.00 for 2 to 40 models, and 50% keeps
    meaning neighbours no judge could tell apart.
    """
    return consistency(fit_bt_wins(wins, prior=CONSISTENCY_PRIOR).log_strength)


def consistency(log_strength: ModelVector) -> Consistency:
    """Mean fitted win probability of each model over the next one down."""
    beta = np.asarray(log_strength, dtype=np.float64)
    order = np.argsort(-beta, kind="stable").astype(np.int64)
    prob = win_probability(beta)
    adjacent = prob[order[:-1], order[1:]]
    return Consistency(
        order=order,
        adjacent=adjacent,
        mean=float(adjacent.mean()) if adjacent.size else float("nan"),
    )
