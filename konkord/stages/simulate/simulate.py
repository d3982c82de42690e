"""`konkord simulate`: what an eval of a given size can claim, found by running it many times.

Each simulated run draws a field with known truth and judges it the way `konkord.sim` does:
per (task, pair) the better answer is model i with probability sigmoid(s_i + u_it - s_j - u_jt)
(u: task effects); in each of the two orders the judge is sure with probability `accuracy` and
then names the better answer, and otherwise says TIE (`tie_rate`), or takes the answer shown
first (`position_bias`), or the other one. The two orders are combined as `konkord.evidence.verdicts`
does (disagreement = a flipped tie), and the statistics are those `konkord report` uses
(`konkord.stats`: Bradley-Terry, task bootstrap, rank groups). Nothing is read or written here
but the SVG the caller asks for.

The truth an interval should cover is what the estimator converges to with endless tasks: the
judge's noise attenuates every gap by kappa = accuracy * (accuracy + (1 - accuracy) *
(1 - tie_rate)), so an inaccurate judge ranks the same way but with smaller gaps.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import logit, ndtri

from konkord import stats
from konkord.errors import KonkordError
from konkord.stats.bt import BoolArray, FloatArray, fit_bt_wins
from konkord.stats.ranking import rank
from konkord.stats.resample import Mode
from konkord.stats.simfield import expected_score

SEPARATION_TARGET = 0.8
DEFAULT_GRID = (7, 10, 14, 20, 30, 50, 75, 100, 150, 200, 300)


@dataclass(frozen=True)
class JudgeModel:
    """A simulated judge as the planning tool sees it (the `sim-judge` decision rule)."""

    accuracy: float = 0.85
    position_bias: float = 0.5
    tie_rate: float = 0.1

    def order_probabilities(self) -> tuple[float, float, float]:
        """P(names the better answer), P(the worse), P(tie), when the better is shown first."""
        unsure = (1.0 - self.accuracy) * (1.0 - self.tie_rate)
        better = self.accuracy + unsure * self.position_bias
        worse = unsure * (1.0 - self.position_bias)
        return better, worse, (1.0 - self.accuracy) * self.tie_rate

    def combined(self) -> tuple[float, float]:
        """P(both orders name the better answer), P(both name the worse): the rest are ties."""
        a, u = self.accuracy, (1.0 - self.accuracy) * (1.0 - self.tie_rate)
        p = self.position_bias
        return (a + u * p) * (a + u * (1.0 - p)), u * u * p * (1.0 - p)

    @property
    def attenuation(self) -> float:
        """kappa: how much of a true gap in expected score survives the judge's noise."""
        right, wrong = self.combined()
        return right - wrong

    @property
    def flip_rate(self) -> float:
        """The share of pairs whose two orders disagree (the same for every pair)."""
        right, wrong = self.combined()
        both_tie = ((1.0 - self.accuracy) * self.tie_rate) ** 2
        return 1.0 - right - wrong - both_tie


