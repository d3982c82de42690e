"""Judges compared with each other: consensus match (leave one judge out), consistency per task,
length preference. References: a tiny run worked by hand, scipy's Kendall tau, Wilson."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import kendalltau

import konkord.stats.judges as judges_module
from konkord.stats import consistency_of_wins, wilson_interval
from konkord.stats.judges import (
    consensus_match,
    length_preference,
    pair_order_agreement,
    panel_figures,
    panel_verdicts,
    panel_wins,
    task_consistency,
)

X, Y, Z = 0, 1, 2
# (judge, task, i, j, score): 3 judges, 3 models, 2 tasks, one combined verdict per pair.
TINY = [
    # judge A: t1 X>Y>Z; t2 Y>X>Z
    (0, 0, X, Y, 1), (0, 0, X, Z, 1), (0, 0, Y, Z, 1),
    (0, 1, Y, X, 1), (0, 1, Y, Z, 1), (0, 1, X, Z, 1),
    # judge B: t1 X beats both, Z beats Y; t2 Y beats X, Y-Z tie, X beats Z
    (1, 0, X, Y, 1), (1, 0, X, Z, 1), (1, 0, Z, Y, 1),
    (1, 1, Y, X, 1), (1, 1, Y, Z, 0.5), (1, 1, X, Z, 1),
    # judge C: t1 Z>Y>X; t2 X>Y>Z
    (2, 0, Z, X, 1), (2, 0, Z, Y, 1), (2, 0, Y, X, 1),
    (2, 1, X, Y, 1), (2, 1, X, Z, 1), (2, 1, Y, Z, 1),
]  # fmt: skip


def tiny_wins() -> np.ndarray:
    g, t, i, j, s = (np.array(col) for col in zip(*TINY, strict=True))
    return panel_wins(panel_verdicts(g, t, i, j, s, n_judges=3, n_models=3, n_tasks=2))


def test_consensus_match_by_hand_on_a_tiny_run() -> None:
    # With one verdict per pair (pooled: two), a task is a balanced round robin, so the
    # Bradley-Terry order is the order of the models' scores on it; equal scores rank level.
    # A, t1: others (B+C) score X 2, Y 1, Z 3 -> Z>X>Y; A says X>Y>Z: XY agree, XZ and YZ
    #   disagree -> 1/3.  A, t2: others X 3, Y 2.5, Z 0.5 -> X>Y>Z; A says Y>X>Z -> 2/3.
    # B, t1: others X 2, Y 2, Z 2, all level -> 1/2.  B, t2: others X 3, Y 3, Z 0 -> X=Y>Z;
    #   B says Y>X>Z (1.5, 1, 0.5): XY level 1/2, XZ 1, YZ 1 -> 5/6.
    # C, t1: others X 4, Y 1, Z 1 -> X>Y=Z; C says Z>Y>X: 0, 0, level 1/2 -> 1/6.
    #   C, t2: others X 2, Y 3.5, Z 0.5 -> Y>X>Z; C says X>Y>Z -> 2/3.
    expected = np.array([[1 / 3, 2 / 3], [1 / 2, 5 / 6], [1 / 6, 2 / 3]])
    figure, pairs = consensus_match(tiny_wins(), n_resamples=200)
    np.testing.assert_allclose(figure.per_task, expected, atol=1e-9)
    np.testing.assert_allclose(figure.mean, expected.mean(axis=1), atol=1e-9)
    assert pairs.tolist() == [[3, 3], [3, 3], [3, 3]]
    # Leave-one-out matters: pooling C's own verdicts into its consensus on t1 (X 4, Y 2, Z 3,
    # so X>Z>Y) would give it 1/3 there, not 1/6.
    assert figure.per_task[2, 0] != pytest.approx(1 / 3)
    lo, hi = figure.lower, figure.upper
    assert np.all(lo <= figure.mean + 1e-12) and np.all(figure.mean <= hi + 1e-12)


def test_consensus_match_counts_only_the_models_the_judge_saw_on_the_task() -> None:
    # One task, models X Y Z. Judge 0 judged only X-Y (X won); judges 1 and 2 judged every
    # pair, both with Z > Y > X. Judge 0's own fit places Z at the prior's centre, between X
    # and Y, but it never saw Z: its match counts the one pair X-Y, which the others reverse.
    wins = np.zeros((3, 1, 3, 3))
    wins[0, 0, 0, 1] = 1.0
    for judge in (1, 2):
        wins[judge, 0, 1, 0] = wins[judge, 0, 2, 0] = wins[judge, 0, 2, 1] = 1.0
    figure, pairs = consensus_match(wins, n_resamples=50)
    assert pairs[0, 0] == 1
    assert figure.per_task[0, 0] == 0.0
    assert pairs[1, 0] == pairs[2, 0] == 3


def test_consensus_match_refuses_two_judges() -> None:
    with pytest.raises(ValueError, match="at least 3 judges"):
        consensus_match(tiny_wins()[:2])


def test_pair_order_agreement_is_one_plus_kendall_tau_over_two() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        x, y = rng.normal(size=6), rng.normal(size=6)
        share, pairs = pair_order_agreement(x, y, np.ones(6, dtype=bool))
        tau = kendalltau(x, y).statistic  # no ties: tau-b is tau-a
        assert pairs == 15
        assert share == pytest.approx((1 + tau) / 2)


def test_absent_models_are_left_out_of_the_pairs() -> None:
    x = np.array([2.0, 1.0, 0.0, 9.0])
    y = np.array([2.0, 1.0, 0.0, -9.0])
    share, pairs = pair_order_agreement(x, y, np.array([True, True, True, False]))
    assert (share, pairs) == (1.0, 3)


def test_consistency_per_task_matches_the_run_level_figure_on_one_task() -> None:
    wins = tiny_wins()[:, :1]  # one task
    figure = task_consistency(wins, n_resamples=50)
    for k in range(3):
        expected = consistency_of_wins(wins[k, 0]).mean
        assert figure.per_task[k, 0] == pytest.approx(expected)


@pytest.mark.parametrize("n_models", [2, 5, 12, 40])
def test_a_judge_that_orders_every_task_cleanly_is_near_100_percent_consistent(
    n_models: int,
) -> None:
    # One comparison per pair per task, all in one order: the ranking's prior capped this
    # at 0.82 (2 models), 0.74 (5) and 0.68 (12); on its source's scale it is near 1.
    clean = np.triu(np.ones((n_models, n_models)), 1)
    wins = np.broadcast_to(clean, (1, 3, n_models, n_models)).copy()
    assert task_consistency(wins, n_resamples=50).mean[0] > 0.985
    assert consistency_of_wins(clean).mean > 0.985
    t, i, j = np.nonzero(wins[0])
    panel = panel_verdicts(np.zeros_like(t), t, i, j, np.ones(t.size), 1, n_models, 3)
    assert panel_figures(panel, n_resamples=50).consistency.mean[0] > 0.985


def test_a_coin_flip_judge_stays_far_from_a_clean_ladder() -> None:
    rng = np.random.default_rng(0)
    upper = np.triu(rng.random((1, 60, 8, 8)) < 0.5, 1).astype(float)
    lower = np.triu(np.ones((8, 8)), 1) - upper
    wins = upper + np.swapaxes(lower, -1, -2)
    assert task_consistency(wins, n_resamples=50).mean[0] < 0.75


def simulated_rows(
    accuracies: tuple[float, ...], n_tasks: int = 40, n_models: int = 5, seed: int = 7
) -> list[tuple[int, int, int, int, float]]:
    """Judges that give the true order of a pair with their accuracy (else a coin), plus one
    quality-blind judge that follows a fixed arbitrary order of each task's answers."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        quality = rng.normal(size=n_models)
        arbitrary = rng.permutation(n_models)  # e.g. the answers' texts sorted alphabetically
        for a, b in itertools.combinations(range(n_models), 2):
            truth = 1.0 if quality[a] > quality[b] else 0.0
            for g, accuracy in enumerate(accuracies):
                right = rng.random() < accuracy
                rows.append((g, t, a, b, truth if right else float(rng.random() < 0.5)))
            blind = 1.0 if arbitrary[a] < arbitrary[b] else 0.0
            rows.append((len(accuracies), t, a, b, blind))
    return rows


