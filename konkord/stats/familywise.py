"""Family-wise control of a ranking's claims: the chance of any wrong claim at most 5%.

Each pair's difference interval covers its own difference 95% of the time, but a ranking of
20 models makes up to 190 pair claims, and small chances add up: with every pair judged,
6.8% of simulated fields (benchmarks/bench_design.py) held a wrong claim, always between
models almost level. Claims are therefore made by a step-down on the bootstrap (Romano and
Wolf 2005, "Exact and approximate stepdown methods for multiple hypothesis testing"), with
each pair's excursion measured against its own interval:

1. S = the pairs of models with comparisons whose ordering is not yet claimed.
2. In each resample, each pair of S strays from its estimate by some multiple of its own
   interval's side (the draw below the estimate against the lower side, above it against
   the upper), divided by that multiple's own 95th percentile over the resamples (so that,
   pair by pair, exceeding 1 happens in 5% of resamples). The largest of these over S is the
   resample's worst excursion; `factor` is its 95th percentile (never below 1), taken a
   little further where the intervals have t tails (`t_tail`: their few-unit correction is
   larger out at the widened level than at 95%).
3. Each pair of S gets its interval widened `factor`-fold about its estimate (floors
   included: both sides are widened); a pair whose widened interval excludes 0 and whose
   sign test agrees is claimed and leaves S.
4. Repeat with the smaller S until a step claims nothing.

With one pair the factor is exactly 1 and the claim is the per-pair one. The bootstrap
supplies how the pairs stray together (where their differences are correlated the factor
falls below a Bonferroni bound; on the simulated 20-model fields of bench_design, 40 fields
at 300 resamples, it was not far from the normal Bonferroni figure: a median 1.87 at the first
step over 190 pairs against 1.86, and 1.58 at the last), each pair's own interval its scale
and shape: a BCa interval stays skewed, an expanded one keeps its expansion, a jackknife-t
one its width. A high quantile of the maximum needs only the 5% of resamples where the worst
pair strays most (50 of 1,000), not each pair's 0.03% tails (which 1,000 resamples cannot
resolve). The sign test stays a per-pair gate (it only withholds claims).

On bench_design's 400 fields (1,000 resamples) fields with a wrong claim fell from 6.8% to
0.8% with every pair judged; with all twenty models equal, fields with any claim from 83.5% to
6.8% (1.8 points above the aim, standard error 1.3; each pair's own interval covered 94.7%).
The price is power: neighbours separated fell from 8.41 to 5.29 of 19, and at a quarter of
the calls (random, adaptive) from 2.85 and 3.20 to 0.63 and 0.69.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .special import ndtr, ndtri, stdtrit

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class FamilyStep:
    """One step: the pairs tested, the widening they were held to, and how many were claimed."""

    tested: int
    factor: float
    claimed: int


@dataclass(frozen=True)
class StepDown:
    """What the step-down claimed (pairs, flat as given) and at which widening.

    `claimed_up[k]`: "the first model above the second" is claimed; `claimed_down[k]`: the
    reverse. `factor[k]` is the widening pair k was last held to (its claiming step's, or the
    last step's for a pair never claimed); `lower`/`upper` its interval at that widening."""

    claimed_up: BoolArray
    claimed_down: BoolArray
    factor: FloatArray
    lower: FloatArray
    upper: FloatArray
    steps: tuple[FamilyStep, ...]


def order_statistic(values: FloatArray, level: float) -> FloatArray:
    """Along the first axis, the smallest value v with at most 1 - level of the values above
    it: the ceil(level x n)-th smallest."""
    n = values.shape[0]
    k = min(n, max(1, math.ceil(level * n - 1e-9))) - 1
    out: FloatArray = np.partition(values, k, axis=0)[k]
    return out


def excursions(
    estimate: FloatArray, draws: FloatArray, lower: FloatArray, upper: FloatArray, level: float
) -> npt.NDArray[np.float32]:
    """(B, P): each draw's distance from its pair's estimate in units of the interval's side on
    its own side, over that pair's `level` order statistic of the same (so each pair exceeds 1
    in at most 1 - level of the resamples). A pair whose scale is 0 (no spread on either side,
    or no draw strays) contributes 0: its bootstrap says nothing, its floor and sign test do."""
    below = np.maximum(estimate - lower, 0.0)
    above = np.maximum(upper - estimate, 0.0)
    gap = draws - estimate
    side = np.where(gap < 0.0, below, above)
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = np.where(gap == 0.0, 0.0, np.abs(gap) / side)
    raw = np.where(np.isnan(raw), 0.0, raw)
    scale = order_statistic(np.where(np.isinf(raw), 0.0, raw), level)
    usable = np.isfinite(scale) & (scale > 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(usable, raw / np.where(usable, scale, 1.0), 0.0)
    return out.astype(np.float32)


def t_tail(factor: float, level: float, units: int) -> float:
    """How much further t tails with units - 1 degrees of freedom reach than normal ones at
    the widened level than at `level`: the bootstrap's widening is on the normal scale of its
    draws, and an expanded (Hesterberg) or jackknife-t interval takes t tails, which part
    further from the normal the further out they are read (1.2% more at 200 units and a
    widening of 1.85; 1 at a widening of 1)."""
    if units < 3:
        return 1.0
    z = float(ndtri(0.5 + level / 2.0))
    z_wide = z * factor
    tail = float(ndtr(-z_wide))  # the one-sided tail the widened interval leaves
    ratio_wide = float(stdtrit(units - 1, 1.0 - tail)) / z_wide
    ratio = float(stdtrit(units - 1, 0.5 + level / 2.0)) / z
    return ratio_wide / ratio


def widened(
    estimate: FloatArray, lower: FloatArray, upper: FloatArray, factor: float
) -> tuple[FloatArray, FloatArray]:
    """The interval [lower, upper] around `estimate` with both sides `factor` times as long
    (itself, bit for bit, at a factor of 1)."""
    if factor == 1.0:
        return lower, upper
    return estimate - factor * (estimate - lower), estimate + factor * (upper - estimate)


def step_down(
    estimate: FloatArray,
    lower: FloatArray,
    upper: FloatArray,
    excursion: npt.NDArray[np.float32],
    eligible: BoolArray,
    agrees_up: BoolArray,
    agrees_down: BoolArray,
    level: float,
    t_units: int | None = None,
) -> StepDown:
    """The step-down over pairs (flat, P of them): `estimate` and its interval (floors
    included), `excursion` (B, P) from `excursions` of the bootstrap's own interval,
    `eligible` the pairs that may be claimed, `agrees_up`/`agrees_down` where the sign test
    agrees with "first above second" / the reverse. With `t_units` (intervals with t tails
    over that many units: expanded, or jackknife t), each widening gets `t_tail`'s."""
    n = estimate.size
    claimed_up = np.zeros(n, dtype=bool)
    claimed_down = np.zeros(n, dtype=bool)
    factor = np.ones(n)
    low, high = lower.copy(), upper.copy()
    steps: list[FamilyStep] = []
    open_ = eligible.copy()
    while open_.any():
        index = np.flatnonzero(open_)
        worst = excursion[:, index].max(axis=1).astype(np.float64)
        f = 1.0 if index.size == 1 else max(1.0, float(order_statistic(worst, level)))
        if t_units is not None and f > 1.0:
            f *= t_tail(f, level, t_units)
        lo, hi = widened(estimate[index], lower[index], upper[index], f)
        low[index], high[index], factor[index] = lo, hi, f
        up = (lo > 0.0) & agrees_up[index]
        down = (hi < 0.0) & agrees_down[index]
        claimed_up[index[up]] = True
        claimed_down[index[down]] = True
        new = int(up.sum() + down.sum())
        steps.append(FamilyStep(tested=int(index.size), factor=f, claimed=new))
        if new == 0:
            break
        open_[index[up | down]] = False
    return StepDown(claimed_up, claimed_down, factor, low, high, tuple(steps))


@dataclass(frozen=True)
class FamilyWise:
    """The bar each pair of models was held to, per ordered pair (a, b) (mirrored like the
    difference intervals): the widening of its last step and its interval there."""

    lower: FloatArray
    upper: FloatArray
    factor: FloatArray
    steps: tuple[FamilyStep, ...]
    level: float  # the family's: the chance of any wrong claim is at most 1 - level

    @property
    def final_factor(self) -> float:
        """The widening the pairs still unclaimed are held to (1 with no step)."""
        return self.steps[-1].factor if self.steps else 1.0

    def excludes_zero(self, a: int, b: int) -> bool:
        """Whether pair (a, b)'s widened interval excludes 0."""
        return bool(self.lower[a, b] > 0.0 or self.upper[a, b] < 0.0)


def as_matrices(result: StepDown, n_models: int, level: float) -> FamilyWise:
    """The step-down over the pairs a < b (numpy's triu order) as (M, M) matrices."""
    a, b = np.triu_indices(n_models, k=1)
    lower, upper = np.zeros((n_models, n_models)), np.zeros((n_models, n_models))
    factor = np.ones((n_models, n_models))
    lower[a, b], upper[a, b] = result.lower, result.upper
    lower[b, a], upper[b, a] = -result.upper, -result.lower
    factor[a, b] = factor[b, a] = result.factor
    return FamilyWise(lower, upper, factor, result.steps, level)