def accuracy_for_flip_rate(flip_rate: float, position_bias: float, tie_rate: float) -> float:
    """The judge accuracy that gives `flip_rate` at this position bias and tie rate."""

    def flips(accuracy: float) -> float:
        return JudgeModel(accuracy, position_bias, tie_rate).flip_rate

    worst = flips(0.0)
    if not 0.0 <= flip_rate <= worst:
        raise KonkordError(
            f"a flip rate of {flip_rate:.0%} is out of reach with position bias "
            f"{position_bias:g} and tie rate {tie_rate:g} (from 0% to {worst:.0%})"
        )
    low, high = 0.0, 1.0  # the flip rate falls as accuracy rises
    for _ in range(60):
        mid = (low + high) / 2
        if flips(mid) > flip_rate:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def strengths_from_win_rates(win_rates: list[float]) -> FloatArray:
    """Log-strengths (mean 0) whose expected win rate against the field is the one given.

    A published leaderboard's win rates are shares of a round robin. Many count a tie as a win
    for neither side, so they average below 50%; that shortfall is read as ties, shared evenly
    (each model's rate against the field is its rate plus half the missing share). The
    strengths are then solved exactly from mean_j P(i beats j) = rate_i.
    """
    from scipy.optimize import root

    for rate in win_rates:
        if not 0.0 < rate < 1.0:
            raise KonkordError(f"win rate {rate:g} must be strictly between 0 and 1 (e.g. 0.8)")
    if len(win_rates) < 2:
        raise KonkordError("a field needs at least two win rates")
    rates = np.asarray(win_rates, dtype=np.float64)
    target = rates + (0.5 - rates.mean())
    if target.min() <= 0.0 or target.max() >= 1.0:
        raise KonkordError(
            "these win rates cannot come from one round robin: spread evenly, the ties they "
            "leave out would push a model past 0% or 100%"
        )
    m = rates.size

    def excess(beta: FloatArray) -> FloatArray:
        prob = 0.5 * (1.0 + np.tanh(0.5 * (beta[:, None] - beta[None, :])))
        out: FloatArray = (prob.sum(axis=1) - 0.5) / (m - 1) - target
        return out

    solution = root(excess, logit(target), tol=1e-12)
    out: FloatArray = solution.x - solution.x.mean()
    return out


def strengths_from_spread(n_models: int, spread: float) -> FloatArray:
    """n models evenly spaced over `spread` logits, strongest first."""
    if n_models < 2:
        raise KonkordError("a field needs at least two models")
    out: FloatArray = np.linspace(spread / 2, -spread / 2, n_models)
    return out


def gap_to_logits(gap: float) -> float:
    """A gap in win-rate points around 50% (0.10 = 55% against 45%) as a log-strength gap."""
    if not 0.0 < gap < 1.0:
        raise KonkordError(f"gap {gap:g} must be between 0 and 1 (0.10 = ten points)")
    return float(logit(0.5 + gap / 2) - logit(0.5 - gap / 2))


@dataclass(frozen=True)
class Plan:
    """A study to simulate: the field, its size, the judge, and an optional labelling budget."""

    strength: FloatArray  # latent log-strengths, strongest first
    n_tasks: int
    judge: JudgeModel = JudgeModel()
    task_effect: float = 0.5
    runs: int = 200
    resamples: int = 500
    label_budget: int = 0
    labeller_accuracy: float = 0.8
    seed: int = 0
    mode: Mode = "task"  # what the bootstrap resamples: "task" (as report does) or "judgments"

    @property
    def n_models(self) -> int:
        return int(self.strength.size)


@dataclass(frozen=True)
class Truth:
    """What the estimator aims at: the BT fit to the expected (judged) score matrix."""

    log_strength: FloatArray
    expected_win_rate: FloatArray
    order: list[int]  # models best first by that truth


def truth_of(plan: Plan) -> Truth:
    """The large-sample target of the estimate for this field and judge."""
    centred = plan.strength - plan.strength.mean()
    win = expected_score(centred, plan.task_effect, 0.0)
    judged = 0.5 + (win - 0.5) * plan.judge.attenuation
    np.fill_diagonal(judged, 0.0)
    fit = fit_bt_wins(judged, prior=0.0)
    order = [int(k) for k in np.argsort(-fit.log_strength, kind="stable")]
    return Truth(fit.log_strength, fit.expected_win_rate, order)


