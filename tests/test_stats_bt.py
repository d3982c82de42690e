"""Bradley-Terry fit: closed forms, a second implementation (choix, scipy), honest convergence."""

from __future__ import annotations

import choix
import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar

from konkord.stats.bt import (
    comparisons,
    expected_win_rate,
    fit_bt,
    fit_bt_wins,
    newton_bt,
    task_win_matrices,
    win_matrix,
)


def _random_field(seed: int, n_models: int, n_tasks: int, ties: bool) -> tuple:
    rng = np.random.default_rng(seed)
    beta = rng.normal(0, 1, n_models)
    a, b = np.triu_indices(n_models, 1)
    task = np.repeat(np.arange(n_tasks), a.size)
    i, j = np.tile(a, n_tasks), np.tile(b, n_tasks)
    p = 1 / (1 + np.exp(-(beta[i] - beta[j])))
    score = (rng.random(task.size) < p).astype(float)
    if ties:
        score[rng.random(task.size) < 0.2] = 0.5
    return comparisons(task, i, j, score, n_models, n_tasks), i, j, score


def _neg_loglik(beta: np.ndarray, i: np.ndarray, j: np.ndarray, score: np.ndarray) -> float:
    d = beta[i] - beta[j]
    return float(np.sum(score * np.logaddexp(0, -d) + (1 - score) * np.logaddexp(0, d)))


def test_two_models_closed_form_without_prior() -> None:
    # 7 wins, 3 losses, 2 ties: beta_0 - beta_1 = log(8 / 4).
    score = [1.0] * 7 + [0.0] * 3 + [0.5] * 2
    n = len(score)
    comp = comparisons(np.arange(n), np.zeros(n), np.ones(n), score, 2, n)
    fit = fit_bt(comp, prior=0.0)
    assert fit.converged and fit.gradient_norm < 1e-9
    assert fit.log_strength[0] - fit.log_strength[1] == pytest.approx(np.log(2.0), abs=1e-12)
    assert fit.log_strength.sum() == pytest.approx(0.0, abs=1e-12)
    assert np.prod(fit.rating) == pytest.approx(1.0, abs=1e-12)
    assert fit.raw_win_rate.tolist() == pytest.approx([8 / 12, 4 / 12])
    assert fit.expected_win_rate.tolist() == pytest.approx([2 / 3, 1 / 3], abs=1e-12)
    assert fit.comparisons.tolist() == [12, 12]


def test_two_models_with_prior_matches_a_one_dimensional_fit() -> None:
    # Prior: half a win and half a loss of each model against an opponent at mean strength.
    wins, losses = 9.0, 1.0

    def neg(d: float) -> float:
        u = d / 2  # beta = (d/2, -d/2), opponent at 0
        prior = 0.5 * 2 * (np.logaddexp(0, -u) + np.logaddexp(0, u))
        return float(wins * np.logaddexp(0, -d) + losses * np.logaddexp(0, d) + prior)

    ref = minimize_scalar(neg, bounds=(-20, 20), method="bounded", options={"xatol": 1e-12})
    w = np.array([[0.0, wins], [losses, 0.0]])
    fit = fit_bt_wins(w)
    assert fit.log_strength[0] - fit.log_strength[1] == pytest.approx(ref.x, abs=1e-6)
    # The prior pulls towards 0: the gap is smaller than log(9).
    assert 0 < ref.x < np.log(9.0)


def test_symmetric_field_gives_equal_ratings() -> None:
    # A beats B, B beats C, C beats A, each once, and every pair ties once more.
    comp = comparisons(
        [0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2], [1, 2, 0, 1, 2, 0], [1, 1, 1, 0.5, 0.5, 0.5], 3, 2
    )
    for prior in (0.0, 0.5):
        fit = fit_bt(comp, prior=prior)
        assert fit.converged
        assert np.allclose(fit.rating, 1.0, atol=1e-12)
        assert np.allclose(fit.expected_win_rate, 0.5, atol=1e-12)


def test_model_that_wins_everything_stays_finite() -> None:
    w = np.array([[0, 10, 10], [0, 0, 5], [0, 5, 0]], dtype=float)
    fit = fit_bt_wins(w)
    assert fit.converged and fit.gradient_norm < 1e-9
    assert np.all(np.isfinite(fit.log_strength))
    assert fit.log_strength[0] > fit.log_strength[1] + 2
    assert fit.log_strength[1] == pytest.approx(fit.log_strength[2], abs=1e-12)
    assert fit.raw_win_rate[0] == 1.0
    assert fit.expected_win_rate[0] < 1.0


def test_non_convergence_is_reported() -> None:
    comp, *_ = _random_field(1, 6, 20, ties=True)
    fit = fit_bt(comp, max_iter=1)
    assert not fit.converged
    assert fit.iterations == 1
    assert fit.gradient_norm > 1e-9


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_choix_and_scipy_without_ties_or_prior(seed: int) -> None:
    comp, i, j, score = _random_field(seed, 8, 40, ties=False)
    fit = fit_bt(comp, prior=0.0)
    assert fit.converged and fit.iterations < 15
    data = [
        (int(a), int(b)) if s == 1 else (int(b), int(a))
        for a, b, s in zip(i, j, score, strict=True)
    ]
    ref_choix = choix.opt_pairwise(8, data, alpha=0.0, method="Newton-CG", tol=1e-12)
    ref_choix -= ref_choix.mean()
    assert np.abs(fit.log_strength - ref_choix).max() < 1e-6
    ref = minimize(
        _neg_loglik, np.zeros(8), args=(i, j, score), method="BFGS", options={"gtol": 1e-10}
    )
    ref_beta = ref.x - ref.x.mean()
    assert np.abs(fit.log_strength - ref_beta).max() < 1e-6


