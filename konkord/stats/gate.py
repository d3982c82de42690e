"""The one gate every ranking passes before it reaches a page or the terminal.

Judge-only, anchored to people, labels only (and whatever ranking comes next): each bootstrap
is read through the same two checks against the raw counts it rests on, the floors under its
intervals (`floors.floored_intervals`) and, for every claimed ordering, the exact sign test over
tasks (`ranking.rank` given the comparisons). Three unanimous tasks can then never support an
ordering, whichever estimator produced it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .bt import Comparisons
from .floors import floored_intervals
from .ranking import Ranking, rank
from .resample import Bootstrap, Interval


@dataclass(frozen=True)
class GatedRanking:
    """Intervals widened to their floors, and the ranking whose claims passed the sign test."""

    intervals: dict[str, Interval]
    ranking: Ranking


def gate(boot: Bootstrap, comp: Comparisons) -> GatedRanking:
    """Floors and the exact sign test for `boot`, against the comparisons `comp` it rests on
    (for an anchored ranking, the judge's outcomes it is fitted to)."""
    return GatedRanking(floored_intervals(boot, comp), rank(boot, comp))
