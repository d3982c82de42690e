"""Pair designs: which (task, model pair) comparisons a run pays a judge for.

`all` judges every pair on every task. `random_design` draws K pairs per task, balanced so
every model appears about equally often, starting from a random path through all models so
the design is connected (Bradley-Terry needs neither all pairs nor a baseline, only a
connected design). `next_round` is the adaptive step: from the current ranking it spends the
next round on the neighbouring models that are not yet separated and that the remaining tasks
can still separate, where the comparisons raise the expected number separated the most
(`allocation.allocate`; pairs up to two ranks apart count as routes), on tasks not yet judged
for each pair, and says why for each neighbour.

Designs are arrays of rows (task, i, j) with i < j, model and task indices as in
`Comparisons`. Pure: numpy in, arrays and frozen dataclasses out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .allocation import allocate, information
from .components import connected_components
from .ranking import PairwiseDifferences
from .resample import critical_value

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def all_pairs(n_models: int, n_tasks: int) -> IntArray:
    """Every pair on every task: the `all` design."""
    a, b = np.triu_indices(n_models, k=1)
    task = np.repeat(np.arange(n_tasks), a.size)
    return np.stack([task, np.tile(a, n_tasks), np.tile(b, n_tasks)], axis=1).astype(np.int64)


def is_connected(n_models: int, design: IntArray) -> bool:
    """Whether every model is linked to every other through the design's pairs."""
    if n_models <= 1:
        return True
    rows = np.asarray(design, dtype=np.int64).reshape(-1, 3)
    graph = np.zeros((n_models, n_models), dtype=bool)
    graph[rows[:, 1], rows[:, 2]] = True
    count, _ = connected_components(graph)
    return bool(count == 1)


def random_design(n_models: int, n_tasks: int, k: int, seed: int) -> IntArray:
    """K pairs on each task, every model about equally often, connected; seeded.

    The first n_models - 1 pairs form a random path through all models (spread over the first
    tasks), so the design is connected; the rest go, pick by pick, to the pair whose models
    have appeared least, then to the pair met least, ties broken at random. Raises ValueError
    when K pairs per task cannot connect the models or K exceeds the pairs there are."""
    n_pairs = n_models * (n_models - 1) // 2
    if n_models < 2 or n_tasks < 1:
        raise ValueError("a design needs at least two models and one task")
    if not 1 <= k <= n_pairs:
        raise ValueError(f"K = {k} pairs per task: it must be 1 to {n_pairs} ({n_models} models)")
    if k * n_tasks < n_models - 1:
        raise ValueError(
            f"K = {k} pairs per task on {n_tasks} tasks cannot connect {n_models} models "
            f"(it takes at least {n_models - 1} pairs)"
        )
    rng = np.random.default_rng(seed)
    path = rng.permutation(n_models)
    seen = np.zeros(n_models)
    met = np.zeros((n_models, n_models))
    taken = np.zeros((n_models, n_models), dtype=bool)
    rows: list[tuple[int, int, int]] = []
    upper = np.triu(np.ones((n_models, n_models), dtype=bool), k=1)
    step = 0
    for task in range(n_tasks):
        taken[:] = False
        for _ in range(k):
            if step < n_models - 1:
                i, j = sorted((int(path[step]), int(path[step + 1])))
                step += 1
            else:
                cost = seen[:, None] + seen[None, :] + 1e-3 * met
                cost = cost + 1e-6 * rng.random(cost.shape)
                cost[~upper | taken] = np.inf
                flat = int(np.argmin(cost))
                i, j = divmod(flat, n_models)
            rows.append((task, i, j))
            taken[i, j] = True
            seen[[i, j]] += 1
            met[i, j] += 1
    return np.asarray(rows, dtype=np.int64).reshape(-1, 3)


@dataclass(frozen=True)
class PairChoice:
    """One neighbouring pair at one round: what the design does with it, and why."""

    upper: int
    lower: int
    status: str  # "separated" | "open" | "out of reach"
    reason: str
    tasks_given: int = 0


@dataclass(frozen=True)
class RoundChoice:
    """The next round: its rows (task, i, j), each neighbouring pair's choice, and why the
    design stops (None when it goes on)."""

    design: IntArray
    pairs: tuple[PairChoice, ...]
    stop: str | None


