"""The anchored ranking's sandwich floor against the two-model closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import t as student_t

from konkord.stats.ppi import anchored_bootstrap, anchored_data
from konkord.stats.ppi_floor import floored_anchored_intervals, sandwich_covariance

# Judge outcomes (task, score of model 0) on 6 tasks; labels (task, person, judge, pi).
JUDGE = [(0, 1.0), (1, 1.0), (2, 0.5), (3, 1.0), (4, 0.0), (5, 1.0)]
LABELS = [(0, 1.0, 1.0, 0.5), (2, 0.0, 0.5, 0.5), (4, 0.0, 0.0, 0.25), (1, 0.0, 1.0, 0.5)]


def _data():  # type: ignore[no-untyped-def]
    return anchored_data(
        ([t for t, _ in JUDGE], [0] * 6, [1] * 6, [s for _, s in JUDGE]),
        ([t for t, *_ in LABELS], [0] * 4, [1] * 4, [y for _, y, _, _ in LABELS]),
        [h for _, _, h, _ in LABELS],
        [p for *_, p in LABELS],
        n_models=2,
        n_tasks=6,
    )


@pytest.mark.parametrize("lam", [0.0, 0.4, 1.0])
def test_two_models_sandwich_is_the_scalar_m_estimator_variance(lam: float) -> None:
    fit = anchored_bootstrap(_data(), lam=lam, n_resamples=20, prior=0.0)
    beta = fit.bootstrap.point.log_strength
    p = 1.0 / (1.0 + math.exp(-(beta[0] - beta[1])))
    won = [lam * s for _, s in JUDGE]
    count = [lam] * 6
    for t, person, judged, pi in LABELS:
        won[t] += (person - lam * judged) / pi
        count[t] += (1.0 - lam) / pi
    # The units are the tasks with a comparison at this lambda (as the bootstrap resamples):
    # labels only (lambda 0), tasks 3 and 5 have none.
    grad = [n * p - w for n, w in zip(count, won, strict=True) if n > 0]
    units = len(grad)
    assert units == (4 if lam == 0.0 else 6)
    mean = sum(grad) / units
    v = units / (units - 1) * sum((g - mean) ** 2 for g in grad)
    h = sum(count) * p * (1 - p)
    var_gap = v / h**2  # of beta_0 - beta_1; each log-strength is half the gap
    cov = sandwich_covariance(_data(), lam, beta, 0.0)
    np.testing.assert_allclose(cov, var_gap / 4 * np.array([[1, -1], [-1, 1]]), rtol=1e-9)


def test_every_anchored_interval_contains_its_sandwich_interval() -> None:
    data = _data()
    fit = anchored_bootstrap(data, lam=1.0, n_resamples=50)
    beta = fit.bootstrap.point.log_strength
    half = math.sqrt(6 / 5) * student_t.ppf(0.975, 5) * np.sqrt(
        np.diag(sandwich_covariance(data, 1.0, beta, fit.bootstrap.point.prior))
    )
    floored = floored_anchored_intervals(fit, data)["log_strength"]
    assert np.all(floored.lower <= beta - half + 1e-12)
    assert np.all(floored.upper >= beta + half - 1e-12)
    plain = fit.bootstrap.intervals()["log_strength"]
    assert np.all(floored.lower <= plain.lower) and np.all(floored.upper >= plain.upper)