def test_prior_and_ties_match_scipy_fit_of_the_same_objective() -> None:
    comp, i, j, score = _random_field(5, 6, 15, ties=True)

    def neg(beta: np.ndarray) -> float:
        u = beta - beta.mean()
        prior = 0.5 * np.sum(np.logaddexp(0, -u) + np.logaddexp(0, u))
        return _neg_loglik(beta, i, j, score) + prior

    ref = minimize(neg, np.zeros(6), method="BFGS", options={"gtol": 1e-10})
    fit = fit_bt(comp)
    assert np.abs(fit.log_strength - (ref.x - ref.x.mean())).max() < 1e-6


def test_expected_win_rate_is_mean_win_probability_over_others() -> None:
    beta = np.array([1.0, 0.0, -0.5])
    sig = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    want = [(sig(1) + sig(1.5)) / 2, (sig(-1) + sig(0.5)) / 2, (sig(-1.5) + sig(-0.5)) / 2]
    assert expected_win_rate(beta).tolist() == pytest.approx(want, abs=1e-15)


def test_batched_fits_equal_single_fits() -> None:
    mats = [win_matrix(_random_field(s, 5, 10, ties=True)[0]) for s in range(4)]
    batch = newton_bt(np.stack(mats))
    for k, w in enumerate(mats):
        assert np.allclose(batch.beta[k], fit_bt_wins(w).log_strength, atol=1e-10)
    assert batch.converged.all()


def test_task_win_matrices_sum_to_the_whole() -> None:
    comp, *_ = _random_field(3, 4, 7, ties=True)
    per_task = task_win_matrices(comp)
    assert per_task.shape == (7, 4, 4)
    assert np.array_equal(per_task.sum(axis=0), win_matrix(comp))
    counts = per_task + per_task.transpose(0, 2, 1)
    assert np.all(counts[:, ~np.eye(4, dtype=bool)] == 1)


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match=r"j\[1\] = 5 is outside 0..2"):
        comparisons([0, 0], [0, 1], [1, 5], [1, 0], 3, 1)
    with pytest.raises(ValueError, match="pits model 2 against itself"):
        comparisons([0], [2], [2], [1], 3, 1)
    with pytest.raises(ValueError, match=r"score\[0\] = 2.0 is outside 0..1"):
        comparisons([0], [0], [1], [2], 3, 1)
    with pytest.raises(ValueError, match="prior must be >= 0"):
        fit_bt(comparisons([0], [0], [1], [1], 2, 1), prior=-1)


def test_singular_fit_without_prior_says_why() -> None:
    comp = comparisons([0, 0], [0, 2], [1, 3], [1, 0], 4, 1)  # {0, 1} and {2, 3} never meet
    with pytest.raises(ValueError, match="prior=0 every model needs comparisons"):
        fit_bt(comp, prior=0.0)
    assert fit_bt(comp).converged  # the prior ties the two parts to the average opponent


def test_solve_falls_back_to_lu_on_the_matrix_dposv_overwrote() -> None:
    """dposv factors in place; an indefinite matrix must still be solved from its own values."""
    from konkord.stats.newton import _solve_spd

    rng = np.random.default_rng(1)
    a = rng.normal(size=(3, 6, 6))
    mats = a + a.transpose(0, 2, 1)  # symmetric, indefinite: Cholesky fails part way
    mats[1] = mats[1] @ mats[1] + np.eye(6)  # positive definite: dposv succeeds
    rhs = rng.normal(size=(3, 6))
    want = np.linalg.solve(mats, rhs[..., None])[..., 0]
    np.testing.assert_allclose(_solve_spd(mats.copy(), rhs), want, rtol=0, atol=1e-12)


def test_shared_first_step_ends_at_the_same_fits() -> None:
    """Jackknife fits whose first step uses the full data's curvature reach the same optimum."""
    from konkord.stats.newton import shared_inverse

    comp = _random_field(3, 6, 40, ties=True)[0]
    tasks = task_win_matrices(comp)
    full = tasks.sum(axis=0)
    point = fit_bt_wins(full).log_strength
    leave_out = full[None] - tasks
    own = newton_bt(leave_out, init=point)
    shared = newton_bt(leave_out, init=point, first_step=shared_inverse(full, point, 0.5))
    assert shared.converged.all() and own.converged.all()
    np.testing.assert_allclose(shared.beta, own.beta, rtol=0, atol=1e-10)
    # a start far from the data's curvature still converges, by Newton steps after the first
    far = newton_bt(leave_out, init=point, first_step=np.eye(6) * 10.0)
    assert far.converged.all()
    np.testing.assert_allclose(far.beta, own.beta, rtol=0, atol=1e-10)
