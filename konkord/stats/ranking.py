"""Rankings that claim no more than the data supports.

Two models are told apart by the bootstrap interval of the *difference* of their
log-strengths, never by whether their own intervals overlap (overlapping intervals can still
have a difference that clearly excludes 0). Rank groups chain adjacent models whose difference
interval contains 0; a supported claim is an ordering whose difference interval excludes 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from .bt import FloatArray, IntArray, PairMatrix
from .resample import Bootstrap

DEFAULT_POWER = 0.8


@dataclass(frozen=True)
class PairwiseDifferences:
    """For every ordered pair (a, b): beta_a - beta_b, its interval, and P(a above b)."""

    estimate: PairMatrix
    lower: PairMatrix
    upper: PairMatrix
    prob_above: PairMatrix  # share of resamples with beta_a > beta_b (equal counts half)
    level: float

    def separated(self, a: int, b: int) -> bool:
        """Whether the interval of beta_a - beta_b excludes 0."""
        return bool(self.lower[a, b] > 0.0 or self.upper[a, b] < 0.0)


ZERO_TOLERANCE = 1e-9


def _snap(values: FloatArray) -> FloatArray:
    out: FloatArray = np.where(np.abs(values) < ZERO_TOLERANCE, 0.0, values)
    return out


def pairwise_differences(boot: Bootstrap) -> PairwiseDifferences:
    """Intervals of all log-strength differences, by the bootstrap's own interval method.

    Computed for a < b only: beta_b - beta_a has the mirrored interval (percentile and BCa
    both turn x -> -x into a mirror image) and the complementary share of resamples.
    """
    beta = boot.point.log_strength
    m = beta.size
    a, b = np.triu_indices(m, k=1)
    estimate = beta[a] - beta[b]
    draws = boot.log_strength[:, a] - boot.log_strength[:, b]
    jack = None
    if boot.jackknife is not None:
        jb = boot.jackknife.log_strength
        jack = jb[:, a]
        jack -= jb[:, b]
    # Differences within solver tolerance are exact zeros (e.g. two models that won and lost
    # the same comparisons); without this, 1e-14 of rounding would make a "separated" claim.
    estimate = _snap(estimate)
    draws = _snap(draws)
    interval = boot.interval(estimate, draws, jack)
    low, high = _snap(interval.lower), _snap(interval.upper)
    share = (draws > 0).mean(axis=0) + 0.5 * (draws == 0).mean(axis=0)
    full_estimate, lower, upper = np.zeros((m, m)), np.zeros((m, m)), np.zeros((m, m))
    above = np.full((m, m), 0.5)
    full_estimate[a, b], full_estimate[b, a] = estimate, -estimate
    lower[a, b], upper[a, b] = low, high
    lower[b, a], upper[b, a] = -high, -low
    above[a, b], above[b, a] = share, 1.0 - share
    return PairwiseDifferences(full_estimate, lower, upper, above, boot.level)


@dataclass(frozen=True)
class Claim:
    """A supported ordering: `upper` ranks above `lower` (difference interval excludes 0)."""

    upper: int
    lower: int
    difference: float
    interval_low: float
    interval_high: float
    prob_above: float


@dataclass(frozen=True)
class Separation:
    """An adjacent pair the data does not separate, and the tasks that would at this gap.

    `tasks_even_odds` is where the interval's near edge would just reach 0 (a study of that
    size separates the pair about half the time); `tasks_needed` gives `power` (0.8) odds.
    Both scale the observed interval by 1/sqrt(tasks); None when the observed gap is 0.
    """

    upper: int
    lower: int
    difference: float
    half_width: float
    tasks_even_odds: int | None
    tasks_needed: int | None
    power: float


@dataclass(frozen=True)
class Ranking:
    """Models best first, their rank groups, supported claims and separation estimates."""

    order: IntArray  # model indices, best first by point log-strength
    rank_group: IntArray  # (M,) group number of each model, 1 = top group
    groups: tuple[tuple[int, ...], ...]  # models of each group, best first
    differences: PairwiseDifferences
    claims: tuple[Claim, ...]
    separations: tuple[Separation, ...]
    n_tasks: int


def tasks_to_separate(
    gap: float,
    half_width: float,
    n_tasks: int,
    level: float = 0.95,
    power: float = DEFAULT_POWER,
) -> int | None:
    """Tasks at which an interval of `half_width` now (at `n_tasks`) would exclude 0 at `gap`.

    The interval narrows as 1/sqrt(tasks); at power p the expected estimate must sit
    z_{level} + z_p standard errors from 0, so tasks = n * ((z_l + z_p) / z_l * h / gap)^2.
    """
    gap = abs(gap)
    if gap <= 0.0 or not math.isfinite(gap) or half_width <= 0.0:
        return None
    z_level = float(ndtri(0.5 + level / 2.0))
    z_power = float(ndtri(power))
    factor = (z_level + z_power) / z_level * half_width / gap
    return max(n_tasks, math.ceil(n_tasks * factor * factor))


def rank(boot: Bootstrap, power: float = DEFAULT_POWER) -> Ranking:
    """Order models, chain unseparated neighbours into rank groups, list supported claims."""
    diffs = pairwise_differences(boot)
    beta = boot.point.log_strength
    order = np.argsort(-beta, kind="stable").astype(np.int64)
    groups: list[list[int]] = []
    separations: list[Separation] = []
    for pos, model in enumerate(order.tolist()):
        if pos == 0:
            groups.append([model])
            continue
        above = int(order[pos - 1])
        if diffs.separated(above, model):
            groups.append([model])
            continue
        groups[-1].append(model)
        gap = float(diffs.estimate[above, model])
        half = gap - float(diffs.lower[above, model])
        separations.append(
            Separation(
                upper=above,
                lower=model,
                difference=gap,
                half_width=half,
                tasks_even_odds=tasks_to_separate(gap, half, boot.n_tasks, boot.level, 0.5),
                tasks_needed=tasks_to_separate(gap, half, boot.n_tasks, boot.level, power),
                power=power,
            )
        )
    rank_group = np.empty(beta.size, dtype=np.int64)
    for number, members in enumerate(groups, start=1):
        rank_group[members] = number
    claims = []
    for pos, a in enumerate(order.tolist()):
        for b in order[pos + 1 :].tolist():
            if diffs.lower[a, b] > 0.0:
                claims.append(
                    Claim(
                        upper=a,
                        lower=b,
                        difference=float(diffs.estimate[a, b]),
                        interval_low=float(diffs.lower[a, b]),
                        interval_high=float(diffs.upper[a, b]),
                        prob_above=float(diffs.prob_above[a, b]),
                    )
                )
    return Ranking(
        order=order,
        rank_group=rank_group,
        groups=tuple(tuple(g) for g in groups),
        differences=diffs,
        claims=tuple(claims),
        separations=tuple(separations),
        n_tasks=boot.n_tasks,
    )


def _join(words: Sequence[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def describe_claims(ranking: Ranking, names: Sequence[str]) -> list[str]:
    """The supported orderings in words, one sentence per model that is above any other."""
    level = round(100 * ranking.differences.level)
    if not ranking.claims:
        return [
            f"The data supports no ordering: every pair's {level}% interval of the "
            "difference in log-strength contains 0."
        ]
    below: dict[int, list[int]] = {}
    for claim in ranking.claims:
        below.setdefault(claim.upper, []).append(claim.lower)
    sentences = []
    for model in ranking.order.tolist():
        if model in below:
            others = [names[b] for b in below[model]]
            sentences.append(f"{names[model]} ranks above {_join(others)}.")
    return sentences


def describe_separations(ranking: Ranking, names: Sequence[str]) -> list[str]:
    """For each unseparated adjacent pair, the tasks that would likely separate it."""
    out = []
    for sep in ranking.separations:
        pair = f"{names[sep.upper]} and {names[sep.lower]}"
        if sep.tasks_needed is None:
            out.append(f"{pair} are level; no number of tasks separates a zero gap.")
            continue
        out.append(
            f"{pair} are not separated at {ranking.n_tasks} tasks; at the gap observed, "
            f"about {sep.tasks_needed} tasks would separate them with "
            f"{round(100 * sep.power)}% odds ({sep.tasks_even_odds} for even odds)."
        )
    return out
