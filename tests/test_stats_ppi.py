"""The human-anchored (prediction-powered) Bradley-Terry estimator, against hand computations,
choix, and simulated fields whose people's ranking is known."""

from __future__ import annotations

import math

import choix
import numpy as np
import pytest

from konkord.stats.anchored_sim import coverage_study, simulate_biased_judge_field
from konkord.stats.ppi import (
    anchored_bootstrap,
    anchored_data,
    clipped_resample_count,
    effective_labels,
    feasible,
    judge_only_data,
    tuned_lambda,
)


def _two_model_case() -> tuple[list[tuple[int, float]], list[tuple[int, float, float, float]]]:
    """Judge outcomes (task, score of model 0) on 6 tasks; labels (task, person, judge, pi)."""
    judge = [(0, 1.0), (1, 1.0), (2, 0.5), (3, 1.0), (4, 0.0), (5, 1.0)]
    labels = [(0, 1.0, 1.0, 0.5), (2, 0.0, 0.5, 0.5), (4, 0.0, 0.0, 0.25)]
    return judge, labels


def _pack_two(judge: list[tuple[int, float]], labels: list[tuple[int, float, float, float]]):
    return anchored_data(
        ([t for t, _ in judge], [0] * len(judge), [1] * len(judge), [s for _, s in judge]),
        ([t for t, *_ in labels], [0] * len(labels), [1] * len(labels), [y for _, y, _, _ in labels]),
        [h for _, _, h, _ in labels],
        [p for *_, p in labels],
        n_models=2,
        n_tasks=6,
    )


@pytest.mark.parametrize("lam", [0.0, 0.3, 1.0])
def test_two_models_match_the_closed_form(lam: float) -> None:
    """With two models and no prior the fit is logit(effective wins / effective comparisons)."""
    judge, labels = _two_model_case()
    wins = lam * sum(s for _, s in judge)
    count = lam * len(judge)
    for _, person, judged, pi in labels:
        wins += (person - lam * judged) / pi
        count += (1.0 - lam) / pi
    expected_gap = math.log(wins / count) - math.log(1.0 - wins / count)
    fit = anchored_bootstrap(_pack_two(judge, labels), lam=lam, n_resamples=20, prior=0.0)
    beta = fit.bootstrap.point.log_strength
    assert fit.lam == lam
    assert beta[0] - beta[1] == pytest.approx(expected_gap, abs=1e-8)


def _scalar_lambda(
    judge: list[tuple[int, float]], labels: list[tuple[int, float, float, float]]
) -> float:
    """In one dimension the sandwich terms cancel: lambda* = -cov(a, d) / var(d) over tasks,
    unclipped."""
    data = _pack_two(judge, labels)
    # The classical (lambda = 1) estimate, where the tuning is evaluated.
    point = anchored_bootstrap(data, lam=1.0, n_resamples=10).bootstrap.point.log_strength
    p = 1.0 / (1.0 + math.exp(-(point[0] - point[1])))
    a = [0.0] * 6
    d = [0.0] * 6
    for t, s in judge:
        d[t] += -(s - p)
    for t, person, judged, pi in labels:
        a[t] += -(person - p) / pi
        d[t] -= -(judged - p) / pi
    mean_a, mean_d = sum(a) / 6, sum(d) / 6
    cov = sum((x - mean_a) * (y - mean_d) for x, y in zip(a, d, strict=True))
    var = sum((y - mean_d) ** 2 for y in d)
    return -cov / var


def test_two_models_tuned_lambda_matches_the_scalar_formula() -> None:
    judge, labels = _two_model_case()
    expected = min(1.0, max(0.0, _scalar_lambda(judge, labels)))
    assert tuned_lambda(_pack_two(judge, labels)) == pytest.approx(expected, abs=1e-9)


def test_an_interior_tuned_lambda_matches_the_scalar_formula() -> None:
    # Unclipped: a wrong centring or scale of the gradients shows here, not at 1.0.
    judge, labels = _two_model_case()
    labels = [*labels, (1, 0.0, 1.0, 0.5)]  # a person overrules the judge on task 1
    expected = _scalar_lambda(judge, labels)
    assert 0.3 < expected < 0.7  # 0.487
    assert tuned_lambda(_pack_two(judge, labels)) == pytest.approx(expected, abs=1e-9)


