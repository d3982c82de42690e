"""Style control: features counted by fixed rules, and the Bradley-Terry fit with style
covariates checked by hand, against scipy's optimiser on the same likelihood written as a GLM, against the plain
fit, and its bootstrap against refits of resampled data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from konkord.stats.bt import Comparisons, comparisons, fit_bt
from konkord.stats.gate import gate
from konkord.stats.resample import bootstrap, task_weights
from konkord.stats.style_boot import style_bootstrap
from konkord.stats.style_features import (
    TOKEN_PATTERN,
    feature_matrix,
    normalised_difference,
    style_features,
    token_count,
)
from konkord.stats.style_fit import fit_style_bt, style_data

ANSWER = """# Title

Some **bold** words and __more bold__, then a list:

- one
- two **x**
1. three

```python
# not a header
- not an item
```

## Second header
~~~
unclosed fence
"""


def test_features_are_counted_by_the_documented_rules() -> None:
    counts = style_features(ANSWER)
    assert counts["headers"] == 2  # the "# not a header" line sits inside a code block
    assert counts["list_items"] == 3
    assert counts["bold"] == 3
    assert counts["code_blocks"] == 2  # an unclosed fence counts
    assert style_features("Hello, world!")["tokens"] == 4  # Hello , world !
    assert style_features("")["tokens"] == 0


def test_the_token_count_is_the_patterns_on_every_ascii_character_and_beyond() -> None:
    import random

    rng = random.Random(7)
    alphabet = [chr(c) for c in range(128)] + ["é", "ß", "中", "\u00a0", "\u2028", "٣", "—"]
    for n in range(4000):
        size = rng.randrange(0, 40)
        text = "".join(rng.choice(alphabet if n % 4 == 0 else alphabet[:128]) for _ in range(size))
        assert token_count(text) == len(TOKEN_PATTERN.findall(text)), repr(text)
    for c in range(128):  # each character alone, and in runs beside a letter
        for text in (chr(c), chr(c) * 3, f"a{chr(c)}b", f"{chr(c)}_x9"):
            assert token_count(text) == len(TOKEN_PATTERN.findall(text)), repr(text)


def test_normalised_difference_is_arenas_and_zero_when_both_are_zero() -> None:
    out = normalised_difference(np.array([3.0, 0.0, 0.0, 5.0]), np.array([1.0, 0.0, 2.0, 5.0]))
    np.testing.assert_array_equal(out, [0.5, 0.0, -1.0, 0.0])


def _two_models(groups: list[tuple[float, list[float]]]) -> tuple[np.ndarray, np.ndarray]:
    """Model 0 vs model 1, one comparison per task: (x, scores of model 0) per group."""
    scores, x = [], []
    for value, outcomes in groups:
        scores += outcomes
        x += [value] * len(outcomes)
    return np.array(scores), np.array(x)[:, None]


def test_hand_worked_two_models_one_feature() -> None:
    # With x = +1 model 0 wins 3 of 4, with x = -1 it wins 1 of 4. The model is saturated:
    # sigmoid(d + g) = 3/4 and sigmoid(d - g) = 1/4, so d = 0 and g = logit(3/4) = ln 3.
    scores, x = _two_models([(1.0, [1, 1, 1, 0]), (-1.0, [1, 0, 0, 0])])
    n = scores.size
    comp = comparisons(np.arange(n), np.zeros(n), np.ones(n), scores, 2, n)
    fit = fit_style_bt(style_data(comp, x), prior=0.0)
    assert fit.coefficients[0] == pytest.approx(math.log(3.0), abs=1e-9)
    assert fit.fit.log_strength == pytest.approx([0.0, 0.0], abs=1e-9)
    # Ties count half: at x = -1, two ties and a win each way make 1/2, so d - g = 0 and
    # d + g = ln 3: both are ln(3) / 2, and beta = +-ln(3) / 4.
    scores, x = _two_models([(1.0, [1, 1, 1, 0]), (-1.0, [1, 0, 0.5, 0.5])])
    comp = comparisons(np.arange(n), np.zeros(n), np.ones(n), scores, 2, n)
    fit = fit_style_bt(style_data(comp, x), prior=0.0)
    assert fit.coefficients[0] == pytest.approx(math.log(3.0) / 2, abs=1e-9)
    assert fit.fit.log_strength == pytest.approx([math.log(3) / 4, -math.log(3) / 4], abs=1e-9)


def _field(
    n_models: int, n_tasks: int, gamma: list[float], seed: int, ties: float = 0.15
) -> tuple[Comparisons, np.ndarray]:
    rng = np.random.default_rng(seed)
    beta = rng.normal(0.0, 1.0, n_models)
    a, b = np.triu_indices(n_models, 1)
    task = np.repeat(np.arange(n_tasks), a.size)
    i, j = np.tile(a, n_tasks), np.tile(b, n_tasks)
    swap = rng.random(task.size) < 0.5  # either order of a pair, as the evidence allows
    i, j = np.where(swap, j, i), np.where(swap, i, j)
    x = rng.uniform(-1.0, 1.0, (task.size, len(gamma)))
    p = 1.0 / (1.0 + np.exp(-(beta[i] - beta[j] + x @ np.array(gamma))))
    u = rng.random(task.size)
    # a tie in 15% of comparisons by default, whatever the strengths (shrinks every effect)
    score = np.where(u < (1 - ties) * p, 1.0, np.where(u < (1 - ties) * p + ties, 0.5, 0.0))
    return comparisons(task, i, j, score, n_models, n_tasks), x


def _scipy_fit(comp: Comparisons, x: np.ndarray, prior: float) -> np.ndarray:
    """The same penalised likelihood written as a weighted binomial GLM and minimised by
    scipy's trust-region optimiser: each prior term is a pseudo-observation with outcome 1/2
    and weight 2 * prior; model 0's column is dropped (the likelihood only sees differences)
    and the log-strengths are centred afterwards."""
    from scipy.optimize import minimize
    from scipy.special import expit, log_expit

    m, k = comp.n_models, x.shape[1]
    rows = np.zeros((len(comp), m + k))
    idx = np.arange(len(comp))
    rows[idx, comp.i] += 1.0
    rows[idx, comp.j] -= 1.0
    rows[:, m:] = x
    prior_rows = np.zeros((m + k, m + k))
    prior_rows[:m, :m] = np.eye(m) - 1.0 / m  # against the average opponent
    prior_rows[m:, m:] = np.eye(k)
    design = np.vstack([rows, prior_rows])[:, 1:]
    y = np.concatenate([comp.score, np.full(m + k, 0.5)])
    w = np.concatenate([np.ones(len(comp)), np.full(m + k, 2.0 * prior)])

    def nll(theta: np.ndarray) -> float:
        eta = design @ theta
        return float(-(w * (y * log_expit(eta) + (1 - y) * log_expit(-eta))).sum())

    def grad(theta: np.ndarray) -> np.ndarray:
        out: np.ndarray = -design.T @ (w * (y - expit(design @ theta)))
        return out

    def hess(theta: np.ndarray) -> np.ndarray:
        p = expit(design @ theta)
        out: np.ndarray = (design * (w * p * (1 - p))[:, None]).T @ design
        return out

    res = minimize(nll, np.zeros(design.shape[1]), jac=grad, hess=hess, method="trust-exact",
                   options={"gtol": 1e-10})
    # it may stop on "bad approximation" at rounding level; what counts is the gradient
    assert np.linalg.norm(grad(res.x)) < 1e-8, res.message
    theta = np.concatenate([[0.0], res.x])
    theta[:m] -= theta[:m].mean()
    return theta


@pytest.mark.parametrize("prior", [0.5, 0.0])
def test_fit_matches_scipy_on_the_same_likelihood(prior: float) -> None:
    comp, x = _field(6, 40, [0.7, -0.3, 0.0], seed=3)
    fit = fit_style_bt(style_data(comp, x), prior=prior)
    expected = _scipy_fit(comp, x, prior)
    got = np.concatenate([fit.fit.log_strength, fit.coefficients])
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert fit.fit.converged


def test_zero_covariates_give_the_plain_fit() -> None:
    comp, x = _field(7, 30, [0.0, 0.0], seed=5)
    fit = fit_style_bt(style_data(comp, np.zeros_like(x)))
    plain = fit_bt(comp)
    np.testing.assert_allclose(fit.fit.log_strength, plain.log_strength, atol=1e-9)
    np.testing.assert_allclose(fit.fit.expected_win_rate, plain.expected_win_rate, atol=1e-9)
    assert fit.coefficients == pytest.approx([0.0, 0.0], abs=1e-12)


def test_each_resample_reaches_its_own_refit() -> None:
    comp, x = _field(5, 25, [0.9, 0.2], seed=7)
    data = style_data(comp, x)
    boot = style_bootstrap(data, n_resamples=20, seed=11, tol=1e-7)
    default = style_bootstrap(data, n_resamples=20, seed=11)  # stops at 1e-6 error left
    weights = task_weights(25, 20, 11)
    for b in (0, 7, 19):
        # the resample written out: each task repeated as often as it was drawn
        keep = np.repeat(np.arange(len(comp)), weights[b][comp.task])
        sub = comparisons(
            np.arange(keep.size), comp.i[keep], comp.j[keep], comp.score[keep], 5, keep.size
        )
        refit = fit_style_bt(style_data(sub, x[keep]))
        np.testing.assert_allclose(boot.bootstrap.log_strength[b], refit.fit.log_strength,
                                   atol=1e-6)
        np.testing.assert_allclose(boot.coefficients[b], refit.coefficients, atol=1e-6)
        np.testing.assert_allclose(default.coefficients[b], refit.coefficients, atol=1e-6)
        np.testing.assert_allclose(default.bootstrap.log_strength[b], refit.fit.log_strength,
                                   atol=1e-6)
    # 20 resamples and 25 jackknife fits (one per task left out)
    assert boot.bootstrap.n_converged == default.bootstrap.n_converged == 45
    assert boot.bootstrap.n_fits == 45


def test_resamples_are_the_plain_bootstraps_tasks() -> None:
    comp, x = _field(4, 30, [0.5], seed=9)
    style = style_bootstrap(style_data(comp, x), n_resamples=50, seed=4)
    plain = bootstrap(comp, n_resamples=50, seed=4)
    np.testing.assert_array_equal(style.bootstrap.raw_win_rate, plain.raw_win_rate)


def test_coefficient_interval_covers_and_excludes_as_it_should() -> None:
    comp, x = _field(5, 200, [1.0, 0.0], seed=13, ties=0.0)
    boot = style_bootstrap(style_data(comp, x), n_resamples=200, seed=1)
    iv = boot.coefficient_intervals()
    assert iv.lower[0] > 0.5 and iv.upper[0] < 1.5  # the true 1.0, clearly away from 0
    assert iv.lower[1] < 0.0 < iv.upper[1]  # the true 0.0


@pytest.mark.parametrize("n_tasks", [40, 400])
def test_the_jackknife_is_each_task_left_out_and_refitted(n_tasks: int) -> None:
    # at 40 tasks the jackknife fits step by passes over the data; at 400 they settle by the
    # expansion of style_jackknife.py (error of third order in a move of 1/400)
    comp, x = _field(4, n_tasks, [0.6, -0.4], seed=17)
    data = style_data(comp, x)
    boot = style_bootstrap(data, n_resamples=10, seed=0)
    for t in (0, 13):
        keep = np.flatnonzero(comp.task != t)
        sub = comparisons(comp.task[keep], comp.i[keep], comp.j[keep], comp.score[keep], 4,
                          n_tasks)
        exact = fit_style_bt(style_data(sub, x[keep]))
        # a one-step jackknife (before) was off by about 5% of the move, ~1e-4 here
        np.testing.assert_allclose(boot.coefficient_jackknife[t], exact.coefficients, atol=1e-6)
        assert boot.bootstrap.jackknife is not None
        np.testing.assert_allclose(boot.bootstrap.jackknife.log_strength[t],
                                   exact.fit.log_strength, atol=1e-6)


def _sparse_field(seed: int) -> tuple[Comparisons, np.ndarray]:
    """An uneven field: pairs missing from tasks, a task with none, a pair met twice on a
    task, ties, and people's mean labels (thirds) among the scores."""
    comp, x = _field(5, 40, [0.0], seed=seed)
    rng = np.random.default_rng(seed)
    keep = np.flatnonzero((rng.random(len(comp)) < 0.6) & (comp.task != 7))
    twice = keep[:15]
    rows = np.concatenate([keep, twice])
    score = comp.score[rows].copy()
    score[-5:] = 1.0 / 3.0
    return (comparisons(comp.task[rows], comp.i[rows], comp.j[rows], score, 5, 40),
            x[rows])