def draw_run(
    plan: Plan, n_tasks: int, rng: np.random.Generator
) -> tuple[stats.Comparisons, int, BoolArray, FloatArray]:
    """One run: (pair outcomes, flips, whether i was truly better, judge's combined score)."""
    m = plan.n_models
    a, b = np.triu_indices(m, k=1)
    task = np.repeat(np.arange(n_tasks), a.size)
    i, j = np.tile(a, n_tasks), np.tile(b, n_tasks)
    local = np.broadcast_to(plan.strength - plan.strength.mean(), (n_tasks, m)).copy()
    if plan.task_effect > 0:
        local += rng.normal(0.0, plan.task_effect, size=(n_tasks, m))
    gap = local[task, i] - local[task, j]
    i_better = rng.random(task.size) < 0.5 * (1.0 + np.tanh(0.5 * gap))
    votes = [_order_vote(plan.judge, i_better, i_first, rng) for i_first in (True, False)]
    score = np.where(votes[0] == votes[1], votes[0], 0.5)
    flips = int(np.count_nonzero(votes[0] != votes[1]))
    comp = stats.comparisons(task, i, j, score, m, n_tasks)
    return comp, flips, i_better, score


def _order_vote(
    judge: JudgeModel, i_better: BoolArray, i_first: bool, rng: np.random.Generator
) -> FloatArray:
    """One order's verdicts in model terms: 1 = i, 0 = j, 0.5 = tie."""
    n = i_better.size
    sure = rng.random(n) < judge.accuracy
    tie = rng.random(n) < judge.tie_rate
    first = rng.random(n) < judge.position_bias
    takes_i = first if i_first else ~first
    vote = np.where(sure, i_better.astype(np.float64), np.where(tie, 0.5, takes_i * 1.0))
    out: FloatArray = vote.astype(np.float64)
    return out


