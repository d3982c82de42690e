"""The rank column agrees with the claims over 400 simulated fields: rank ranges never order two
models whose ordering is unsupported, and never show a supported ordering the wrong way or level
(chained rank groups implied unsupported orderings; see benchmarks/bench_rank_display.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from konkord.stats.ranking import rank_ranges

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_rank_display import chained_contradictions, field_checks


def test_rank_ranges_contradict_no_claim_over_400_fields() -> None:
    implied = hidden = chained = 0
    for seed in range(400):
        checks = field_checks(seed, resamples=40)
        implied += checks["ranges, report rule"][0] + checks["ranges, interval rule"][0]
        hidden += checks["ranges, report rule"][1] + checks["ranges, interval rule"][1]
        chained += sum(checks["chained, interval rule"])
    assert (implied, hidden) == (0, 0)
    assert chained > 0  # the same fields do catch the chained display out


def test_rank_ranges_by_hand() -> None:
    # a above c only (b level with both): a 1-2, b 1-3, c 2-3; chaining made all three "1="
    supported = np.zeros((3, 3), dtype=bool)
    supported[0, 2] = True
    best, worst = rank_ranges(supported, np.ones(3, dtype=bool))
    assert best.tolist() == [1, 1, 2] and worst.tolist() == [2, 3, 3]
    assert chained_contradictions([0, 1, 2], supported) == (0, 1)
    # a model without comparisons has no rank and does not count in N
    best, worst = rank_ranges(supported, np.array([True, True, False]))
    assert best.tolist() == [1, 1, 0] and worst.tolist() == [2, 2, 0]
