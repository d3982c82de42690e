"""The selective-accuracy table (konkord.stats.selective) on small cases worked by hand, and its
independence from the models' names."""

from __future__ import annotations

import numpy as np
import pytest

from konkord.stats.selective import accepted, cascade_vs_strong, lean, selective_table

# Three pairs, in model terms (a, b, tie); outcome codes 0 = a, 1 = b, 2 = tie.
P_AB = np.array([[0.9, 0.05, 0.05], [0.7, 0.2, 0.1], [0.01, 0.99, 0.0]])
P_BA = np.array([[0.8, 0.1, 0.1], [0.6, 0.3, 0.1], [0.52, 0.47, 0.01]])
V_AB = np.array([0, 0, 1])
V_BA = np.array([0, 0, 0])


def test_accepted_needs_agreeing_orders_and_the_threshold() -> None:
    assert accepted(P_AB, P_BA, V_AB, V_BA, 0.5).tolist() == [True, True, False]
    assert accepted(P_AB, P_BA, V_AB, V_BA, 0.65).tolist() == [True, True, False]  # 0.65 exactly
    assert accepted(P_AB, P_BA, V_AB, V_BA, 0.66).tolist() == [True, False, False]
    assert accepted(P_AB, P_BA, V_AB, V_BA, 0.86).tolist() == [False, False, False]
    assert lean(P_AB, P_BA).tolist() == [0, 0, 1]  # the disagreeing pair leans to b at 0.73


def test_table_worked_by_hand() -> None:
    # labels: pair 0 says a (twice, two people), pair 1 says b, pair 2 says a
    label_pair = np.array([0, 0, 1, 2])
    label_outcome = np.array([0, 0, 1, 0])
    rows = {
        r.threshold: r for r in selective_table(P_AB, P_BA, V_AB, V_BA, label_pair, label_outcome)
    }
    at = rows[0.6]
    assert (at.decided.k, at.decided.n) == (2, 3)
    assert (at.agreement.k, at.agreement.n) == (2, 3)  # both labels of pair 0 right, pair 1 wrong
    assert (at.lean_right.k, at.lean_right.n) == (0, 1)  # pair 2 leans b, people said a
    # each order alone at 0.6: ab decides pairs 0, 1, 2 (0.9, 0.7, 0.99); ba decides 0, 1 (0.8, 0.6)
    assert (at.one_order_decided.k, at.one_order_decided.n) == (5, 6)
    # labels: pair 0 x2 x2 orders right (4), pair 1 x2 orders wrong, pair 2: ab says b (wrong)
    assert (at.one_order_agreement.k, at.one_order_agreement.n) == (4, 7)
    at = rows[0.95]
    assert at.decided.k == 0 and at.agreement.n == 0 and at.agreement.rate is None
    assert (at.one_order_decided.k, at.one_order_agreement.k, at.one_order_agreement.n) == (1, 0, 1)
    assert at.lean_right.n == 4
    assert at.agreement.low != at.agreement.low  # nan: no interval without a label
    low, high = rows[0.6].agreement.low, rows[0.6].agreement.high
    assert (low, high) == pytest.approx((0.2077, 0.9385), abs=1e-4)  # Wilson 2 of 3


def test_cascade_against_strong_alone_on_the_same_labels() -> None:
    decided = np.array([True, False, False])
    strong = np.array([1, 1, -1])  # pair 2: the strong judge has not judged it
    versus = cascade_vs_strong(decided, V_AB, strong, np.array([0, 1, 2]), np.array([0, 1, 0]))
    assert (versus.cascade.k, versus.strong.k, versus.labels, versus.labels_total) == (2, 1, 2, 3)


def test_renaming_the_models_changes_no_figure() -> None:
    rng = np.random.default_rng(7)
    n = 40
    p_ab = rng.dirichlet([1, 1, 1], n)
    p_ba = rng.dirichlet([1, 1, 1], n)
    v_ab, v_ba = p_ab.argmax(1), p_ba.argmax(1)
    label_pair = rng.integers(0, n, 60)
    label_outcome = rng.integers(0, 3, 60)
    swap = np.array([1, 0, 2])  # b is now called a: columns swap, "ab" becomes "ba"
    before = selective_table(p_ab, p_ba, v_ab, v_ba, label_pair, label_outcome)
    after = selective_table(
        p_ba[:, swap], p_ab[:, swap], swap[v_ba], swap[v_ab], label_pair, swap[label_outcome]
    )

    def counts(rows: list) -> list[tuple[int, ...]]:
        fields = ("decided", "agreement", "one_order_decided", "one_order_agreement", "lean_right")
        return [tuple(x for f in fields for x in (getattr(r, f).k, getattr(r, f).n)) for r in rows]

    assert counts(before) == counts(after)
    assert counts(before) != counts(before[::-1])  # the table does vary with the threshold
