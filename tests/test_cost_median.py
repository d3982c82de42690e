"""The cost lines' median latency, taken by a partial sort in numpy, is the float
`statistics.median` gives: odd and even counts, ties, whole numbers, one value, and NaN (whose
place in a sort is arbitrary, so statistics decides it as before)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from konkord.stages.decisions_cost import median


@pytest.mark.parametrize("size", [1, 2, 3, 4, 999, 1000, 380_000])
def test_the_median_is_statistics_median(size: int) -> None:
    rng = np.random.default_rng(size)
    for values in (
        rng.lognormal(size=size).tolist(),
        rng.integers(0, 5, size=size).astype(float).tolist(),  # ties
        (rng.random(size) * 1e-9 + 1e9).tolist(),  # the middle two's sum rounds
    ):
        assert median(values) == statistics.median(values)
    assert median([3, 1, 2, 4]) == statistics.median([3, 1, 2, 4]) == 2.5


def test_a_nan_is_left_to_statistics() -> None:
    values = [1.0, math.nan, 3.0, 2.0]
    got, expected = median(values), statistics.median(values)
    assert got == expected or (math.isnan(got) and math.isnan(expected))
