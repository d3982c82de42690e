"""The labelling queue as a sampling design: the probability that each comparison is labelled.

The queue (`sample.stratified_order`) walks the tasks round-robin in a seeded random order,
and within a task its pairs in a seeded random order. So when the first k items of the queue
are labelled, every comparison had a known chance of being among them: pass r of the
round-robin takes one more item from each task that still has one, a task with p pairs
contributes min(p, r) items after r full passes, and in the pass that is cut short each task
still in it is among the first j of its c tasks with probability j / c (the task order is a
uniform shuffle). Within a task every pair is equally likely to come first (the pair order
is a uniform shuffle too), so a comparison's inclusion probability is its task's expected
number of labels divided by the task's number of pairs.

These probabilities are what a prediction-powered ranking weights labels by (1 / pi), so a
label on a task with many answerable pairs counts for as many comparisons as it stands for.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

from konkord.stages.label.sample import Comparison


def inclusion_probabilities(pool: Sequence[Comparison], k: int) -> dict[Comparison, float]:
    """P(comparison is among the first `k` items of the seeded stratified queue), for the pool.

    The probability is over the queue's seed (its task and pair shuffles), so it does not
    depend on which seed a labeller used.
    """
    if k < 0:
        raise ValueError("k must not be negative")
    pairs_in_task = Counter(c.task_id for c in pool)
    sizes = sorted(pairs_in_task.values())
    remaining = min(k, len(pool))
    full_passes = 0
    partial_share = 0.0
    while remaining > 0:
        in_pass = sum(1 for p in sizes if p > full_passes)
        if remaining >= in_pass:
            remaining -= in_pass
            full_passes += 1
        else:
            partial_share = remaining / in_pass
            remaining = 0
    out: dict[Comparison, float] = {}
    for comparison in pool:
        p = pairs_in_task[comparison.task_id]
        expected = min(p, full_passes) + (partial_share if p > full_passes else 0.0)
        out[comparison] = expected / p
    return out


def queue_prefix(order: Sequence[Comparison], labelled: Collection[Comparison]) -> int:
    """How far into the queue labelling reached: 1 + the position of the last labelled item.

    Items before it that nobody labelled were selected and skipped (non-response); items
    after it were never reached.
    """
    wanted = set(labelled)
    reach = 0
    for position, comparison in enumerate(order, start=1):
        if comparison in wanted:
            reach = position
    return reach
