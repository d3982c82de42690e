"""Rankings: difference intervals, chained rank groups, claims in words, tasks to separate."""

from __future__ import annotations

import math

import numpy as np
import pytest

from konkord.stats.bt import BTFit, expected_win_rate
from konkord.stats.planning import planned_tasks, sign_test_min_tasks, tasks_to_separate
from konkord.stats.ranking import pairwise_differences, rank
from konkord.stats.ranking_text import describe_claims, describe_separations
from konkord.stats.resample import Bootstrap, bootstrap
from konkord.stats.simfield import simulate_field

NAMES = ["alpha", "bravo", "charlie", "delta"]


def _hand_bootstrap(point: list[float], draws: np.ndarray, n_tasks: int = 25) -> Bootstrap:
    """A bootstrap with chosen draws and plain percentile intervals, to test the logic alone."""
    beta = np.asarray(point, dtype=float)
    m = beta.size
    fit = BTFit(
        log_strength=beta,
        rating=np.exp(beta),
        expected_win_rate=expected_win_rate(beta),
        raw_win_rate=np.full(m, 0.5),
        comparisons=np.ones(m, dtype=np.int64),
        iterations=1,
        gradient_norm=0.0,
        converged=True,
        prior=0.5,
    )
    return Bootstrap(
        mode="task",
        method="percentile",
        expand=False,
        level=0.95,
        seed=0,
        n_units=n_tasks,
        n_tasks=n_tasks,
        point=fit,
        log_strength=draws,
        rating=np.exp(draws),
        expected_win_rate=expected_win_rate(draws),
        raw_win_rate=np.full(draws.shape, 0.5),
        jackknife=None,
        iterations_max=1,
        n_converged=draws.shape[0],
        n_fits=draws.shape[0],
    )


def _draws(point: list[float], spread: list[float], n: int = 4001) -> np.ndarray:
    """Draws shifted by a shared uniform noise per model, so each difference has a known range."""
    u = np.linspace(-1.0, 1.0, n)
    return np.asarray(point)[None, :] + np.outer(u, spread)


def test_rank_ranges_where_chained_groups_hid_a_supported_ordering() -> None:
    # a-b and b-c are not separated, a-c is. Chaining made one group "1=" for all three,
    # hiding "alpha above charlie"; rank ranges show it: alpha 1-2, bravo 1-3, charlie 2-3.
    point = [0.6, 0.3, 0.0]
    draws = _draws(point, [0.0, 0.5, 0.0])  # b moves by +-0.5: a-b and b-c straddle 0
    ranking = rank(_hand_bootstrap(point, draws))
    assert ranking.rank_best.tolist() == [1, 1, 2]
    assert ranking.rank_worst.tolist() == [2, 3, 3]
    assert ranking.groups == ((0,), (1,), (2,))
    assert [(c.upper, c.lower) for c in ranking.claims] == [(0, 2)]
    assert describe_claims(ranking, NAMES) == ["alpha ranks above charlie."]
    assert len(ranking.separations) == 2


def test_overlapping_model_intervals_can_still_be_separated() -> None:
    # Both strengths move together: their own intervals overlap, their difference does not.
    point = [0.2, 0.0]
    draws = _draws(point, [1.0, 1.0])
    boot = _hand_bootstrap(point, draws)
    own = boot.intervals()["log_strength"]
    assert own.lower[0] < own.upper[1]
    diffs = pairwise_differences(boot)
    assert diffs.lower[0, 1] == pytest.approx(0.2)
    assert diffs.separated(0, 1) and not diffs.separated(0, 0)
    assert diffs.prob_above[0, 1] == 1.0 and diffs.prob_above[1, 0] == 0.0
    assert rank(boot).groups == ((0,), (1,))


def test_prob_above_is_the_share_of_resamples() -> None:
    point = [0.1, 0.0]
    draws = np.array([[0.0, 0.1], [0.2, 0.0], [0.3, 0.0], [0.0, 0.0]])
    diffs = pairwise_differences(_hand_bootstrap(point, draws))
    assert diffs.prob_above[0, 1] == pytest.approx((2 + 0.5) / 4)
    assert diffs.prob_above[1, 0] == pytest.approx((1 + 0.5) / 4)


def test_tasks_to_separate_scales_with_the_square_of_width_over_gap() -> None:
    # At even odds the near edge must move from -0.5 to 0: width 1.0 -> 0.5, tasks x 4.
    assert tasks_to_separate(0.5, 1.0, 25, power=0.5) == 100
    z = 1.959963984540054
    want = math.ceil(25 * ((z + 0.8416212335729143) / z * 1.0 / 0.5) ** 2)
    assert tasks_to_separate(0.5, 1.0, 25, power=0.8) == want
    assert tasks_to_separate(0.0, 1.0, 25) is None
    assert tasks_to_separate(-0.5, 1.0, 25, power=0.5) == 100


