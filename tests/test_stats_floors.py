"""The Wald floor against closed forms and a numeric Hessian of the penalised likelihood."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from konkord.stats.floors import fisher_covariance, wald_floor
from konkord.stats.newton import fit_bt_wins

Z95 = 1.959963984540054


def penalised_log_likelihood(beta: np.ndarray, wins: np.ndarray, prior: float) -> float:
    """sum wins_ab log P(a beats b), plus `prior` virtual half wins and losses of each model
    against the average one (on u = beta - mean(beta)), written out term by term."""
    total = 0.0
    m = beta.size
    for a in range(m):
        for b in range(m):
            if a != b and wins[a, b]:
                total += wins[a, b] * math.log(1.0 / (1.0 + math.exp(-(beta[a] - beta[b]))))
    for u in beta - beta.mean():
        total += prior * (math.log(1 / (1 + math.exp(-u))) + math.log(1 / (1 + math.exp(u))))
    return total


def numeric_hessian(
    beta: np.ndarray, wins: np.ndarray, prior: float, h: float = 1e-4
) -> np.ndarray:
    """Central second differences of `penalised_log_likelihood`."""
    m = beta.size

    def f(i: int, j: int, di: float, dj: float) -> float:
        x = beta.copy()
        x[i] += di
        x[j] += dj
        return penalised_log_likelihood(x, wins, prior)

    out = np.zeros((m, m))
    for i in range(m):
        for j in range(m):
            out[i, j] = (f(i, j, h, h) - f(i, j, h, -h) - f(i, j, -h, h) + f(i, j, -h, -h)) / (
                4 * h * h
            )
    return out


def test_the_difference_of_two_models_has_the_binomial_wald_variance() -> None:
    # Two models, 12 of 20 won, no prior: var(beta_0 - beta_1) = 1 / (n p (1 - p)), where the
    # two log-strengths are perfectly anti-correlated (mean 0): ignoring that halves it.
    wins = np.array([[0.0, 12.0], [8.0, 0.0]])
    beta = np.array([0.5, -0.5]) * math.log(12 / 8)
    floor = wald_floor(wins, beta, 0.0, 0.95)
    assert floor.pair[0, 1] == pytest.approx(Z95 / math.sqrt(20 * 0.6 * 0.4), rel=1e-9)
    assert floor.model[0] == pytest.approx(Z95 / 2 / math.sqrt(20 * 0.6 * 0.4), rel=1e-9)


@pytest.mark.parametrize("prior", [0.0, 0.5, 2.0])
def test_fisher_covariance_is_the_inverse_numeric_hessian(prior: float) -> None:
    rng = np.random.default_rng(5)
    wins = np.triu(rng.integers(0, 6, size=(5, 5)).astype(float), 1)
    wins += np.triu(rng.integers(0, 6, size=(5, 5)).astype(float), 1).T
    wins[0, 1:] += 3.0  # a strong model, so the prior's curvature varies across models
    beta = fit_bt_wins(wins, prior=max(prior, 0.5)).log_strength + rng.normal(0, 0.3, 5)
    beta -= beta.mean()
    # The likelihood ignores a common shift: the covariance lives on mean-0 vectors, where
    # it is the inverse of the information (pinv(L) = inv(L + J/m) - J/m for that null space).
    centre = np.eye(5) - 1 / 5
    info = centre @ -numeric_hessian(beta, wins, prior) @ centre
    expected = np.linalg.inv(info + 1 / 5) - 1 / 5
    np.testing.assert_allclose(fisher_covariance(wins, beta, prior), expected, atol=2e-6)


def test_strengths_far_apart_give_limits_not_overflow_warnings() -> None:
    """A model that wins everything can sit hundreds of log-odds above the rest: the floors'
    logistic terms must reach 0 and 1 quietly (pytest turns the overflow warning of
    `1 / (1 + exp(-x))` into an error), and the covariance stay finite."""
    from konkord.stats.floors import fisher_covariance

    wins = np.array([[0.0, 3.0, 3.0], [0.0, 0.0, 2.0], [0.0, 1.0, 0.0]])
    beta = np.array([800.0, -400.0, -400.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cov = fisher_covariance(wins, beta, prior=0.5)
    assert np.all(np.isfinite(cov)) and np.allclose(cov, cov.T)