def simulated_panel(
    accuracies: tuple[float, ...], n_tasks: int = 40, n_models: int = 5, seed: int = 7
) -> np.ndarray:
    rows = simulated_rows(accuracies, n_tasks, n_models, seed)
    g, t, i, j, s = (np.array(col) for col in zip(*rows, strict=True))
    return panel_wins(panel_verdicts(g, t, i, j, s, len(accuracies) + 1, n_models, n_tasks))


def test_consensus_match_orders_judges_by_accuracy() -> None:
    wins = simulated_panel((0.95, 0.8, 0.65, 0.5), n_tasks=60)[:-1]  # no blind judge
    match = consensus_match(wins, n_resamples=200)[0].mean
    assert list(np.argsort(-match)) == [0, 1, 2, 3]


def test_the_quality_blind_judge_is_most_consistent_and_matches_the_consensus_least() -> None:
    wins = simulated_panel((0.9, 0.75, 0.6), n_tasks=60)
    match = consensus_match(wins, n_resamples=200)[0]
    steadiness = task_consistency(wins, n_resamples=200).mean
    assert int(np.argmin(match.mean)) == 3
    assert match.lower[3] < 0.5 < match.upper[3]  # no better than an unrelated order
    assert match.upper[3] < match.lower[:3].min()
    assert int(np.argmax(steadiness)) == 3  # ... yet the most consistent of all