def next_round(
    order: IntArray,
    supported: BoolArray,
    differences: PairwiseDifferences,
    judged: BoolArray,
    pairs_left: int,
    round_pairs: int,
    seed: int,
    window: int = 2,
    widen: float = 1.0,
) -> RoundChoice:
    """The adaptive step: the next round's (task, pair) rows and each neighbour's reason.

    `order` is the ranking (best first), `supported[a, b]` whether "a above b" is claimed (the
    report's floors and sign test included), `differences` the difference intervals,
    `judged[t, a, b]` (a < b) whether the pair is already in the design on task t. A
    neighbouring pair is separated when either ordering is supported; out of reach when every
    task has it already, or when even all of its free tasks judged directly would leave an
    interval around the gap observed that still holds 0 (the standard error scaled by the
    Bradley-Terry information); open otherwise. The round's `round_pairs` (at most
    `pairs_left`) go to pairs up to `window` ranks apart by `allocation.allocate`: where they
    most raise the expected number of open neighbours separated, on tasks drawn at random
    from those not yet judged for each pair. `widen` is the family-wise bar the ranking's
    claims are held to (`Ranking.family.final_factor`): a pair is separated when its interval
    widened that much excludes 0, so reach and allocation are judged against it."""
    n_tasks, m = judged.shape[0], judged.shape[1]
    rng = np.random.default_rng(seed)
    estimate, lower, upper = differences.estimate, differences.lower, differences.upper
    crit = critical_value(differences.level, max(2, int(judged.any(axis=(1, 2)).sum())))
    bar = crit * widen
    counts = judged.sum(axis=0).astype(np.float64)
    counts = counts + counts.T
    free = n_tasks - counts.astype(np.int64)
    choices: list[PairChoice] = []
    open_pairs: list[tuple[int, int]] = []
    for pos in range(len(order) - 1):
        up, low = int(order[pos]), int(order[pos + 1])
        lo, hi = float(lower[up, low]), float(upper[up, low])
        span = f"interval [{lo:.2f}, {hi:.2f}]"
        if supported[up, low] or supported[low, up]:
            choices.append(PairChoice(up, low, "separated", "the ordering is supported"))
            continue
        if free[up, low] == 0:
            choices.append(PairChoice(up, low, "out of reach", "every task already judges it"))
            continue
        se = max((hi - lo) / (2.0 * crit), 1e-9)
        more = np.zeros((m, m))
        more[up, low] = more[low, up] = int(free[up, low])
        model_now = _model_se(counts, estimate, up, low)
        best = se * _model_se(counts + more, estimate, up, low) / model_now
        if abs(float(estimate[up, low])) <= bar * best:
            choices.append(PairChoice(
                up, low, "out of reach",
                f"{span}: even {int(more[up, low])} more direct comparisons would leave "
                f"about +-{bar * best:.2f} around the gap {abs(float(estimate[up, low])):.2f}",
            ))  # fmt: skip
            continue
        open_pairs.append((up, low))
    if not open_pairs:
        return RoundChoice(
            np.zeros((0, 3), dtype=np.int64),
            tuple(choices),
            "every neighbouring pair is separated or out of reach",
        )
    if pairs_left <= 0:
        return RoundChoice(np.zeros((0, 3), dtype=np.int64), tuple(choices), "the budget is spent")
    rank_of = np.empty(m, dtype=np.int64)
    rank_of[order] = np.arange(len(order))
    a, b = np.triu_indices(m, k=1)
    near = (np.abs(rank_of[a] - rank_of[b]) <= window) & (free[a, b] > 0)
    candidates = np.stack([a[near], b[near]], axis=1).astype(np.int64)
    neighbours = np.asarray(open_pairs, dtype=np.int64)
    se_now = np.array(
        [(upper[u, v] - lower[u, v]) / (2.0 * crit) for u, v in open_pairs], dtype=np.float64
    )
    given = allocate(
        neighbours, estimate, np.maximum(se_now, 1e-9), counts,
        free[candidates[:, 0], candidates[:, 1]].astype(np.float64),
        min(round_pairs, pairs_left), bar, candidates,
    )  # fmt: skip
    rows: list[IntArray] = []
    # Pairs that share a model go to the same tasks where they can: on those tasks the sign
    # test sees each model in several comparisons, against opponents the other met too.
    touched = np.zeros((n_tasks, m))
    for (i, j), count in sorted(given.items(), key=lambda item: (-item[1], item[0])):
        pull = touched[:, i] + touched[:, j] + rng.random(n_tasks)
        pull[judged[:, i, j]] = -np.inf
        tasks = np.sort(np.argsort(-pull, kind="stable")[:count])
        touched[tasks, i] += 1.0
        touched[tasks, j] += 1.0
        rows.append(np.stack([tasks, np.full(count, i), np.full(count, j)], axis=1))
    for up, low in open_pairs:
        i, j = min(up, low), max(up, low)
        choices.append(
            PairChoice(
                up, low, "open",
                f"interval [{float(lower[up, low]):.2f}, {float(upper[up, low]):.2f}] "
                f"contains 0; {int(free[i, j])} tasks left",
                given.get((i, j), 0),
            )
        )  # fmt: skip
    if not rows:
        return RoundChoice(
            np.zeros((0, 3), dtype=np.int64), tuple(choices),
            "no task is left for the pairs near the open neighbours",
        )  # fmt: skip
    return RoundChoice(np.concatenate(rows).astype(np.int64), tuple(choices), None)


def _model_se(
    counts: npt.NDArray[np.float64], estimate: npt.NDArray[np.float64], up: int, low: int
) -> float:
    """The Bradley-Terry standard error of beta_up - beta_low under `counts`."""
    x = np.zeros(counts.shape[0])
    x[up], x[low] = 1.0, -1.0
    variance = float(x @ np.linalg.solve(information(counts, estimate), x))
    return float(np.sqrt(max(variance, 1e-18)))


def start_pairs_per_task(n_models: int, n_tasks: int, budget_pairs: int, share: float = 0.7) -> int:
    """K for an adaptive design's balanced start: about `share` of the budget, at least
    enough pairs to connect the models. Raises ValueError when the whole budget cannot."""
    if budget_pairs < n_models - 1:
        raise ValueError(
            f"a budget of {budget_pairs} pair judgings cannot connect {n_models} models "
            f"(it takes at least {n_models - 1})"
        )
    n_pairs = n_models * (n_models - 1) // 2
    k = max(1, int(share * budget_pairs) // max(1, n_tasks))
    while k * n_tasks < n_models - 1:
        k += 1
    return min(k, n_pairs)
