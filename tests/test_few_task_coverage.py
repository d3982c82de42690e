"""The agreement and kappa intervals keep their 95% at 10 tasks of uneven size with strong
task effects, where the normal critical value and the plain percentile interval covered
88-91% (a seeded simulation; benchmarks/bench_validity.py section (f) runs every cell)."""

from __future__ import annotations

import numpy as np
from scipy.special import expit, logit

from konkord.stats.agreement import (
    both_orientations,
    exact_agreement,
    kappa_bootstrap,
    kappa_from_confusion,
)

TRUTHS = np.array([0.4, 0.4, 0.2])  # model a, model b, tie


def expected_confusion(judge_right: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """E[P(person i, judge j)]: a person right 0.9, a judge right `judge_right` (by task),
    each otherwise picking a category at random."""
    person = 0.9 * np.eye(3) + 0.1 / 3
    out = np.zeros((3, 3))
    for right, w in zip(judge_right, weights, strict=True):
        judge = right * np.eye(3) + (1 - right) / 3
        out += w * (TRUTHS[:, None, None] * person[:, :, None] * judge[:, None, :]).sum(axis=0)
    return out


def test_agreement_and_kappa_cover_at_ten_uneven_tasks_with_strong_task_effects() -> None:
    tasks, sd, q, datasets = 10, 2.0, 0.5, 1000
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    conf = expected_confusion(expit(logit(q) + sd * nodes), weights / weights.sum())
    true_rate = float(np.trace(conf))
    true_kappa = float(kappa_from_confusion(both_orientations(conf)))
    rng = np.random.default_rng(11)
    covered = np.zeros(2)
    for k in range(datasets):
        task = np.repeat(np.arange(tasks), 1 + rng.geometric(1 / 6, size=tasks))
        n = task.size
        truth = rng.choice(3, size=n, p=TRUTHS)
        person = np.where(rng.random(n) < 0.9, truth, rng.integers(0, 3, n))
        right = expit(logit(q) + sd * rng.standard_normal(tasks))[task]
        judge = np.where(rng.random(n) < right, truth, rng.integers(0, 3, n))
        agree = exact_agreement(person, judge, task)
        kappa = kappa_bootstrap(person, judge, task, n_resamples=300, seed=k)
        covered += [agree.low <= true_rate <= agree.high, kappa.low <= true_kappa <= kappa.high]
    share = covered / datasets
    # 1,000 datasets: a standard error of 0.7 points at 95%
    assert share[0] >= 0.925, f"agreement covers {share[0]:.1%}"
    assert share[1] >= 0.925, f"kappa covers {share[1]:.1%}"
    assert (share <= 0.975).all(), share
