"""Speed of the statistics engine, end to end from pair outcomes to intervals and rank groups.

Prints, in one run:
- 20 models x 1,000 tasks (190,000 pair outcomes), 1,000 task-bootstrap resamples;
- the same work done the slow ways, timed on a few resamples and scaled to 1,000: a plain
  loop refitting with choix.ilsr_pairwise per resample, and a loop of MM fits (Hunter 2004)
  on counts re-aggregated per resample;
- 100 models x 200 tasks (990,000 pair outcomes), 1,000 resamples.

Run: python benchmarks/bench_stats.py [--choix-resamples 2] [--mm-resamples 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import choix
import numpy as np

from konkord.stats.bt import comparisons, win_matrix
from konkord.stats.ranking import rank
from konkord.stats.resample import bootstrap, task_weights
from konkord.stats.simfield import simulate_field


def end_to_end(arrays: tuple[np.ndarray, ...], n_models: int, n_tasks: int) -> dict[str, float]:
    """Pair outcomes -> fit, 1,000 resamples, all intervals, pairwise differences, groups."""
    marks = {"start": time.perf_counter()}
    comp = comparisons(*arrays, n_models, n_tasks)
    boot = bootstrap(comp, n_resamples=1000, seed=0)
    marks["bootstrap"] = time.perf_counter()
    boot.intervals()
    marks["intervals"] = time.perf_counter()
    rank(boot)
    marks["ranking"] = time.perf_counter()
    assert boot.n_converged == boot.n_fits, "some fits did not converge"
    return {
        "bootstrap": marks["bootstrap"] - marks["start"],
        "intervals": marks["intervals"] - marks["bootstrap"],
        "ranking": marks["ranking"] - marks["intervals"],
        "total": marks["ranking"] - marks["start"],
        "iterations": boot.iterations_max,
    }


def timed(repeats: int, work: Callable[[], dict[str, float]]) -> dict[str, float]:
    """Median of each figure over `repeats` runs (the machine is shared)."""
    runs = [work() for _ in range(repeats)]
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def resampled_rows(task: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Row indices of the comparisons in one task resample (tasks repeated by weight)."""
    order = np.argsort(task, kind="stable")
    starts = np.searchsorted(task[order], np.arange(weights.size + 1))
    return np.concatenate(
        [np.tile(order[starts[t] : starts[t + 1]], w) for t, w in enumerate(weights) if w]
    )


def choix_loop(arrays: tuple[np.ndarray, ...], n_models: int, n_tasks: int, n: int) -> float:
    """Seconds per resample: rebuild the (winner, loser) list and refit with ilsr_pairwise."""
    task, i, j, score = arrays
    weights = task_weights(n_tasks, n, seed=0)
    start = time.perf_counter()
    for k in range(n):
        rows = resampled_rows(task, weights[k])
        data = []
        for a, b, s in zip(i[rows].tolist(), j[rows].tolist(), score[rows].tolist(), strict=True):
            if s == 1.0:
                data.append((a, b))
            elif s == 0.0:
                data.append((b, a))
            else:  # a tie: one win each way, the closest ilsr_pairwise gets to half a win
                data.extend([(a, b), (b, a)])
        choix.ilsr_pairwise(n_models, data, alpha=0.01)
    return (time.perf_counter() - start) / n


def mm_fit(wins: np.ndarray, tol: float = 1e-9, max_iter: int = 100_000) -> np.ndarray:
    """Hunter's MM for Bradley-Terry with the same weak prior (half a win, half a loss)."""
    m = wins.shape[0]
    counts = wins + wins.T
    total = wins.sum(axis=1) + 0.5
    strength = np.ones(m)
    for _ in range(max_iter):
        denom = (counts / (strength[:, None] + strength[None, :])).sum(axis=1)
        denom += 1.0 / (strength + 1.0)  # one virtual comparison against strength 1
        new = total / denom
        new /= np.exp(np.log(new).mean())
        if np.abs(np.log(new) - np.log(strength)).max() < tol:
            return np.log(new)
        strength = new
    return np.log(strength)


def mm_loop(arrays: tuple[np.ndarray, ...], n_models: int, n_tasks: int, n: int) -> float:
    """Seconds per resample: re-aggregate counts from the resampled rows, then MM to 1e-9."""
    task, i, j, score = arrays
    weights = task_weights(n_tasks, n, seed=0)
    start = time.perf_counter()
    for k in range(n):
        rows = resampled_rows(task, weights[k])
        comp = comparisons(np.zeros(rows.size), i[rows], j[rows], score[rows], n_models, 1)
        mm_fit(win_matrix(comp))
    return (time.perf_counter() - start) / n


def field_arrays(n_models: int, n_tasks: int) -> tuple[np.ndarray, ...]:
    comp = simulate_field(n_models, n_tasks, seed=0, task_effect_sd=1.0, tie_rate=0.1).comparisons
    return comp.task, comp.i, comp.j, comp.score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--choix-resamples", type=int, default=2)
    parser.add_argument("--mm-resamples", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}")

    arrays = field_arrays(20, 1000)
    ours = timed(args.repeats, lambda: end_to_end(arrays, 20, 1000))
    print(
        f"20 models x 1000 tasks ({arrays[0].size:,} pair outcomes), 1000 task resamples "
        f"+ BCa jackknife: {ours['total']:.3f} s end to end (bootstrap {ours['bootstrap']:.3f}, "
        f"intervals {ours['intervals']:.3f}, differences and groups {ours['ranking']:.3f}; "
        f"at most {ours['iterations']:.0f} Newton iterations)"
    )
    per_choix = choix_loop(arrays, 20, 1000, args.choix_resamples)
    per_mm = mm_loop(arrays, 20, 1000, args.mm_resamples)
    for name, per, n in (
        ("choix.ilsr_pairwise loop", per_choix, args.choix_resamples),
        ("MM loop on re-aggregated counts", per_mm, args.mm_resamples),
    ):
        print(
            f"  {name}: {per:.3f} s per resample (timed on {n}), {1000 * per:.1f} s for 1000; "
            f"speed-up {1000 * per / ours['total']:.0f}x"
        )

    arrays = field_arrays(100, 200)
    big = timed(1, lambda: end_to_end(arrays, 100, 200))
    print(
        f"100 models x 200 tasks ({arrays[0].size:,} pair outcomes), 1000 task resamples: "
        f"{big['total']:.2f} s end to end (bootstrap {big['bootstrap']:.2f}, intervals "
        f"{big['intervals']:.2f}, differences and groups {big['ranking']:.2f})"
    )


if __name__ == "__main__":
    main()
