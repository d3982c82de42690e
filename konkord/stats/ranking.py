"""Rankings that claim no more than the data supports.

Two models are told apart by the bootstrap interval of the *difference* of their
log-strengths, never by whether their own intervals overlap (overlapping intervals can still
have a difference that clearly excludes 0). An ordering is supported when that interval
(never narrower than the Wald floor of `floors`), widened by the family-wise step-down of
`familywise` so that the chance of any wrong claim in the whole ranking stays at most 5%,
excludes 0 and, given the comparisons, an exact sign test over tasks agrees at 5%. The
intervals shown stay each pair's own 95% ones.

Each model gets a rank range, not a chained group: best = 1 + the number of models supported
above it, worst = N - the number supported below it. Chaining unseparated neighbours into
groups both hid supported orderings (four models "1=" while the first is above two of them)
and implied unsupported ones (a model of group 1 "above" one of group 2 with no support).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .bt import Comparisons, FloatArray, IntArray, PairMatrix, win_matrix
from .familywise import FamilyWise, as_matrices, excursions, step_down
from .floors import SignTests, sign_tests, wald_floor
from .planning import DEFAULT_POWER, planned_tasks, tasks_to_separate
from .resample import Bootstrap


@dataclass(frozen=True)
class PairwiseDifferences:
    """For every ordered pair (a, b): beta_a - beta_b, its interval, and P(a above b)."""

    estimate: PairMatrix
    lower: PairMatrix
    upper: PairMatrix
    prob_above: PairMatrix  # share of resamples with beta_a > beta_b (equal counts half)
    level: float
    # (B, pairs a < b in triu order): each draw's excursion against the bootstrap's own
    # interval (`familywise.excursions`), what the family-wise step-down calibrates on
    excursion: npt.NDArray[np.float32] | None = None

    def separated(self, a: int, b: int) -> bool:
        """Whether the interval of beta_a - beta_b excludes 0."""
        return bool(self.lower[a, b] > 0.0 or self.upper[a, b] < 0.0)


ZERO_TOLERANCE = 1e-9
_PAIR_BLOCK_ELEMENTS = 1 << 20  # (jackknife fits x pairs) formed at once: 8 MB


def _snap(values: FloatArray) -> FloatArray:
    out: FloatArray = np.where(np.abs(values) < ZERO_TOLERANCE, 0.0, values)
    return out


def pairwise_differences(boot: Bootstrap, floor: PairMatrix | None = None) -> PairwiseDifferences:
    """Intervals of all log-strength differences, by the bootstrap's own interval method.

    Computed for a < b only: beta_b - beta_a has the mirrored interval (percentile and BCa
    both turn x -> -x into a mirror image) and the complementary share of resamples. With
    `floor` (half-widths, (M, M)), each interval is widened to contain estimate -+ floor.
    """
    beta = boot.point.log_strength
    m = beta.size
    a, b = np.triu_indices(m, k=1)
    estimate = beta[a] - beta[b]
    draws = boot.log_strength[:, a] - boot.log_strength[:, b]
    # Differences within solver tolerance are exact zeros (e.g. two models that won and lost
    # the same comparisons); without this, 1e-14 of rounding would make a "separated" claim.
    estimate = _snap(estimate)
    draws = _snap(draws)
    low, high = np.empty(a.size), np.empty(a.size)
    jb = None if boot.jackknife is None else boot.jackknife.log_strength
    # The jackknife differences of all pairs at once are (tasks x pairs): 31 MB at 40 models
    # and 5,000 tasks, and the acceleration needs two more of that size. Intervals are
    # elementwise, so pairs taken a block at a time give the same bits in a tenth of it.
    step = max(1, _PAIR_BLOCK_ELEMENTS // (1 if jb is None else jb.shape[0]))
    for start in range(0, a.size, step):
        block = slice(start, start + step)
        jack = None
        if jb is not None:
            jack = jb[:, a[block]]
            jack -= jb[:, b[block]]
        interval = boot.interval(estimate[block], draws[:, block], jack)
        low[block], high[block] = interval.lower, interval.upper
    low, high = _snap(low), _snap(high)
    excursion = np.empty(draws.shape, dtype=np.float32)
    step = max(1, _PAIR_BLOCK_ELEMENTS // max(1, draws.shape[0]))
    for start in range(0, a.size, step):
        block = slice(start, start + step)
        excursion[:, block] = excursions(
            estimate[block], draws[:, block], low[block], high[block], boot.level
        )
    if floor is not None:
        low = np.where(np.isnan(floor[a, b]), low, np.fmin(low, estimate - floor[a, b]))
        high = np.where(np.isnan(floor[a, b]), high, np.fmax(high, estimate + floor[a, b]))
    share = (draws > 0).mean(axis=0) + 0.5 * (draws == 0).mean(axis=0)
    full_estimate, lower, upper = np.zeros((m, m)), np.zeros((m, m)), np.zeros((m, m))
    above = np.full((m, m), 0.5)
    full_estimate[a, b], full_estimate[b, a] = estimate, -estimate
    lower[a, b], upper[a, b] = low, high
    lower[b, a], upper[b, a] = -high, -low
    above[a, b], above[b, a] = share, 1.0 - share
    return PairwiseDifferences(full_estimate, lower, upper, above, boot.level, excursion)


@dataclass(frozen=True)
class Claim:
    """A supported ordering: `upper` ranks above `lower` (the difference interval widened to
    the family-wise bar excludes 0 and the sign test over tasks, where run, agrees).
    `interval_low`/`interval_high` are the pair's own 95% interval, as shown."""

    upper: int
    lower: int
    difference: float
    interval_low: float
    interval_high: float
    prob_above: float
    sign_p: float | None = None


