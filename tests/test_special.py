"""The statistics' own special functions (`konkord.stats.special`) and connected components
(`konkord.stats.components`) against independent references: exact rational arithmetic,
50-digit arithmetic (mpmath), closed forms, and scipy, which they replace on the report's path.
"""

from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import scipy.special
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components as scipy_components

from konkord.stats import special
from konkord.stats.components import connected_components

mpmath.mp.dps = 50
DEGREES = [1, 2, 3, 4, 5, 9, 19, 29, 99, 999, 1999, 9999, 10_000, 99_999, 10**6]
PROBABILITIES = [1e-9, 1e-6, 1.3e-4, 0.0013, 0.025, 0.1, 0.3, 0.49, 0.5, 0.6, 0.8, 0.975,
                 1 - 1.3e-4, 1 - 1e-6]  # fmt: skip


def _t_cdf(t: float, df: float) -> mpmath.mpf:
    """Student's t distribution function in 50 digits, from the incomplete beta function."""
    t, n = mpmath.mpf(t), mpmath.mpf(df)
    tail = mpmath.betainc(n / 2, mpmath.mpf(1) / 2, 0, n / (n + t * t), regularized=True) / 2
    return 1 - tail if t > 0 else tail


def _t_quantile(df: float, p: float) -> float:
    return float(mpmath.findroot(lambda t: _t_cdf(t, df) - p, float(scipy.special.stdtrit(df, p))))


@pytest.mark.parametrize("df", DEGREES)
def test_t_quantile_agrees_with_fifty_digit_arithmetic(df: float) -> None:
    for p in PROBABILITIES:
        exact = _t_quantile(df, p)
        ours = float(special.stdtrit(df, p))
        assert ours == pytest.approx(exact, rel=2e-13, abs=1e-15), (df, p)


def test_t_quantile_closed_forms_and_edges() -> None:
    for p in (1e-12, 0.01, 0.3, 0.7, 0.975, 1 - 1e-12):
        q = mpmath.mpf(p)  # the closed forms in 50 digits (in doubles, p - 1/2 rounds)
        cauchy = float(mpmath.tan(mpmath.pi * (q - mpmath.mpf(1) / 2)))
        assert special.stdtrit(1, p) == pytest.approx(cauchy, rel=1e-14)
        two = float((2 * q - 1) / mpmath.sqrt(2 * q * (1 - q)))
        assert special.stdtrit(2, p) == pytest.approx(two, rel=1e-13)
    assert special.stdtrit(10**7, 0.975) == pytest.approx(special.ndtri(0.975), rel=1e-6)
    assert special.stdtrit(5, 0.0) == -math.inf and special.stdtrit(5, 1.0) == math.inf
    assert math.isnan(special.stdtrit(5, 1.5)) and math.isnan(special.stdtrit(0, 0.5))
    assert special.stdtrit(7, 0.5) == 0.0
    # Elementwise, as scipy's: arrays in, an array of the same shape out.
    got = special.stdtrit(np.array([[3.0], [30.0]]), np.array([0.9, 0.99]))
    assert got.shape == (2, 2)
    np.testing.assert_allclose(got, scipy.special.stdtrit([[3.0], [30.0]], [0.9, 0.99]),
                               rtol=1e-13)  # fmt: skip


def test_t_distribution_function_agrees_with_fifty_digit_arithmetic() -> None:
    for df in (1, 3, 10, 100, 1000, 10_000):
        for t in (-40.0, -3.7, -1.4, -0.01, 0.0, 0.3, 2.0, 12.0):
            assert special.stdtr(df, t) == pytest.approx(float(_t_cdf(t, df)), rel=1e-12)


def test_binomial_tail_is_the_exact_sum() -> None:
    """P(X <= k) for X ~ Binomial(n, 1/2) (the sign test's) against exact fractions, and
    at other p against scipy."""
    for n in (1, 2, 7, 40, 333, 1000, 3000):
        for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            exact = Fraction(sum(math.comb(n, j) for j in range(k + 1)), 2**n)
            assert special.bdtr(k, n, 0.5) == pytest.approx(float(exact), rel=1e-14), (k, n)
    k = np.arange(0, 60)
    for p in (0.1, 0.37, 0.9):
        np.testing.assert_allclose(special.bdtr(k, 60, p), scipy.special.bdtr(k, 60, p),
                                   rtol=1e-11)  # fmt: skip
    assert math.isnan(special.bdtr(-1, 5, 0.5))


def test_normal_functions_and_logistic_against_scipy() -> None:
    x = np.linspace(-37.0, 9.0, 2001)
    exact = np.array([float(mpmath.ncdf(v)) for v in x])
    # Far out, the tail moves by x^2 times any relative change of x: its condition number.
    error = np.abs(special.ndtr(x) - exact) / exact
    assert np.all(error <= 2 * np.finfo(float).eps * np.maximum(x * x, 1.0))
    np.testing.assert_allclose(special.ndtr(x), scipy.special.ndtr(x), rtol=2e-13)
    p = np.concatenate([np.logspace(-300, -1, 400), np.linspace(0.01, 0.99, 99),
                        1 - np.logspace(-15, -2, 100)])  # fmt: skip
    np.testing.assert_allclose(special.ndtri(p), scipy.special.ndtri(p), rtol=2e-15)
    assert special.ndtri(0.0) == -math.inf and special.ndtri(1.0) == math.inf
    assert math.isnan(special.ndtri(1.2)) and math.isnan(special.ndtr(math.nan))
    x = np.linspace(-800.0, 800.0, 16001)
    np.testing.assert_allclose(special.expit(x), scipy.special.expit(x), rtol=1e-15, atol=0)
    assert isinstance(special.ndtri(0.975), float)  # a scalar for a scalar


def test_components_match_scipy() -> None:
    rng = np.random.default_rng(7)
    for n, density in [(1, 0.0), (5, 0.0), (12, 0.08), (30, 0.05), (60, 0.02), (40, 0.3)]:
        graph = rng.random((n, n)) < density  # one direction only: either links
        count, labels = connected_components(graph)
        want_count, want_labels = scipy_components(csr_matrix(graph), directed=False)
        assert count == want_count
        # the same partition: labels agree up to renaming
        pairs = set(zip(labels.tolist(), want_labels.tolist(), strict=True))
        assert len(pairs) == count
        assert labels[0] == 0 and all(np.diff(np.unique(labels, return_index=True)[1]) > 0)


def test_the_statistics_import_no_scipy() -> None:
    """What the report computes with imports numpy only: scipy costs a third of a second."""
    code = (
        "import sys; import konkord.stats.resample, konkord.stats.floors, "
        "konkord.stats.style_boot, konkord.stats.familywise, konkord.stats.judges, "
        "konkord.stats.diagnostics, konkord.stats.design, konkord.stats.agreement; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
