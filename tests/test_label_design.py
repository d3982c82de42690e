"""The labelling queue as a sampling design: recorded inclusion probabilities are the real ones."""

from __future__ import annotations

from collections import Counter

import pytest

from konkord.stages.label.design import inclusion_probabilities, queue_prefix
from konkord.stages.label.sample import Comparison, stratified_order


def _pool() -> list[Comparison]:
    """Tasks with 6, 3 and 1 answerable pairs (failed answers leave some tasks short)."""
    models = ["m1", "m2", "m3", "m4"]
    pool = []
    for task, keep in (("t1", 6), ("t2", 3), ("t3", 1), ("t4", 6), ("t5", 3)):
        pairs = [(a, b) for k, a in enumerate(models) for b in models[k + 1 :]][:keep]
        pool += [Comparison(task, a, b) for a, b in pairs]
    return pool


@pytest.mark.parametrize("k", [1, 4, 5, 9, 12, 19])
def test_inclusion_probabilities_match_the_queue_over_many_seeds(k: int) -> None:
    """The first k items of the seeded queue, over 4,000 seeds: each comparison's frequency
    is within 4 standard errors of the computed probability."""
    pool = _pool()
    seeds = 4000
    seen: Counter[Comparison] = Counter()
    for seed in range(seeds):
        seen.update(stratified_order(pool, seed)[:k])
    expected = inclusion_probabilities(pool, k)
    assert sum(expected.values()) == pytest.approx(k)
    for comparison in pool:
        p = expected[comparison]
        se = max((p * (1 - p) / seeds) ** 0.5, 1e-9)
        assert abs(seen[comparison] / seeds - p) <= 4 * se + 1e-12, comparison


def test_the_whole_pool_is_certain_and_nothing_is_not() -> None:
    pool = _pool()
    assert set(inclusion_probabilities(pool, len(pool) + 5).values()) == {1.0}
    assert set(inclusion_probabilities(pool, 0).values()) == {0.0}
    with pytest.raises(ValueError):
        inclusion_probabilities(pool, -1)


def test_queue_prefix_is_where_labelling_reached() -> None:
    order = stratified_order(_pool(), 3)
    assert queue_prefix(order, [order[0], order[4]]) == 5
    assert queue_prefix(order, []) == 0