@dataclass(frozen=True)
class Separation:
    """An adjacent pair the data does not separate, and the tasks that would.

    `tasks_even_odds` is where the interval's near edge would just reach 0 at the gap
    observed (a study of that size separates the pair about half the time if the true gap
    were the observed one). `tasks_needed` plans on `planning_gap`, the gap observed less
    `planning_margin` standard errors (see `planned_tasks`), for `power` (0.8) odds, never below
    the sign test's minimum; None when that gap is not above 0. Both scale the observed
    interval by 1/sqrt(tasks) and plan for the family-wise bar (the interval widened
    `family_factor`-fold, the factor this run's unclaimed pairs were held to).

    `interval_excludes_zero`: the pair's own 95% interval excludes 0; `family_excludes_zero`:
    so does the widened one. Not separated with both: the sign test did not agree (or the
    claim was withdrawn to keep the claims transitive); with the first only: the family-wise
    bar was not met.
    """

    upper: int
    lower: int
    difference: float
    half_width: float
    tasks_even_odds: int | None
    tasks_needed: int | None
    power: float
    interval_excludes_zero: bool = False  # the pair's own 95% interval
    sign_p: float | None = None
    planning_gap: float | None = None
    family_excludes_zero: bool = False  # the interval widened to the family-wise bar
    family_factor: float = 1.0


@dataclass(frozen=True)
class Ranking:
    """Models best first, their rank ranges, supported claims and separation estimates.

    `rank_best`/`rank_worst` are 0 for a model with no comparisons (it has no rank).
    `groups` are runs of neighbours with the same rank range: they are exchangeable on the
    display, and `rank_group` numbers them (display shading only, no claim).
    """

    order: IntArray  # model indices, best first by point log-strength; no-comparison last
    rank_best: IntArray  # (M,) 1 + models supported above
    rank_worst: IntArray  # (M,) N - models supported below
    rank_group: IntArray  # (M,) number of the model's run of equal ranges, 1 = top
    groups: tuple[tuple[int, ...], ...]  # models of each run, best first
    differences: PairwiseDifferences
    supported: npt.NDArray[np.bool_]  # (M, M) [a, b]: "a ranks above b" is supported
    sign: SignTests | None
    claims: tuple[Claim, ...]
    separations: tuple[Separation, ...]
    n_tasks: int
    family: FamilyWise | None = None  # the family-wise bar of the claims (`familywise`)


def rank_ranges(
    supported: npt.NDArray[np.bool_], active: npt.NDArray[np.bool_]
) -> tuple[IntArray, IntArray]:
    """best = 1 + models supported above, worst = N - models supported below, over the N
    models that have comparisons (0 for the others).

    For a transitive `supported` (see `consistent`) the ranges order two models exactly when
    their ordering is supported, and show every supported ordering at both ends."""
    n = int(active.sum())
    above = supported[active, :].sum(axis=0)  # [b]: models a with "a above b"
    below = supported[:, active].sum(axis=1)  # [a]: models b with "a above b"
    best = np.where(active, 1 + above, 0).astype(np.int64)
    worst = np.where(active, n - below, 0).astype(np.int64)
    return best, worst


