"""Diagnostics on tiny hand-built runs: a known cycle, a known flip pattern, a split graph."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from konkord.stats.bt import comparisons
from konkord.stats.diagnostics import (
    DisconnectedGraphError,
    connectivity,
    consistency,
    cycle_rate,
    flip_rates,
    position_split,
    verdicts,
    wilson_interval,
)
from konkord.stats.simfield import SimulatedJudge, simulate_judged_field


def test_known_cycle_transitive_task_and_a_tie() -> None:
    # Task 0: a>b, b>c, c>a (a cycle). Task 1: a>b, b>c, a>c. Task 2: a>b, b~c (tie), c>a.
    task = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    i = [0, 1, 2, 0, 1, 0, 0, 1, 2]
    j = [1, 2, 0, 1, 2, 2, 1, 2, 0]
    score = [1, 1, 1, 1, 1, 1, 1, 0.5, 1]
    stats = cycle_rate(comparisons(task, i, j, score, 3, 3))
    assert (stats.cyclic, stats.decided, stats.undecided) == (1, 2, 1)
    assert stats.rate == 0.5
    assert stats.per_task_cyclic.tolist() == [1, 0, 0]
    assert stats.per_task_undecided.tolist() == [0, 0, 1]
    assert np.isnan(stats.per_task_rate[2])


def test_cycle_counts_match_brute_force() -> None:
    rng = np.random.default_rng(3)
    m, n_t = 6, 5
    rows = [
        (t, a, b, rng.choice([0.0, 0.5, 1.0], p=[0.4, 0.2, 0.4]))
        for t in range(n_t)
        for a, b in itertools.combinations(range(m), 2)
        if rng.random() < 0.85  # some pairs missing: their triples are not counted at all
    ]
    task, i, j, score = (np.array(c) for c in zip(*rows, strict=True))
    stats = cycle_rate(comparisons(task, i, j, score, m, n_t))
    outcome = {(t, a, b): s for t, a, b, s in rows}
    outcome |= {(t, b, a): 1 - s for t, a, b, s in rows}
    cyclic = decided = undecided = 0
    for t in range(n_t):
        for a, b, c in itertools.combinations(range(m), 3):
            edges = [outcome.get((t, x, y)) for x, y in ((a, b), (b, c), (c, a))]
            if any(e is None for e in edges):
                continue
            if 0.5 in edges:
                undecided += 1
                continue
            decided += 1
            cyclic += edges in ([1, 1, 1], [0, 0, 0])
    assert (stats.cyclic, stats.decided, stats.undecided) == (cyclic, decided, undecided)
    assert cyclic > 0 and undecided > 0


def _calls():
    # Models 0, 1, 2; calls (task, first, second, score_first).
    rows = [
        (0, 0, 1, 1.0), (0, 1, 0, 0.0),  # agree: 0 wins both orders
        (0, 0, 2, 1.0), (0, 2, 0, 1.0),  # flip: first shown wins both times
        (1, 0, 1, 1.0), (1, 1, 0, 0.5),  # flip: a win against a tie
        (1, 1, 2, 0.5), (1, 2, 1, 0.5),  # agree: tie both orders
        (1, 0, 2, 0.0),                  # one order only: not counted for flips
    ]  # fmt: skip
    task, first, second, score = zip(*rows, strict=True)
    return verdicts(task, first, second, score, 3, 2)


def test_known_flip_pattern() -> None:
    flips = flip_rates(_calls())
    assert (flips.n_flipped, flips.n_pairs) == (2, 4)
    assert flips.overall == 0.5
    assert flips.per_pair[0, 1] == flips.per_pair[1, 0] == 0.5
    assert flips.per_pair[0, 2] == 1.0 and flips.per_pair[1, 2] == 0.0
    assert flips.pair_count[0, 2] == 1  # the one-order call on task 1 is not a pair
    assert flips.per_task.tolist() == [0.5, 0.5]
    assert np.isnan(flips.per_pair[0, 0])
    assert flips.worst_pairs(2) == [(0, 2, 1.0, 1), (0, 1, 0.5, 2)]


def test_positional_split() -> None:
    split = position_split(_calls())
    # Decided calls: 6 (three ties left out); the first-shown answer won 4 of them.
    assert (split.first_won, split.decided, split.ties) == (4, 6, 3)
    assert split.share_first == pytest.approx(4 / 6)
    assert split.wilson_low < 4 / 6 < split.wilson_high


def test_wilson_interval_matches_the_published_example() -> None:
    low, high = wilson_interval(46, 75)
    assert (round(low, 3), round(high, 3)) == (0.500, 0.715)


def test_duplicate_calls_are_refused() -> None:
    with pytest.raises(ValueError, match="task 1: models 0 and 2 were judged twice"):
        verdicts([1, 1], [0, 0], [2, 2], [1, 0], 3, 2)


def test_disconnected_graph_names_its_components() -> None:
    comp = comparisons([0, 0, 1], [0, 2, 3], [1, 4, 2], [1, 0, 0.5], 5, 2)
    conn = connectivity(comp)
    assert not conn.connected
    assert conn.components == ((0, 1), (2, 3, 4))
    with pytest.raises(DisconnectedGraphError) as err:
        conn.require_connected(["a", "b", "c", "d", "e"])
    assert "disconnected into 2 groups" in str(err.value)
    assert "{a, b}; {c, d, e}" in str(err.value)
    assert err.value.components == ((0, 1), (2, 3, 4))
    joined = comparisons([0, 0, 1, 1], [0, 2, 3, 1], [1, 4, 2, 2], [1, 0, 0.5, 1], 5, 2)
    assert connectivity(joined).connected
    connectivity(joined).require_connected()


def test_a_model_never_compared_is_its_own_component() -> None:
    conn = connectivity(comparisons([0], [0], [1], [1], 3, 1))
    assert conn.components == ((0, 1), (2,))


def test_consistency_is_adjacent_win_probability() -> None:
    beta = np.array([0.0, 1.0, -1.0])
    cons = consistency(beta)
    assert cons.order.tolist() == [1, 0, 2]
    sig = 1 / (1 + np.exp(-1.0))
    assert cons.adjacent.tolist() == pytest.approx([sig, sig])
    assert cons.mean == pytest.approx(sig)


def test_pure_position_bias_flips_everything_into_ties() -> None:
    judge = SimulatedJudge(accuracy=0.0, position_bias=1.0)
    field = simulate_judged_field(4, 10, judge, seed=0)
    assert flip_rates(field.verdicts).overall == 1.0
    assert np.all(field.comparisons.score == 0.5)
    assert position_split(field.verdicts).share_first == 1.0
    assert np.allclose(field.target_expected_win_rate, 0.5)


def test_simulated_judge_matches_its_closed_form() -> None:
    judge = SimulatedJudge(accuracy=0.6, position_bias=0.7, tie_rate=0.1)
    field = simulate_judged_field(2, 40_000, judge, seed=1, strength=[5.0, -5.0])
    # Model 0 is nearly always better: its mean combined score estimates the closed form.
    assert field.comparisons.score.mean() == pytest.approx(judge.combined_better_score(), abs=0.01)
    first, second = judge.better_wins()
    calls = field.verdicts
    zero_first = calls.first == 0
    assert np.mean(calls.score_first[zero_first] == 1.0) == pytest.approx(first, abs=0.01)
    assert np.mean(calls.score_first[~zero_first] == 0.0) == pytest.approx(second, abs=0.01)
    flips = flip_rates(calls).overall
    assert 0.3 < flips < 0.6
    assert position_split(calls).share_first > 0.55