@pytest.mark.parametrize("field", ["complete", "sparse"])
def test_with_every_covariate_zero_the_style_ranking_is_the_plain_one_exactly(field: str) -> None:
    # The two bootstraps share their resamples and the style fit ends with the plain fit's
    # own Newton method, its score shifted by exactly 0: nothing may differ, not a bit
    # (before, draws differed by 1e-6, the jackknife by 1e-4 and intervals by 1e-3).
    comp, x = _field(6, 60, [0.0, 0.0], seed=21) if field == "complete" else _sparse_field(4)
    style = style_bootstrap(style_data(comp, np.zeros_like(x)), n_resamples=300, seed=8)
    plain = bootstrap(comp, n_resamples=300, seed=8)
    boot = style.bootstrap
    assert boot.jackknife is not None and plain.jackknife is not None
    np.testing.assert_array_equal(boot.point.log_strength, plain.point.log_strength)
    np.testing.assert_array_equal(boot.log_strength, plain.log_strength)
    np.testing.assert_array_equal(boot.jackknife.log_strength, plain.jackknife.log_strength)
    np.testing.assert_array_equal(boot.raw_win_rate, plain.raw_win_rate)
    assert not np.any(style.coefficients) and not np.any(style.style.coefficients)
    ours, theirs = gate(boot, comp), gate(plain, comp)
    for name, interval in theirs.intervals.items():
        np.testing.assert_array_equal(ours.intervals[name].lower, interval.lower)
        np.testing.assert_array_equal(ours.intervals[name].upper, interval.upper)
    np.testing.assert_array_equal(ours.ranking.differences.lower, theirs.ranking.differences.lower)
    claims = [(c.upper, c.lower) for c in theirs.ranking.claims]
    assert claims and claims == [(c.upper, c.lower) for c in ours.ranking.claims]
    assert theirs.ranking.separations  # some pairs are not separated: the edge is there
    np.testing.assert_array_equal(ours.ranking.rank_best, theirs.ranking.rank_best)
    np.testing.assert_array_equal(ours.ranking.rank_worst, theirs.ranking.rank_worst)


