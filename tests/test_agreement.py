"""Agreement statistics against hand computation and scikit-learn."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from konkord.stats.agreement import (
    TIE,
    agreement_without_ties,
    cohens_kappa,
    confusion_matrix,
    exact_agreement,
    grouped_agreement,
    kappa_bootstrap,
    length_quartiles,
    proportion,
)


def test_46_of_75_gives_the_published_wilson_interval() -> None:
    agreement = proportion(46, 75)
    assert (round(100 * agreement.rate, 1), round(100 * agreement.low, 1)) == (61.3, 50.0)
    assert round(100 * agreement.high, 1) == 71.5


def test_wilson_by_hand_formula() -> None:
    # Wilson with z = 1.959964: centre (p + z^2/2n) / (1 + z^2/n), half-width as in the formula.
    k, n, z = 7, 20, 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    result = proportion(k, n)
    assert result.low == pytest.approx(centre - half, abs=1e-12)
    assert result.high == pytest.approx(centre + half, abs=1e-12)


def test_exact_agreement_counts_ties_as_a_category() -> None:
    human = [0, 1, TIE, TIE, 0]
    judge = [0, 0, TIE, 1, 0]
    result = exact_agreement(human, judge)
    assert (result.k, result.n) == (3, 5)


def test_no_comparisons_is_undefined_not_zero() -> None:
    result = exact_agreement([], [])
    assert result.n == 0 and math.isnan(result.rate) and math.isnan(result.low)
    assert math.isnan(cohens_kappa([], []))
    assert math.isnan(kappa_bootstrap([], []).value)


def test_without_ties_drops_a_comparison_with_a_tie_on_either_side() -> None:
    human = [0, 1, TIE, 0, 1, TIE]
    judge = [0, 0, 0, TIE, 1, TIE]
    result = agreement_without_ties(human, judge)
    assert (result.k, result.n) == (2, 3)


def test_confusion_rows_are_the_first_rater() -> None:
    matrix = confusion_matrix([0, 0, 1, TIE], [0, 1, 1, 0])
    assert matrix.tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 0]]


def test_kappa_by_hand() -> None:
    # observed 3/4; marginals (1/2, 1/2) and (1/4, 3/4): chance 1/2; kappa = (3/4 - 1/2) / (1/2).
    assert cohens_kappa([0, 0, 1, 1], [0, 1, 1, 1]) == pytest.approx(0.5)


def test_kappa_matches_scikit_learn_on_random_raters() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(5, 200))
        x = rng.integers(0, 3, n)
        y = np.where(rng.random(n) < 0.6, x, rng.integers(0, 3, n))
        expected = cohen_kappa_score(x, y, labels=[0, 1, 2])
        assert cohens_kappa(x, y) == pytest.approx(expected, abs=1e-12)


def test_kappa_is_undefined_when_both_raters_use_one_category() -> None:
    assert math.isnan(cohens_kappa([TIE, TIE, TIE], [TIE, TIE, TIE]))


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 3, 300)
    y = np.where(rng.random(300) < 0.7, x, rng.integers(0, 3, 300))
    first = kappa_bootstrap(x, y, n_resamples=500, seed=4)
    again = kappa_bootstrap(x, y, n_resamples=500, seed=4)
    other = kappa_bootstrap(x, y, n_resamples=500, seed=5)
    assert first == again
    assert first != other
    assert first.low < first.value < first.high
    assert first.defined_resamples == 500
    # the normal-approximation standard error of kappa at n = 300 is about 0.04
    assert 0.08 < first.high - first.low < 0.25


def _floor(k: int, n: int, chance: float) -> tuple[float, float]:
    low, high = proportion(k, n).low, proportion(k, n).high
    return (low - chance) / (1 - chance), (high - chance) / (1 - chance)


def test_one_cluster_gives_the_raw_count_floor_not_a_point() -> None:
    # one cluster: every resample equals the data. Counted in both orientations the 8
    # comparisons have rows (x) 3, 3, 2 and columns (y) 4, 4, 0: chance (12 + 12) / 64.
    x, y = [0, 1, 2, 0], [0, 1, 1, 0]
    result = kappa_bootstrap(x, y, clusters=[7, 7, 7, 7], n_resamples=50)
    assert (result.low, result.high) == pytest.approx(_floor(3, 4, 24 / 64))
    assert result.low < result.value < result.high


def test_perfect_agreement_gives_kappa_one_with_a_real_interval() -> None:
    x = [0, 1, 2, 0, 1, 2, 0, 1]
    result = kappa_bootstrap(x, x, n_resamples=200)
    # both orientations: marginals (3/8, 3/8, 2/8) on both sides, chance 22/64
    assert result.value == 1.0 and result.high == pytest.approx(1.0)
    assert result.low == pytest.approx(_floor(8, 8, 22 / 64)[0])


def test_grouped_agreement_keeps_first_seen_order() -> None:
    groups = grouped_agreement([0, 1, 0, 1], [0, 0, 0, 1], ["t2", "t1", "t2", "t1"])
    assert list(groups) == ["t2", "t1"]
    assert (groups["t2"].k, groups["t2"].n, groups["t1"].k, groups["t1"].n) == (2, 2, 1, 2)


def test_length_quartiles_split_at_the_percentiles() -> None:
    lengths = [10, 20, 30, 40, 50, 60, 70, 80]
    result = length_quartiles(lengths)
    assert result.quartile.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert result.ranges == ((10, 20), (30, 40), (50, 60), (70, 80))


def test_equal_lengths_share_a_quartile() -> None:
    result = length_quartiles([5, 5, 5, 5, 9])
    assert set(result.quartile[:4].tolist()) == {0}
    assert result.ranges[0] == (5, 5)
    assert result.ranges[1] is None


def test_mismatched_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        exact_agreement([0, 1], [0])
    with pytest.raises(ValueError, match=r"0\.\.2"):
        exact_agreement([3], [0])