def test_length_preference_counts_decided_pairs_of_different_length() -> None:
    length_a = [100, 100, 50, 80, 80, 10]
    length_b = [50, 50, 100, 80, 20, 20]
    score_a = [1, 0, 0, 1, 0.5, 0]
    # counted: 0 (longer a won), 1 (shorter b won), 2 (longer b won), 5 (longer b won);
    # 3 has equal lengths, 4 is a tie.
    pref = length_preference(length_a, length_b, score_a)
    assert (pref.longer_won, pref.decided) == (3, 4)
    assert pref.share == 0.75
    assert (pref.low, pref.high) == wilson_interval(3, 4)
    empty = length_preference([1], [1], [1])
    assert empty.decided == 0 and np.isnan(empty.share)


def test_panel_verdicts_names_the_bad_entry() -> None:
    with pytest.raises(ValueError, match=r"judge\[1\] = 5 is outside 0..2"):
        panel_verdicts([0, 5], [0, 0], [0, 1], [1, 2], [1, 0], 3, 3, 1)


def test_block_by_block_figures_equal_the_whole_run_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = simulated_rows((0.9, 0.7), n_tasks=30, n_models=4, seed=1)
    rng = np.random.default_rng(0)
    rows = [rows[k] for k in rng.permutation(len(rows))]  # any order of records
    g, t, i, j, s = (np.array(col) for col in zip(*rows, strict=True))
    panel = panel_verdicts(g, t, i, j, s, 3, 4, 30)
    whole = panel_figures(panel, n_resamples=100)
    monkeypatch.setattr(judges_module, "CHUNK_BYTES", 1)  # one task per block
    blocks = panel_figures(panel, n_resamples=100)
    dense = panel_wins(panel)
    assert whole.consensus is not None and blocks.consensus is not None
    np.testing.assert_allclose(whole.consensus.per_task, blocks.consensus.per_task)
    np.testing.assert_allclose(whole.consistency.per_task, blocks.consistency.per_task)
    np.testing.assert_allclose(whole.consensus.lower, blocks.consensus.lower)
    np.testing.assert_allclose(whole.consensus.per_task, consensus_match(dense, 100)[0].per_task)
    np.testing.assert_allclose(whole.consistency.mean, task_consistency(dense, 100).mean)
    assert (
        panel_figures(
            panel_verdicts(g[g < 2], t[g < 2], i[g < 2], j[g < 2], s[g < 2], 2, 4, 30)
        ).consensus
        is None
    )


