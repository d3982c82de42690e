"""Pair designs: which (task, model pair) comparisons a run pays a judge for.

`all` judges every pair on every task. `random_design` draws K pairs per task, balanced so
every model appears about equally often, starting from a random path through all models so
the design is connected (Bradley-Terry needs neither all pairs nor a baseline, only a
connected design). `next_round` is the adaptive step: from the current ranking it gives the
next round's pairs to neighbouring models that are not yet separated and that the remaining
tasks can still separate, on tasks not yet judged for that pair, and says why for each.

Designs are arrays of rows (task, i, j) with i < j, model and task indices as in
`Comparisons`. Pure: numpy in, arrays and frozen dataclasses out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

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
    graph = coo_matrix(
        (np.ones(rows.shape[0]), (rows[:, 1], rows[:, 2])), shape=(n_models, n_models)
    )
    count, _ = connected_components(graph, directed=False)
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
    interval_low: npt.NDArray[np.float64],
    interval_high: npt.NDArray[np.float64],
    judged: BoolArray,
    pairs_left: int,
    round_pairs: int,
    seed: int,
    reach: float = 1.0,
    window: int = 1,
) -> RoundChoice:
    """The adaptive step: the next round's (task, pair) rows and each neighbour's reason.

    `order` is the ranking (best first), `supported[a, b]` whether "a above b" is claimed (the
    report's floors and sign test included), `interval_*[a, b]` the difference intervals,
    `judged[t, a, b]` (a < b) whether the pair is already in the design on task t. A
    neighbouring pair is separated when either ordering is supported; out of reach when every
    task has it already, or when its interval is so wide against its gap that even direct
    comparisons on every task would leave it over `reach` times the gap (the half-width
    shrinks as 1/sqrt(direct comparisons)); open otherwise. The round's `round_pairs` (at most
    `pairs_left`) are shared evenly among the open pairs, on tasks drawn at random from those
    not yet judged for each; what one cannot take goes to the others."""
    n_tasks = judged.shape[0]
    rng = np.random.default_rng(seed)
    choices: list[PairChoice] = []
    open_pairs: list[tuple[int, int, IntArray]] = []
    near = [
        (int(order[pos]), int(order[pos + gap]))
        for gap in range(1, window + 1)
        for pos in range(len(order) - gap)
    ]
    for up, low in near:
        i, j = min(up, low), max(up, low)
        free = np.flatnonzero(~judged[:, i, j])
        direct = n_tasks - free.size
        if supported[up, low] or supported[low, up]:
            choices.append(PairChoice(up, low, "separated", "the ordering is supported"))
            continue
        if free.size == 0:
            choices.append(PairChoice(up, low, "out of reach", "every task already judges it"))
            continue
        lo, hi = float(interval_low[up, low]), float(interval_high[up, low])
        gap, half = (hi + lo) / 2.0, (hi - lo) / 2.0
        if direct > 0 and gap != 0.0 and half * np.sqrt(direct / n_tasks) > reach * abs(gap):
            choices.append(
                PairChoice(
                    up, low, "out of reach",
                    f"interval [{lo:.2f}, {hi:.2f}] would stay about "
                    f"{half * np.sqrt(direct / n_tasks):.2f} wide (half) at all {n_tasks} tasks, "
                    f"more than {reach:g} x the gap {abs(gap):.2f}",
                )
            )  # fmt: skip
            continue
        open_pairs.append((up, low, free))
    if not open_pairs:
        return RoundChoice(
            np.zeros((0, 3), dtype=np.int64),
            tuple(choices),
            "every neighbouring pair is separated or out of reach",
        )
    if pairs_left <= 0:
        return RoundChoice(np.zeros((0, 3), dtype=np.int64), tuple(choices), "the budget is spent")
    quota = min(round_pairs, pairs_left)
    share = {(up, low): 0 for up, low, _ in open_pairs}
    room = {(up, low): free.size for up, low, free in open_pairs}
    while quota > 0 and any(share[p] < room[p] for p in share):
        for pair in share:
            if quota > 0 and share[pair] < room[pair]:
                share[pair] += 1
                quota -= 1
    rows: list[IntArray] = []
    for up, low, free in open_pairs:
        given = share[(up, low)]
        tasks = np.sort(rng.choice(free, size=given, replace=False))
        i, j = min(up, low), max(up, low)
        rows.append(np.stack([tasks, np.full(given, i), np.full(given, j)], axis=1))
        choices.append(
            PairChoice(
                up, low, "open",
                f"interval [{float(interval_low[up, low]):.2f}, "
                f"{float(interval_high[up, low]):.2f}] contains 0; {free.size} tasks left",
                given,
            )
        )  # fmt: skip
    design = np.concatenate(rows).astype(np.int64) if rows else np.zeros((0, 3), np.int64)
    return RoundChoice(design, tuple(choices), None)


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