def test_labels_only_is_the_plain_fit_of_the_labels_as_choix_computes_it() -> None:
    """lambda = 0 with equal inclusion probabilities: the labels' own Bradley-Terry fit."""
    rng = np.random.default_rng(3)
    n_models, n_tasks = 4, 30
    a, b = np.triu_indices(n_models, k=1)
    task = np.repeat(np.arange(n_tasks), a.size)
    i, j = np.tile(a, n_tasks), np.tile(b, n_tasks)
    strength = np.array([1.0, 0.3, -0.2, -1.1])
    person = (rng.random(task.size) < 1 / (1 + np.exp(-(strength[i] - strength[j])))) * 1.0
    judge = (rng.random(task.size) < 0.5) * 1.0  # a useless judge: lambda 0 must ignore it
    sample = rng.choice(task.size, size=120, replace=False)
    data = anchored_data(
        (task, i, j, judge), (task[sample], i[sample], j[sample], person[sample]),
        judge[sample], np.full(120, 120 / task.size), n_models, n_tasks,
    )
    beta = anchored_bootstrap(data, lam=0.0, n_resamples=10, prior=0.0).bootstrap.point.log_strength
    pairs = [
        (int(i[k]), int(j[k])) if person[k] == 1.0 else (int(j[k]), int(i[k])) for k in sample
    ]
    reference = choix.opt_pairwise(n_models, pairs, alpha=0.0, tol=1e-12)
    reference = reference - reference.mean()
    np.testing.assert_allclose(beta, reference, atol=1e-5)


def test_a_useless_judge_is_tuned_away_and_a_faithful_one_is_used() -> None:
    useless = simulate_biased_judge_field(5, 80, 150, bias=0.0, judge_accuracy=0.5, seed=4)
    faithful = simulate_biased_judge_field(
        5, 80, 150, bias=0.0, judge_accuracy=0.95, labeller_accuracy=0.95, seed=4
    )
    assert tuned_lambda(useless.data) < 0.2
    assert tuned_lambda(faithful.data) > 0.6


def test_without_labels_the_anchored_fit_is_the_judges_fit() -> None:
    field = simulate_biased_judge_field(4, 40, 50, bias=1.0, seed=2)
    bare = judge_only_data(field.data)
    assert bare.n_labelled == 0 and tuned_lambda(bare) == 1.0
    from konkord.stats import bootstrap, comparisons

    judge = bootstrap(
        comparisons(field.judge_task, field.judge_i, field.judge_j, field.judge_score, 4, 40),
        n_resamples=50,
    )
    anchored = anchored_bootstrap(bare, n_resamples=50)
    np.testing.assert_allclose(
        anchored.bootstrap.point.log_strength, judge.point.log_strength, atol=1e-10
    )


def test_an_infeasible_pair_is_clipped_to_all_wins_and_the_fit_stays_finite() -> None:
    # 2 comparisons of (0, 1), yet an effective score of 3 for model 0 and -1 for model 1.
    wins = np.array([[[0.0, 3.0], [-1.0, 0.0]]])
    clipped, changed = feasible(wins)
    assert changed == 1
    np.testing.assert_allclose(clipped[0], [[0.0, 2.0], [0.0, 0.0]])
    data = anchored_data(
        ([0, 1], [0, 0], [1, 1], [1.0, 1.0]), ([0], [0], [1], [1.0]), [0.0], [0.1], 2, 2
    )
    fit = anchored_bootstrap(data, lam=1.0, n_resamples=20)
    assert np.all(np.isfinite(fit.bootstrap.log_strength))


def test_the_resamples_that_needed_clipping_are_counted() -> None:
    raw = np.zeros((4, 3, 3))
    raw[:, 0, 1], raw[:, 1, 0] = 1.0, 1.0  # one comparison each way: feasible
    raw[1, 0, 1], raw[1, 1, 0] = 2.5, -0.5  # two comparisons, 2.5 won: clipped to 2
    raw[3, 1, 2], raw[3, 2, 1] = -1.0, 3.0  # and one below no wins
    wins, changed = feasible(raw)
    assert changed == 2 and clipped_resample_count(raw, wins) == 2
    data = anchored_data(
        ([0, 1], [0, 0], [1, 1], [1.0, 1.0]), ([0], [0], [1], [1.0]), [0.0], [0.1], 2, 2
    )
    fit = anchored_bootstrap(data, lam=1.0, n_resamples=40)
    assert fit.resamples == 40
    # Every resample that draws the labelled task twice and the other none is infeasible.
    assert 0 < fit.clipped_resamples < 40