def test_covariates_near_zero_give_nearly_the_plain_ranking() -> None:
    # Continuity: covariates of 1e-7 move nothing by more than about that.
    comp, x = _field(6, 60, [0.0, 0.0], seed=21)
    style = style_bootstrap(style_data(comp, 1e-7 * x), n_resamples=300, seed=8)
    plain = bootstrap(comp, n_resamples=300, seed=8)
    np.testing.assert_allclose(style.bootstrap.log_strength, plain.log_strength, atol=1e-7)
    assert np.any(style.bootstrap.log_strength != plain.log_strength)
    ours, theirs = gate(style.bootstrap, comp).ranking, gate(plain, comp).ranking
    assert [(c.upper, c.lower) for c in ours.claims] == [(c.upper, c.lower) for c in theirs.claims]


def test_a_near_separated_field_stays_finite_and_every_resample_is_its_own_fit() -> None:
    # Model 2 wins every comparison: only the prior keeps it finite, the curvature at the
    # point estimate is far from a resample's own, and such resamples are fitted afresh.
    rng = np.random.default_rng(4)
    n_tasks = 20
    a, b = np.triu_indices(3, 1)
    task = np.repeat(np.arange(n_tasks), 3)
    i, j = np.tile(a, n_tasks), np.tile(b, n_tasks)
    score = np.where(j == 2, 0.0, rng.integers(0, 2, task.size).astype(float))
    x = rng.uniform(-1, 1, (task.size, 1))
    data = style_data(comparisons(task, i, j, score, 3, n_tasks), x)
    boot = style_bootstrap(data, n_resamples=30, seed=2)
    assert np.all(np.isfinite(boot.bootstrap.log_strength))
    assert boot.bootstrap.n_converged == boot.bootstrap.n_fits == 50  # 30 + 20 left out
    weights = task_weights(n_tasks, 30, 2).astype(float)
    for k in (0, 11, 29):
        own = fit_style_bt(data, weights=weights[k])
        np.testing.assert_allclose(boot.bootstrap.log_strength[k], own.fit.log_strength,
                                   atol=2e-5)


def test_feature_matrix_stacks_counts_in_the_names_order_and_a_missing_name_counts_zero() -> None:
    counts = [{"tokens": 12, "bold": 3, "headers": 1}, {"bold": 0, "headers": 2, "tokens": 7}]
    assert feature_matrix(counts, ("bold", "tokens")).tolist() == [[3.0, 12.0], [0.0, 7.0]]
    assert feature_matrix(counts, ("tokens",)).tolist() == [[12.0], [7.0]]
    lacking = [*counts, {"tokens": 5}]  # no "bold": 0, as for every name it lacks
    assert feature_matrix(lacking, ("bold", "tokens")).tolist() == [[3.0, 12.0], [0.0, 7.0],
                                                                      [0.0, 5.0]]
    assert feature_matrix([], ("bold", "tokens")).shape == (0, 2)