def test_figures_do_not_depend_on_names_or_the_order_of_records() -> None:
    # Renaming models (a permutation of their indices), listing judges in another order,
    # turning pairs round and shuffling the records give the same figures per judge.
    rows = simulated_rows((0.9, 0.7, 0.5), n_tasks=25, n_models=5, seed=4)
    g, t, i, j, s = (np.array(col, dtype=float) for col in zip(*rows, strict=True))
    base = panel_figures(panel_verdicts(g, t, i, j, s, 4, 5, 25), n_resamples=100)
    rng = np.random.default_rng(9)
    rename = rng.permutation(5)
    relist = np.array([2, 0, 3, 1])  # judge k is listed as relist[k]
    turn = rng.random(s.size) < 0.5
    i2 = np.where(turn, rename[j.astype(int)], rename[i.astype(int)])
    j2 = np.where(turn, rename[i.astype(int)], rename[j.astype(int)])
    s2 = np.where(turn, 1.0 - s, s)
    shuffle = rng.permutation(s.size)
    other = panel_figures(
        panel_verdicts(
            relist[g.astype(int)][shuffle],
            t[shuffle],
            i2[shuffle],
            j2[shuffle],
            s2[shuffle],
            4,
            5,
            25,
        ),
        n_resamples=100,
    )
    assert base.consensus is not None and other.consensus is not None
    np.testing.assert_allclose(other.consensus.per_task[relist], base.consensus.per_task)
    np.testing.assert_allclose(other.consistency.per_task[relist], base.consistency.per_task)
    np.testing.assert_allclose(other.consensus.lower[relist], base.consensus.lower)


def test_length_preference_does_not_depend_on_which_answer_is_a() -> None:
    rng = np.random.default_rng(2)
    la, lb = rng.integers(10, 20, 200), rng.integers(10, 20, 200)
    score = rng.choice([0.0, 0.5, 1.0], 200)
    assert length_preference(la, lb, score) == length_preference(lb, la, 1.0 - score)


@pytest.mark.parametrize("n_tasks", [1, 3, 5, 8])
def test_a_judge_identical_on_every_task_gets_no_point_interval(n_tasks: int) -> None:
    """Every task the same (4 models, one strict order, three judges agreeing): the task
    bootstrap has nothing to resample; consistency and consensus match show their estimate
    and no interval rather than a point."""
    rows = [
        (g, t, a, b, 1.0)
        for g in range(3)
        for t in range(n_tasks)
        for a, b in itertools.combinations(range(4), 2)
    ]
    g, t, i, j, s = (np.array(col) for col in zip(*rows, strict=True))
    panel = panel_verdicts(g, t, i, j, s, n_judges=3, n_models=4, n_tasks=n_tasks)
    figures = panel_figures(panel, n_resamples=200)
    assert figures.consensus is not None
    for figure in (figures.consistency, figures.consensus):
        assert np.isnan(figure.lower).all() and np.isnan(figure.upper).all()
        assert (figure.mean > 0.5).all()  # the estimate itself is still shown
    np.testing.assert_allclose(figures.consensus.mean, 1.0)


def test_intervals_stay_where_tasks_differ() -> None:
    wins = simulated_panel((0.9, 0.75, 0.6), n_tasks=60)
    figure = task_consistency(wins, n_resamples=200)
    assert np.all(figure.upper[:3] - figure.lower[:3] > 0.005)
    # The quality-blind judge follows one strict order on every task: identical everywhere.
    assert np.isnan(figure.lower[3]) and figure.mean[3] > figure.mean[:3].max()
    match = consensus_match(wins, n_resamples=200)[0]
    assert np.all(match.upper - match.lower > 0.02)