def _labels(
    i_better: BoolArray, score: FloatArray, budget: int, accuracy: float, rng: np.random.Generator
) -> int:
    """Agreements of a labeller of `accuracy` with the judge on `budget` random comparisons."""
    pick = rng.choice(i_better.size, size=min(budget, i_better.size), replace=False)
    truth = np.where(i_better[pick], 1.0, 0.0)
    right = rng.random(pick.size) < accuracy
    # a wrong label is one of the two other outcomes, equally often
    other = np.where(rng.random(pick.size) < 0.5, 1.0 - truth, 0.5)
    label = np.where(right, truth, other)
    return int(np.count_nonzero(label == score[pick]))


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of k successes in n trials."""
    if n == 0:
        return (math.nan, math.nan)
    z = float(ndtri(0.5 + level / 2))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


@dataclass(frozen=True)
class LabelOutlook:
    """The agreement a labeller will measure against the judge, and its interval."""

    budget: int
    labeller_accuracy: float
    expected_agreement: float
    mean_measured: float
    typical_low: float
    typical_high: float
    coverage: float  # share of runs whose Wilson interval holds the expected agreement


@dataclass(frozen=True)
class Outlook:
    """What a study of this size can claim, over many simulated runs."""

    plan: Plan
    truth: Truth
    coverage: float  # of the 95% intervals of expected win rate, all models and runs
    coverage_by_model: FloatArray
    separated: FloatArray  # per adjacent pair (true order): share of runs separated right
    wrong_claims: float  # share of runs with at least one claim against the truth
    claims_made: int  # supported claims over all runs
    claims_false: int  # of which the truth contradicts (or has the two models equal)
    flip_rate: float  # measured over all runs
    groups_mean: float  # mean number of rank groups
    alone: FloatArray  # per model: share of runs placing it apart from both neighbours
    claimed: FloatArray  # [a, b]: share of runs claiming a ranks above b
    together: FloatArray  # [a, b]: share of runs in which neither is placed above the other
    patterns: dict[tuple[tuple[int, ...], ...], int]  # rank groups -> runs that gave them
    labels: LabelOutlook | None = None

    def common_patterns(self, top: int = 3) -> list[tuple[tuple[tuple[int, ...], ...], float]]:
        """The most frequent rank-group outcomes with their share of runs."""
        ranked = sorted(self.patterns.items(), key=lambda item: -item[1])[:top]
        return [(groups, count / self.plan.runs) for groups, count in ranked]


def run_plan(plan: Plan, n_tasks: int | None = None) -> Outlook:
    """Simulate `plan.runs` whole runs and summarise what they could claim."""
    tasks = plan.n_tasks if n_tasks is None else n_tasks
    truth = truth_of(plan)
    adjacent = list(itertools.pairwise(truth.order))
    rng = np.random.default_rng([plan.seed, tasks])
    covered = np.zeros(plan.n_models)
    separated = np.zeros(len(adjacent))
    wrong_runs = 0
    flips = 0
    pairs_seen = 0
    groups = 0
    patterns: dict[tuple[tuple[int, ...], ...], int] = {}
    alone = np.zeros(plan.n_models)
    claimed = np.zeros((plan.n_models, plan.n_models))
    together = np.zeros((plan.n_models, plan.n_models))
    claims_made = claims_false = 0
    agreements: list[int] = []
    for run in range(plan.runs):
        comp, run_flips, i_better, score = draw_run(plan, tasks, rng)
        flips += run_flips
        pairs_seen += len(comp)
        boot = stats.bootstrap(comp, n_resamples=plan.resamples, seed=run, mode=plan.mode)
        ewr = boot.intervals()["expected_win_rate"]
        covered += (ewr.lower <= truth.expected_win_rate) & (truth.expected_win_rate <= ewr.upper)
        ranking = rank(boot, comp)
        diffs = ranking.differences
        for k, (upper, lower) in enumerate(adjacent):
            separated[k] += diffs.lower[upper, lower] > 0.0
        true_beta = truth.log_strength
        false = [c for c in ranking.claims if true_beta[c.upper] - true_beta[c.lower] < 1e-9]
        wrong_runs += bool(false)
        claims_made += len(ranking.claims)
        claims_false += len(false)
        for claim in ranking.claims:
            claimed[claim.upper, claim.lower] += 1
        groups += len(ranking.groups)
        patterns[ranking.groups] = patterns.get(ranking.groups, 0) + 1
        # "alone": the data places the model below the one ranked just above it and above the
        # one just below; "together": neither of the two is placed above the other
        order = ranking.order
        ahead = np.r_[True, ranking.supported[order[:-1], order[1:]]]
        alone[order] += ahead & np.r_[ahead[1:], True]
        together += ~(ranking.supported | ranking.supported.T)
        if plan.label_budget:
            agreements.append(
                _labels(i_better, score, plan.label_budget, plan.labeller_accuracy, rng)
            )
    labels = _label_outlook(plan, agreements) if plan.label_budget else None
    return Outlook(
        plan=replace(plan, n_tasks=tasks),
        truth=truth,
        coverage=float(covered.sum() / (plan.runs * plan.n_models)),
        coverage_by_model=covered / plan.runs,
        separated=separated / plan.runs,
        wrong_claims=wrong_runs / plan.runs,
        flip_rate=flips / max(1, pairs_seen),
        groups_mean=groups / plan.runs,
        alone=alone / plan.runs,
        claimed=claimed / plan.runs,
        together=together / plan.runs,
        claims_made=claims_made,
        claims_false=claims_false,
        patterns=patterns,
        labels=labels,
    )


def expected_agreement(judge: JudgeModel, labeller_accuracy: float) -> float:
    """P(labeller == judge's combined verdict) when the labeller errs to either other outcome."""
    right, _ = judge.combined()
    return right * labeller_accuracy + (1 - right) * (1 - labeller_accuracy) / 2


def _label_outlook(plan: Plan, agreements: list[int]) -> LabelOutlook:
    budget = plan.label_budget
    target = expected_agreement(plan.judge, plan.labeller_accuracy)
    bounds = [wilson(k, budget) for k in agreements]
    lows = np.array([low for low, _ in bounds])
    highs = np.array([high for _, high in bounds])
    return LabelOutlook(
        budget=budget,
        labeller_accuracy=plan.labeller_accuracy,
        expected_agreement=target,
        mean_measured=float(np.mean(agreements)) / budget,
        typical_low=float(np.median(lows)),
        typical_high=float(np.median(highs)),
        coverage=float(np.mean((lows <= target) & (target <= highs))),
    )
