"""Speed and memory of the judge table's statistics (consensus match, consistency), from the
combined verdicts of several judges to both figures with their task-bootstrap intervals.

Each judge gives the true order of a pair with its accuracy and a coin otherwise; every task is
a full round robin. Prints, per size, the wall time and the peak memory numpy allocated
(tracemalloc), with the block size the driver chose. Memory should stay flat as tasks grow:
the per-task fits run a block of tasks at a time.

Run: python benchmarks/bench_judges.py [--resamples 1000]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from konkord.stats.judges import CHUNK_BYTES, panel_figures, panel_verdicts

SIZES = ((5, 29, 5), (5, 200, 10), (3, 1000, 20), (3, 5000, 20), (3, 2000, 40))


def field(n_judges: int, n_tasks: int, n_models: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    a, b = np.triu_indices(n_models, k=1)
    quality = rng.normal(size=(n_tasks, n_models))
    truth = (quality[:, a] > quality[:, b]).astype(np.float64)  # (T, P)
    accuracy = np.linspace(0.95, 0.55, n_judges)[:, None, None]
    right = rng.random((n_judges, n_tasks, a.size)) < accuracy
    coin = (rng.random((n_judges, n_tasks, a.size)) < 0.5).astype(np.float64)
    score = np.where(right, truth[None], coin)
    judge = np.broadcast_to(np.arange(n_judges)[:, None, None], score.shape)
    task = np.broadcast_to(np.arange(n_tasks)[None, :, None], score.shape)
    i = np.broadcast_to(a[None, None, :], score.shape)
    j = np.broadcast_to(b[None, None, :], score.shape)
    return tuple(x.reshape(-1) for x in (judge, task, i, j, score))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    print(
        f"{'judges':>6} {'tasks':>6} {'models':>6} {'verdicts':>9} {'seconds':>8} {'peak MB':>8}"
        f"  consensus match (judge 1, last)"
    )
    for n_judges, n_tasks, n_models in SIZES:
        judge, task, i, j, score = field(n_judges, n_tasks, n_models)
        panel = panel_verdicts(judge, task, i, j, score, n_judges, n_models, n_tasks)
        tracemalloc.start()
        start = time.perf_counter()
        figures = panel_figures(panel, n_resamples=args.resamples)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] / 1e6
        tracemalloc.stop()
        assert figures.consensus is not None
        mean = figures.consensus.mean
        print(
            f"{n_judges:>6} {n_tasks:>6} {n_models:>6} {score.size:>9} {seconds:>8.2f} "
            f"{peak:>8.1f}  {mean[0]:.3f}, {mean[-1]:.3f}"
        )
    print(f"(blocks of tasks sized to about {CHUNK_BYTES >> 20} MB of score matrices)")


if __name__ == "__main__":
    main()