def test_bad_inputs_name_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="inclusion"):
        anchored_data(([0], [0], [1], [1.0]), ([0], [0], [1], [1.0]), [1.0], [0.0], 2, 1)
    with pytest.raises(ValueError, match="person's score"):
        anchored_data(([0], [0], [1], [1.0]), ([0], [0], [1], [2.0]), [1.0], [0.5], 2, 1)
    with pytest.raises(ValueError, match="one length"):
        anchored_data(([0], [0], [1], [1.0]), ([0], [0], [1], [1.0]), [1.0, 0.0], [0.5], 2, 1)


def test_effective_labels_scale_with_the_variance_ratio() -> None:
    assert effective_labels(150, 2.0, 1.0) == 300.0
    assert math.isnan(effective_labels(150, 1.0, 0.0))


@pytest.mark.slow
def test_a_biased_judge_misses_peoples_ranking_and_the_anchored_interval_covers_it() -> None:
    """A judge biased by 1 logit toward one model: 5 models, 100 tasks, 150 labels.

    A small version of benchmarks/bench_anchored.py (which runs 1,000 fields): the judge-only
    interval covers people's win rates well under half the time, the anchored one close to
    95%, and it is narrower than the labels-only interval.
    """
    study = coverage_study(40, 5, 100, 150, bias=1.0, resamples=200, seed=5)
    judge, labels, anchored = study.rows
    assert judge.coverage < 0.5
    assert anchored.coverage > 0.88
    assert labels.coverage > 0.88
    assert anchored.mean_width < labels.mean_width
    assert study.mean_effective_labels > 150


def test_with_an_unbiased_judge_the_anchored_and_judge_only_rankings_agree() -> None:
    """A judge as accurate as people and without bias: the judge-only estimate lies in the
    anchored interval for nearly every model, and the anchored ranking never significantly
    reverses a pair the judge orders (benchmarks/bench_anchored.py runs 500 fields)."""
    from konkord.stats import bootstrap, comparisons, pairwise_differences

    rng = np.random.default_rng(8)
    inside = total = 0
    for f in range(15):
        field = simulate_biased_judge_field(
            5, 80, 150, 0.0, judge_accuracy=0.9, labeller_accuracy=0.9, seed=rng
        )
        judge = bootstrap(
            comparisons(field.judge_task, field.judge_i, field.judge_j, field.judge_score, 5, 80),
            n_resamples=200, seed=f,
        )
        anchored = anchored_bootstrap(field.data, n_resamples=200, seed=f).bootstrap
        av = anchored.intervals()["expected_win_rate"]
        j = judge.point.expected_win_rate
        inside += int(((av.lower <= j) & (j <= av.upper)).sum())
        total += 5
        diffs = pairwise_differences(anchored)
        for hi in range(5):
            for lo in range(5):
                if j[hi] > j[lo]:
                    assert not diffs.upper[hi, lo] < 0, "a significant reversal"
    assert inside / total >= 0.9


def test_the_effective_matrix_fit_minimises_the_ppi_loss_itself() -> None:
    """A second implementation: scipy minimises the prediction-powered loss written out term by
    term (judge loss on all pairs, plus weighted people-minus-judge loss on labelled ones)."""
    from scipy.optimize import minimize

    field = simulate_biased_judge_field(4, 30, 60, bias=0.8, seed=11)
    rng = np.random.default_rng(0)
    pi = rng.uniform(0.1, 0.6, size=60)  # unequal inclusion probabilities
    sample = rng.choice(field.judge_score.size, size=60, replace=False)
    person = (rng.random(60) < 0.7).astype(float)
    t, i, j, s = field.judge_task, field.judge_i, field.judge_j, field.judge_score
    data = anchored_data((t, i, j, s), (t[sample], i[sample], j[sample], person), s[sample],
                         pi, 4, 30)
    lam = 0.6

    def log_loss(beta: np.ndarray, a: np.ndarray, b: np.ndarray, y: np.ndarray) -> np.ndarray:
        d = beta[a] - beta[b]
        return -(y * d) + np.logaddexp(0.0, d)

    def loss(free: np.ndarray) -> float:
        beta = np.concatenate([[0.0], free])
        total = lam * log_loss(beta, i, j, s).sum()
        total += (
            (log_loss(beta, i[sample], j[sample], person)
             - lam * log_loss(beta, i[sample], j[sample], s[sample])) / pi
        ).sum()
        return float(total)

    reference = minimize(loss, np.zeros(3), method="BFGS", options={"gtol": 1e-10}).x
    reference = np.concatenate([[0.0], reference])
    beta = anchored_bootstrap(data, lam=lam, n_resamples=10, prior=0.0).bootstrap.point.log_strength
    np.testing.assert_allclose(beta - beta[0], reference, atol=1e-5)
