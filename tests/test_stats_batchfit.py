"""Batched fitting in bounded memory gives the very numbers of the plain all-at-once way."""

from __future__ import annotations

import numpy as np
import pytest

import konkord.stats.batchfit as batchfit
from konkord.stats.batchfit import task_scores
from konkord.stats.bt import comparisons, newton_bt, raw_win_rate, task_win_matrices, win_matrix
from konkord.stats.resample import bootstrap, task_weight_batches, task_weights
from konkord.stats.simfield import simulate_field


def _field(n_models: int = 6, n_tasks: int = 30, seed: int = 0):
    return simulate_field(
        n_models, n_tasks, seed=seed, task_effect_sd=1.0, tie_rate=0.1
    ).comparisons


def test_task_scores_are_the_per_task_matrices_of_tasks_with_comparisons() -> None:
    comp = _field()
    # Spread the tasks out so that every other task has no comparison.
    padded = comparisons(comp.task * 2, comp.i, comp.j, comp.score, 6, 2 * comp.n_tasks)
    scores = task_scores(padded)
    assert scores.dtype == np.float32  # halves, and small sums: exact in float32
    dense = task_win_matrices(padded).reshape(2 * comp.n_tasks, 36)
    assert np.array_equal(scores.astype(np.float64), dense[::2])


def test_task_scores_keep_float64_for_scores_that_are_not_halves() -> None:
    comp = _field(seed=1)
    score = np.random.default_rng(0).uniform(size=len(comp))
    odd = comparisons(comp.task, comp.i, comp.j, score, 6, comp.n_tasks)
    scores = task_scores(odd)
    assert scores.dtype == np.float64
    dense = task_win_matrices(odd).reshape(comp.n_tasks, 36)
    assert np.allclose(scores, dense, rtol=0, atol=1e-12)


@pytest.mark.parametrize("rows", [1, 4, 7, 100])
def test_weight_batches_are_task_weights_cut_into_rows(rows: int) -> None:
    whole = task_weights(13, 17, seed=5)
    batches = list(task_weight_batches(13, 17, 5, rows))
    assert [b.shape[0] for b in batches][:-1] == [rows] * (len(batches) - 1)
    assert np.array_equal(np.concatenate(batches), whole)
    assert task_weights(13, 0, seed=5).shape == (0, 13)


def _plain_task_bootstrap(comp, n_resamples: int, seed: int):
    """The all-at-once construction: every resample's and leave-one-out matrix in float64."""
    m = comp.n_models
    per_task = task_win_matrices(comp).reshape(comp.n_tasks, m * m)
    weights = task_weights(comp.n_tasks, n_resamples, seed).astype(np.float64)
    wins = (weights @ per_task).reshape(-1, m, m)
    point = newton_bt(win_matrix(comp)[None]).beta[0]
    leave_out = (win_matrix(comp).reshape(1, m * m) - per_task).reshape(-1, m, m)
    return (
        newton_bt(wins, init=point).beta,
        raw_win_rate(wins),
        newton_bt(leave_out, init=point).beta,
    )


def test_bootstrap_in_small_batches_equals_the_plain_construction_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    comp = _field(8, 40, seed=2)
    beta, raw, jack = _plain_task_bootstrap(comp, 60, seed=4)
    # Batches of 3 fits: many batches, and the last one short.
    monkeypatch.setattr(batchfit, "_BATCH_ELEMENTS", 3 * 64)
    boot = bootstrap(comp, n_resamples=60, seed=4)
    assert boot.jackknife is not None
    assert np.array_equal(boot.log_strength, beta)
    assert np.array_equal(boot.raw_win_rate, raw)
    assert np.array_equal(boot.jackknife.log_strength, jack)
    assert boot.n_fits == 60 + 40 and boot.n_converged == boot.n_fits


def test_fit_batches_refuses_a_count_that_does_not_match() -> None:
    wins = win_matrix(_field())[None]
    with pytest.raises(ValueError, match="expected 2 fits, the batches held 1"):
        batchfit.fit_batches([wins], 2, 6, 0.5, np.zeros(6), None)


def test_a_fit_that_rounding_keeps_above_tol_stops_when_it_stalls_not_at_max_iter() -> None:
    """A tolerance below what rounding lets any iterate reach (1e-16 for sums of tens of
    thousands): each fit stops once every halving of its step makes the gradient worse,
    reported unconverged, at the point a fit to 1e-9 reaches; not after 100 iterations."""
    rng = np.random.default_rng(3)
    wins = rng.integers(200, 900, size=(6, 8, 8)).astype(np.float64)
    for k in range(6):
        np.fill_diagonal(wins[k], 0.0)
    offset = rng.normal(0.0, 50.0, size=(6, 8))
    offset -= offset.mean(axis=1, keepdims=True)  # a share of the scores moved, none made
    loose = newton_bt(wins, offset=offset)
    strict = newton_bt(wins, offset=offset, tol=1e-16, max_iter=100)
    assert loose.converged.all() and not strict.converged.any()
    assert strict.iterations.max() < 20
    assert np.allclose(strict.beta, loose.beta, rtol=0, atol=1e-12)
