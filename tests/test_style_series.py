"""The style bootstrap's series gradients for one covariate (`konkord.stats.style_series`):
the bound on what the series leaves out holds against tanh itself, the moments' sums are the
sums over every cell, and a bootstrap that takes them (with fits beyond their reach walked)
still lands each resample on its own refit."""

from __future__ import annotations

import numpy as np
import pytest

from konkord.stats.bt import comparisons
from konkord.stats.resample import task_weights
from konkord.stats.style_boot import style_bootstrap
from konkord.stats.style_fit import fit_style_bt, style_data
from konkord.stats.style_series import (
    MAX_ORDER,
    SERIES_ERROR,
    Moments,
    left_out,
    series_order,
)


@pytest.mark.parametrize("rho", [0.01, 0.1, 0.3, 0.37])
def test_the_series_leaves_out_no_more_than_its_bound(rho: float) -> None:
    order = series_order(rho)
    assert order is not None and 1 <= order <= MAX_ORDER
    assert left_out(order, rho) <= SERIES_ERROR < left_out(order - 1, rho) or order == 1
    rng = np.random.default_rng(3)
    pair = np.concatenate([rng.uniform(-6.0, 6.0, 2000), [0.0, 0.3, -0.7]])
    h = np.concatenate([rng.uniform(-rho, rho, 2000), [rho, -rho, rho]])
    # one slot per point, one task of weight 1 holding h / g as its covariate
    g = 0.5
    x = (h / g)[None, :]
    moments = Moments.of(x, np.ones_like(x), np.ones((1, 1)), order)
    by_slot, _ = moments.diff_sums(np.array([0]), pair[None, :], np.array([g]))
    exact = np.tanh(pair + h) - np.tanh(pair)
    assert np.abs(by_slot[0] - exact).max() <= left_out(order, rho) + 1e-15
    # and the series is not idle: a third as many terms miss by more than the tolerance
    short = Moments.of(x, np.ones_like(x), np.ones((1, 1)), max(1, order // 3))
    cut, _ = short.diff_sums(np.array([0]), pair[None, :], np.array([g]))
    assert np.abs(cut[0] - exact).max() > SERIES_ERROR


def test_a_reach_too_far_for_any_series_is_refused() -> None:
    assert series_order(0.45) is None  # more terms than a walk costs
    assert series_order(0.7) is None  # past half the radius: walked
    assert series_order(0.0) == 1


def test_the_moments_sum_what_a_walk_over_every_cell_sums() -> None:
    rng = np.random.default_rng(8)
    n_tasks, n_slots, n_fits = 40, 6, 5
    x = rng.uniform(-0.4, 0.4, (n_tasks, n_slots))
    x[rng.random(x.shape) < 0.3] = 0.0
    mask = (rng.random(x.shape) < 0.9).astype(float)
    weights = task_weights(n_tasks, n_fits, 2).astype(float)
    order = series_order(0.25)
    assert order is not None
    moments = Moments.of(x, mask, weights, order)
    pair = rng.normal(0.0, 1.5, (n_fits + n_tasks, n_slots))
    g = rng.uniform(-0.6, 0.6, n_fits + n_tasks)
    rows = np.arange(n_fits + n_tasks)
    by_slot, by_feature = moments.diff_sums(rows, pair, g)
    # the fits' weights written out: the resamples', then each task left out in turn
    every = np.concatenate([weights, 1.0 - np.eye(n_tasks)])
    cell = np.tanh(pair[:, None, :] + g[:, None, None] * x[None]) - np.tanh(pair[:, None, :])
    cell *= mask[None] * every[:, :, None]
    np.testing.assert_allclose(by_slot, cell.sum(axis=1), rtol=0, atol=1e-11)
    np.testing.assert_allclose(by_feature, (cell * x[None]).sum(axis=(1, 2)), rtol=0, atol=1e-11)
    reach = np.array([0.0, 0.1, 0.24, 0.5]) / np.abs(x).max()  # the order serves up to 0.25
    assert moments.serves(np.arange(4), reach).tolist() == [True, True, True, False]
    # taken for some fits only (those a bootstrap passes over): the same sums for them
    some = np.array([1, 3, n_fits + 2, n_fits + 39])
    part = Moments.of(x, mask, weights, order, some)
    assert part.serves(rows, np.zeros(rows.size)).tolist() == [r in some for r in rows]
    slots, features = part.diff_sums(some, pair[some], g[some])
    np.testing.assert_array_equal(slots, by_slot[some])
    np.testing.assert_array_equal(features, by_feature[some])
    for only in (np.arange(n_fits), n_fits + np.arange(3)):  # resamples alone, jackknife alone
        alone = Moments.of(x, mask, weights, order, only)
        np.testing.assert_array_equal(alone.diff_sums(only, pair[only], g[only])[0], by_slot[only])


def test_covariates_of_zero_give_a_share_of_exactly_zero() -> None:
    x = np.zeros((5, 3))
    x[0, 0] = 0.2
    moments = Moments.of(x, np.ones_like(x), np.ones((2, 5)), 6)
    by_slot, _ = moments.diff_sums(np.arange(7), np.full((7, 3), 0.4), np.full(7, 0.3))
    # rows 0-1: the two resamples; row 2 + k: the jackknife fit that leaves task k out
    assert (by_slot[:, 1:] == 0.0).all()
    assert by_slot[2, 0] == 0.0 and (by_slot[[0, 1, 3, 4, 5, 6], 0] != 0.0).all()


@pytest.mark.parametrize("n_tasks, spread", [(30, 0.3), (8, 0.9)])
def test_each_resample_of_one_covariate_reaches_its_own_refit(n_tasks: int, spread: float) -> None:
    rng = np.random.default_rng(21)
    n_models = 5
    beta = rng.normal(0.0, 1.0, n_models)
    a, b = np.triu_indices(n_models, 1)
    task = np.repeat(np.arange(n_tasks), a.size)
    i, j = np.tile(a, n_tasks), np.tile(b, n_tasks)
    x = rng.uniform(-spread, spread, (task.size, 1))
    p = 1.0 / (1.0 + np.exp(-(beta[i] - beta[j] + 0.8 * x[:, 0])))
    score = (rng.random(task.size) < p).astype(float)
    comp = comparisons(task, i, j, score, n_models, n_tasks)
    data = style_data(comp, x)
    boot = style_bootstrap(data, n_resamples=25, seed=5)
    point = fit_style_bt(data).coefficients[0]
    reach = np.abs(boot.coefficients[:, 0]) / 2 * np.abs(x).max()
    order = series_order(1.5 * abs(point) / 2 * np.abs(x).max() + 0.01)
    if n_tasks == 8:  # few tasks: resamples far from the point estimate are walked instead
        assert order is not None
        assert (reach > series_order_reach(order)).any()
    weights = task_weights(n_tasks, 25, 5)
    for draw in range(25):
        keep = np.repeat(np.arange(len(comp)), weights[draw][comp.task])
        sub = comparisons(
            np.arange(keep.size), comp.i[keep], comp.j[keep], comp.score[keep], n_models,
            keep.size,
        )
        refit = fit_style_bt(style_data(sub, x[keep]))
        np.testing.assert_allclose(boot.coefficients[draw], refit.coefficients, atol=2e-6)
        np.testing.assert_allclose(
            boot.bootstrap.log_strength[draw], refit.fit.log_strength, atol=2e-6
        )
    assert boot.bootstrap.n_converged == boot.bootstrap.n_fits == 25 + n_tasks


def series_order_reach(order: int) -> float:
    """The largest |h| a series of `order` terms serves within SERIES_ERROR."""
    low, high = 0.0, 0.6
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if left_out(order, mid) <= SERIES_ERROR else (low, mid)
    return low


def test_threads_do_not_change_a_bit_of_the_style_bootstrap() -> None:
    """`konkord report` fits on one thread while its task worker runs (`stats.threads`)."""
    from konkord.stats.threads import default_threads, threads_at_most

    rng = np.random.default_rng(4)
    n_models, n_tasks = 4, 30
    a, b = np.triu_indices(n_models, 1)
    task = np.repeat(np.arange(n_tasks), a.size)
    i, j = np.tile(a, n_tasks), np.tile(b, n_tasks)
    x = rng.uniform(-0.3, 0.3, (task.size, 1))
    score = (rng.random(task.size) < 0.5 + 0.3 * x[:, 0]).astype(float)
    data = style_data(comparisons(task, i, j, score, n_models, n_tasks), x)
    one = style_bootstrap(data, n_resamples=40, seed=3, workers=1)
    three = style_bootstrap(data, n_resamples=40, seed=3, workers=3)
    assert np.array_equal(one.coefficients, three.coefficients)
    assert np.array_equal(one.bootstrap.log_strength, three.bootstrap.log_strength)
    with threads_at_most(1):
        assert default_threads() == 1
        limited = style_bootstrap(data, n_resamples=40, seed=3)
    assert default_threads() >= 1
    assert np.array_equal(limited.coefficients, three.coefficients)
