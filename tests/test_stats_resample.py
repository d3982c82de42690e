"""Bootstrap: reproducible, each resample is the refit of a real resampled run, honest coverage."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from konkord.stats.bt import comparisons, fit_bt
from konkord.stats.resample import bootstrap, bootstrap_interval, task_weights
from konkord.stats.simfield import simulate_field


def _field(seed: int = 0, sd: float = 1.0):
    return simulate_field(5, 20, seed=seed, task_effect_sd=sd, tie_rate=0.1).comparisons


def test_same_seed_same_bits_and_other_seed_differs() -> None:
    comp = _field()
    a = bootstrap(comp, n_resamples=200, seed=7)
    b = bootstrap(comp, n_resamples=200, seed=7)
    c = bootstrap(comp, n_resamples=200, seed=8)
    assert np.array_equal(a.log_strength, b.log_strength)
    assert np.array_equal(a.expected_win_rate, b.expected_win_rate)
    for name, iv in a.intervals().items():
        other = b.intervals()[name]
        assert np.array_equal(iv.lower, other.lower) and np.array_equal(iv.upper, other.upper)
    assert not np.array_equal(a.log_strength, c.log_strength)


def test_each_task_resample_is_the_fit_of_the_resampled_tasks() -> None:
    # Independent construction: copy the drawn tasks' comparisons and fit them from scratch.
    comp = _field(1)
    boot = bootstrap(comp, n_resamples=5, seed=3)
    weights = task_weights(comp.n_tasks, 5, 3)
    for k in range(5):
        rows = np.concatenate(
            [
                np.flatnonzero(comp.task == t)
                for t in range(comp.n_tasks)
                for _ in range(weights[k, t])
            ]
        )
        resampled = comparisons(
            np.arange(rows.size), comp.i[rows], comp.j[rows], comp.score[rows], 5, rows.size
        )
        ref = fit_bt(resampled)
        assert np.allclose(boot.log_strength[k], ref.log_strength, atol=1e-9)
        assert np.allclose(boot.raw_win_rate[k], ref.raw_win_rate, atol=1e-12)
    assert boot.n_converged == boot.n_fits == 5 + comp.n_tasks


def test_judgment_resamples_draw_every_judgment_count() -> None:
    comp = _field(2)
    boot = bootstrap(comp, n_resamples=300, seed=1, mode="judgments")
    assert boot.n_units == len(comp) and boot.n_converged == boot.n_fits
    # The raw win rate is a plain mean of resampled judgments: its draws centre on the data.
    assert np.allclose(boot.raw_win_rate.mean(axis=0), boot.point.raw_win_rate, atol=0.01)


def test_bca_without_bias_or_skew_is_the_percentile_interval() -> None:
    draws = np.linspace(-1, 1, 2001)[:, None]  # symmetric around the point 0: z0 = 0
    point = np.zeros(1)
    pct = bootstrap_interval(point, draws, method="percentile")
    bca = bootstrap_interval(point, draws, method="bca", jackknife=np.array([[-1.0], [1.0]]))
    assert pct.lower == pytest.approx(bca.lower) and pct.upper == pytest.approx(bca.upper)
    assert pct.lower[0] == pytest.approx(-0.95, abs=1e-3)


def test_bca_of_a_mean_agrees_with_scipy() -> None:
    rng = np.random.default_rng(0)
    x = rng.exponential(size=30)
    idx = rng.integers(0, 30, size=(20000, 30))
    draws = x[idx].mean(axis=1)[:, None]
    jack = np.array([[np.delete(x, k).mean()] for k in range(30)])
    ours = bootstrap_interval(np.array([x.mean()]), draws, jackknife=jack)
    ref = sps.bootstrap((x,), np.mean, n_resamples=20000, method="BCa", random_state=1)
    assert ours.lower[0] == pytest.approx(ref.confidence_interval.low, abs=0.02)
    assert ours.upper[0] == pytest.approx(ref.confidence_interval.high, abs=0.03)


def _coverage(mode: str, sd: float, n_fields: int) -> float:
    hits = []
    for f in range(n_fields):
        field = simulate_field(5, 25, seed=500 + f, task_effect_sd=sd)
        boot = bootstrap(field.comparisons, n_resamples=200, seed=f, mode=mode)  # type: ignore[arg-type]
        iv = boot.intervals()["expected_win_rate"]
        truth = field.target_expected_win_rate
        hits.append((iv.lower <= truth) & (truth <= iv.upper))
    return float(np.mean(hits))


def test_task_bootstrap_covers_and_beats_judgments_under_task_effects() -> None:
    task = _coverage("task", 2.0, 40)
    judgments = _coverage("judgments", 2.0, 40)
    assert task >= 0.90
    assert task >= judgments
    assert _coverage("task", 0.0, 30) >= 0.90


def test_intervals_contain_the_point_estimate() -> None:
    boot = bootstrap(_field(4), n_resamples=300, seed=0)
    for name in ("log_strength", "expected_win_rate", "rating"):
        iv = boot.intervals()[name]
        point = getattr(boot.point, name)
        assert np.all(iv.lower <= point) and np.all(point <= iv.upper), name


def test_threads_and_chunks_do_not_change_a_bit() -> None:
    comp = _field(5)
    one = bootstrap(comp, n_resamples=150, seed=2, workers=1)
    two = bootstrap(comp, n_resamples=150, seed=2, workers=3)
    assert np.array_equal(one.log_strength, two.log_strength)
    assert one.jackknife is not None and two.jackknife is not None
    assert np.array_equal(one.jackknife.log_strength, two.jackknife.log_strength)


def test_tasks_without_comparisons_are_not_resampled() -> None:
    comp = _field(6)
    padded = comparisons(comp.task * 2, comp.i, comp.j, comp.score, 5, 2 * comp.n_tasks)
    a = bootstrap(comp, n_resamples=100, seed=1)
    b = bootstrap(padded, n_resamples=100, seed=1)
    assert b.n_units == b.n_tasks == comp.n_tasks
    assert np.array_equal(a.log_strength, b.log_strength)


def test_simulated_truth_is_what_the_estimator_aims_at() -> None:
    # Without task effects or ties the target is the latent strengths themselves.
    plain = simulate_field(4, 1, seed=0, strength=[1.0, 0.5, 0.0, -1.5])
    assert np.allclose(plain.target_log_strength, plain.strength, atol=1e-9)
    # With task effects the expected score is a logistic-normal mean: check by Monte Carlo.
    rng = np.random.default_rng(0)
    field = simulate_field(3, 1, seed=1, strength=[1.0, 0.0, -1.0], task_effect_sd=2.0)
    noise = rng.normal(0.0, 2.0, size=(400_000, 2))
    mc = np.mean(1 / (1 + np.exp(-(2.0 + noise[:, 0] - noise[:, 1]))))
    assert field.expected_score[0, 2] == pytest.approx(mc, abs=0.003)
    # Task effects pull the target towards the middle.
    gap = field.target_log_strength[0] - field.target_log_strength[2]
    assert 0 < gap < 2.0