def consistent(supported: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """A transitive part of a supported relation: where a above c and c above
    b are supported but a above b is not (rare: intervals and sign tests are pairwise), both
    are withdrawn, until no such triple is left. Claims then form a consistent order, and no
    display can imply the missing a above b."""
    out = supported.copy()
    while True:
        through = (out.astype(np.int64) @ out.astype(np.int64)) > 0
        broken = np.argwhere(through & ~out)
        if broken.size == 0:
            return out
        for a, b in broken:
            middle = out[a] & out[:, b]
            out[a, middle] = False
            out[middle, b] = False


def rank(boot: Bootstrap, comp: Comparisons | None = None, power: float = DEFAULT_POWER) -> Ranking:
    """Order models, give each a rank range, list supported claims and separation estimates.

    With `comp` (the comparisons the bootstrap resampled), difference intervals get their Wald
    floor, a claim also needs the exact sign test over tasks, and models without comparisons
    get no rank. Claims are made by the family-wise step-down of `familywise` (one pair of
    models: exactly the pair's own interval).
    """
    beta = boot.point.log_strength
    m = beta.size
    sign: SignTests | None = None
    floor = None
    active = np.ones(m, dtype=bool)
    if comp is not None:
        floor = wald_floor(win_matrix(comp), beta, boot.point.prior, boot.level).pair
        sign = sign_tests(comp, beta)
        active = boot.point.comparisons > 0
    diffs = pairwise_differences(boot, floor)
    alpha = 1.0 - boot.level
    agrees = np.ones((m, m), dtype=bool)
    if sign is not None:
        agrees = (sign.p_value <= alpha) & (sign.higher > sign.lower)
    first, second = np.triu_indices(m, k=1)
    if diffs.excursion is None:  # pairwise_differences always measures them
        raise ValueError("the step-down needs each draw's excursion")
    steps = step_down(
        diffs.estimate[first, second],
        diffs.lower[first, second],
        diffs.upper[first, second],
        diffs.excursion,
        active[first] & active[second],
        agrees[first, second],
        agrees[second, first],
        boot.level,
        boot.n_units if boot.expand or boot.method == "jackknife" else None,
    )
    family = as_matrices(steps, m, boot.level)
    supported = np.zeros((m, m), dtype=bool)
    supported[first[steps.claimed_up], second[steps.claimed_up]] = True
    supported[second[steps.claimed_down], first[steps.claimed_down]] = True
    supported = consistent(supported)
    order = np.lexsort((-beta, ~active)).astype(np.int64)
    best, worst = rank_ranges(supported, active)
    groups: list[list[int]] = []
    separations: list[Separation] = []
    for pos, model in enumerate(order.tolist()):
        above = int(order[pos - 1]) if pos else -1
        if pos and (best[above], worst[above]) == (best[model], worst[model]):
            groups[-1].append(model)
        else:
            groups.append([model])
        if not pos or supported[above, model] or not (active[above] and active[model]):
            continue
        gap = float(diffs.estimate[above, model])
        half = gap - float(diffs.lower[above, model])
        widen = float(family.factor[above, model])
        planning, needed = planned_tasks(
            gap, half, boot.n_tasks, boot.level, power, boot.expand, widen
        )
        separations.append(
            Separation(
                upper=above,
                lower=model,
                difference=gap,
                half_width=half,
                tasks_even_odds=tasks_to_separate(
                    gap, half, boot.n_tasks, boot.level, 0.5, boot.expand, widen
                ),
                tasks_needed=needed,
                power=power,
                interval_excludes_zero=bool(diffs.lower[above, model] > 0.0),
                sign_p=None if sign is None else float(sign.p_value[above, model]),
                planning_gap=planning,
                family_excludes_zero=family.excludes_zero(above, model),
                family_factor=widen,
            )
        )
    rank_group = np.empty(m, dtype=np.int64)
    for number, members in enumerate(groups, start=1):
        rank_group[members] = number
    claims = []
    for pos, a in enumerate(order.tolist()):
        for b in order[pos + 1 :].tolist():
            if supported[a, b]:
                claims.append(
                    Claim(
                        upper=a,
                        lower=b,
                        difference=float(diffs.estimate[a, b]),
                        interval_low=float(diffs.lower[a, b]),
                        interval_high=float(diffs.upper[a, b]),
                        prob_above=float(diffs.prob_above[a, b]),
                        sign_p=None if sign is None else float(sign.p_value[a, b]),
                    )
                )
    return Ranking(
        order=order,
        rank_best=best,
        rank_worst=worst,
        rank_group=rank_group,
        groups=tuple(tuple(g) for g in groups),
        differences=diffs,
        supported=supported,
        sign=sign,
        claims=tuple(claims),
        separations=tuple(separations),
        n_tasks=boot.n_tasks,
        family=family,
    )