def test_separation_estimate_for_an_unseparated_pair() -> None:
    point = [0.5, 0.0]
    draws = _draws(point, [0.0, 1.0])  # difference interval about 0.5 -+ 0.95
    ranking = rank(_hand_bootstrap(point, draws, n_tasks=30))
    (sep,) = ranking.separations
    assert (sep.upper, sep.lower) == (0, 1)
    assert sep.half_width == pytest.approx(0.95, abs=1e-3)
    assert sep.tasks_even_odds == math.ceil(30 * (sep.half_width / 0.5) ** 2)
    text = describe_separations(ranking, NAMES)[0]
    assert text.startswith("alpha and bravo are not separated at 30 tasks")
    # Planned on the gap less z_0.9 = 1.2816 standard errors (0.95 / 1.96 = 0.485): below 0,
    # so no task count is promised.
    assert sep.planning_gap is None and sep.tasks_needed is None
    assert text.endswith(
        "the gap observed is too uncertain to say how many tasks would separate them "
        "(it is within 1.28 standard errors of 0)."
    )
    point = [0.8, 0.0]  # the same interval around a gap of 0.8: 0.8 - 1.2816 * 0.4847
    (sep,) = rank(_hand_bootstrap(point, _draws(point, [0.0, 1.0]), n_tasks=30)).separations
    z, z80, z90 = 1.959963984540054, 0.8416212335729143, 1.2815515655446004
    se = sep.half_width / z
    assert sep.planning_gap == pytest.approx(0.8 - z90 * se)
    assert sep.tasks_needed == math.ceil(30 * ((z + z80) * se / (0.8 - z90 * se)) ** 2)
    text = describe_separations(rank(_hand_bootstrap(point, _draws(point, [0.0, 1.0]),
                                                      n_tasks=30)), NAMES)[0]
    assert "planning on a gap of 0.18 in log-strength" in text
    assert "larger with about 90% probability), about 1,700 tasks would give an 80% chance" in text


def test_planned_tasks_at_a_clear_gap_and_never_below_the_sign_test() -> None:
    z, z80, z90 = 1.959963984540054, 0.8416212335729143, 1.2815515655446004
    planning, needed = planned_tasks(1.0, z * 0.4, 10)  # standard error 0.4
    assert planning == pytest.approx(1.0 - z90 * 0.4)
    assert needed == math.ceil(10 * ((z + z80) * 0.4 / (1.0 - z90 * 0.4)) ** 2)  # 65
    # At 2 unanimous-looking tasks the gap is large, but no study under 6 tasks can pass
    # the exact sign test that gates every claim.
    assert planned_tasks(4.0, 2.0, 2) == (pytest.approx(4.0 - z90 * 2.0 / z), 6)
    assert sign_test_min_tasks(0.95) == 6 and sign_test_min_tasks(0.99) == 8
    assert planned_tasks(0.5, z * 0.4, 10) == (None, None)  # within 1.28 standard errors


def test_clear_field_is_fully_ordered_and_level_field_claims_nothing() -> None:
    clear = simulate_field(4, 60, seed=1, strength=[3.0, 1.0, -1.0, -3.0])
    ranking = rank(bootstrap(clear.comparisons, n_resamples=300, seed=0))
    assert ranking.order.tolist() == [0, 1, 2, 3]
    assert ranking.groups == ((0,), (1,), (2,), (3,))
    assert ranking.rank_best.tolist() == ranking.rank_worst.tolist() == [1, 2, 3, 4]
    assert len(ranking.claims) == 6 and not ranking.separations
    assert describe_claims(ranking, NAMES)[0] == "alpha ranks above bravo, charlie and delta."

    level = simulate_field(4, 20, seed=2, strength=[0.0, 0.0, 0.0, 0.0])
    ranking = rank(bootstrap(level.comparisons, n_resamples=300, seed=0))
    assert len(ranking.groups) == 1 and not ranking.claims
    assert describe_claims(ranking, NAMES)[0].startswith("The data supports no ordering")


def test_rounding_noise_is_not_a_separation() -> None:
    # Two models level up to solver rounding: every draw puts model 0 ahead by 1e-14.
    point = [1e-14, 0.0]
    draws = np.tile([1e-14, 0.0], (200, 1)) + np.linspace(0, 1e-15, 200)[:, None]
    ranking = rank(_hand_bootstrap(point, draws))
    assert not ranking.differences.separated(0, 1)
    assert not ranking.claims and ranking.groups == ((0, 1),)
    assert ranking.separations[0].tasks_needed is None


def test_mirrored_half_equals_the_direct_interval() -> None:
    field = simulate_field(4, 15, seed=3, task_effect_sd=1.0, tie_rate=0.1)
    boot = bootstrap(field.comparisons, n_resamples=300, seed=0)
    diffs = pairwise_differences(boot)
    beta, draws = boot.point.log_strength, boot.log_strength
    assert boot.jackknife is not None
    jack = boot.jackknife.log_strength
    for x, y in ((1, 0), (3, 2), (2, 0)):  # below the diagonal: filled by mirroring
        direct = boot.interval(
            np.array(beta[x] - beta[y]), draws[:, x] - draws[:, y], jack[:, x] - jack[:, y]
        )
        assert diffs.lower[x, y] == pytest.approx(float(direct.lower), abs=1e-12)
        assert diffs.upper[x, y] == pytest.approx(float(direct.upper), abs=1e-12)
        gap = draws[:, x] - draws[:, y]
        share = np.mean(gap > 1e-9) + 0.5 * np.mean(np.abs(gap) < 1e-9)
        assert diffs.prob_above[x, y] == pytest.approx(share)
