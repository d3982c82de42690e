"""Simulated fields with known strengths, to check that intervals cover the truth.

Each model has a latent log-strength; with `task_effect_sd > 0` each (task, model) gets its
own random shift, so a model is better on some tasks than others and the outcomes of one
task are correlated, which is what a task bootstrap is for. Every pair meets once per task.

The truth an interval should cover is what the estimator converges to with endless tasks:
the Bradley-Terry fit to the expected score matrix (task effects attenuate the gaps, so this
is not the latent strengths themselves when task effects are present).

`simulate_judged_field` adds a judge that sees both orders of every pair: with a given
accuracy it knows which answer is better; when unsure it takes the slot shown first with
probability `position_bias` and tosses a coin otherwise; it says TIE at `tie_rate`. The two
orders combine as the report combines them (agreement wins, any disagreement is a tie).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .bt import Comparisons, IntArray, ModelVector, PairMatrix, comparisons, fit_bt_wins
from .diagnostics import Verdicts, verdicts

_HERMITE_NODES = 64


@dataclass(frozen=True)
class SimulatedField:
    """Pair outcomes of a simulated run, with the truth they were drawn from."""

    comparisons: Comparisons
    strength: ModelVector  # latent log-strengths, mean 0
    task_effect_sd: float
    tie_rate: float
    expected_score: PairMatrix  # [a, b] = expected score of a against b on a random task
    target_log_strength: ModelVector  # BT fit to expected_score: what the estimate aims at
    target_expected_win_rate: ModelVector


def better_probability(strength: ModelVector, task_effect_sd: float) -> PairMatrix:
    """P(a's answer is better than b's) on a random task (Gauss-Hermite over task effects)."""
    diff = strength[:, None] - strength[None, :]
    if task_effect_sd > 0.0:
        nodes, weights = np.polynomial.hermite_e.hermegauss(_HERMITE_NODES)
        weights = weights / weights.sum()
        spread = np.sqrt(2.0) * task_effect_sd  # sd of the difference of two task effects
        shifted = diff[..., None] + spread * nodes
        prob: PairMatrix = (0.5 * (1.0 + np.tanh(0.5 * shifted)) * weights).sum(axis=-1)
    else:
        prob = 0.5 * (1.0 + np.tanh(0.5 * diff))
    return prob


def expected_score(strength: ModelVector, task_effect_sd: float, tie_rate: float) -> PairMatrix:
    """Expected score of a against b on a random task, ties at `tie_rate` counting half."""
    score: PairMatrix = tie_rate * 0.5 + (1.0 - tie_rate) * better_probability(
        strength, task_effect_sd
    )
    np.fill_diagonal(score, 0.0)
    return score


def draw_strengths(
    rng: np.random.Generator, n_models: int, strength: npt.ArrayLike | None, spread: float
) -> ModelVector:
    if strength is None:
        beta = rng.normal(0.0, spread, size=n_models)
    else:
        beta = np.asarray(strength, dtype=np.float64).copy()
        if beta.shape != (n_models,):
            raise ValueError(f"strength must have {n_models} entries, got shape {beta.shape}")
    out: ModelVector = beta - beta.mean()
    return out


def draw_outcomes(
    rng: np.random.Generator, beta: ModelVector, n_tasks: int, task_effect_sd: float
) -> tuple[IntArray, IntArray, IntArray, npt.NDArray[np.bool_]]:
    """Every pair (i < j) on every task, and whether i's answer is the better one."""
    n_models = beta.size
    a, b = np.triu_indices(n_models, k=1)
    task = np.repeat(np.arange(n_tasks), a.size)
    i = np.tile(a, n_tasks)
    j = np.tile(b, n_tasks)
    local = np.broadcast_to(beta, (n_tasks, n_models)).copy()
    if task_effect_sd > 0.0:
        local += rng.normal(0.0, task_effect_sd, size=(n_tasks, n_models))
    logit = local[task, i] - local[task, j]
    better = rng.random(task.size) < 0.5 * (1.0 + np.tanh(0.5 * logit))
    return task, i, j, better


def simulate_field(
    n_models: int,
    n_tasks: int,
    seed: int | np.random.Generator = 0,
    strength: npt.ArrayLike | None = None,
    spread: float = 1.0,
    task_effect_sd: float = 0.0,
    tie_rate: float = 0.0,
) -> SimulatedField:
    """Draw one field: strengths N(0, spread^2) unless given, one outcome per pair per task."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    beta = draw_strengths(rng, n_models, strength, spread)
    task, i, j, better = draw_outcomes(rng, beta, n_tasks, task_effect_sd)
    score = better.astype(np.float64)
    if tie_rate > 0.0:
        score[rng.random(task.size) < tie_rate] = 0.5
    expected = expected_score(beta, task_effect_sd, tie_rate)
    target = fit_bt_wins(expected, prior=0.0)
    return SimulatedField(
        comparisons=comparisons(task, i, j, score, n_models, n_tasks),
        strength=beta,
        task_effect_sd=task_effect_sd,
        tie_rate=tie_rate,
        expected_score=expected,
        target_log_strength=target.log_strength,
        target_expected_win_rate=target.expected_win_rate,
    )


@dataclass(frozen=True)
class SimulatedJudge:
    """A judge's habits: how often it knows, where it leans when it does not, how often TIE."""

    accuracy: float = 1.0  # share of calls in which it sees which answer is better
    position_bias: float = 0.0  # when unsure, share of calls given to the slot shown first
    tie_rate: float = 0.0  # share of calls answered TIE whatever the answers

    def better_wins(self) -> tuple[float, float]:
        """P(the better answer wins one call) when shown first, and when shown second."""
        sure = (1.0 - self.tie_rate) * self.accuracy
        unsure = (1.0 - self.tie_rate) * (1.0 - self.accuracy)
        lean = self.position_bias + (1.0 - self.position_bias) / 2.0
        return sure + unsure * lean, sure + unsure * (1.0 - lean)

    def combined_better_score(self) -> float:
        """Expected combined score (both orders) of the better answer of a pair."""
        first, second = self.better_wins()
        unsure = (1.0 - self.tie_rate) * (1.0 - self.accuracy)
        lean = self.position_bias + (1.0 - self.position_bias) / 2.0
        both_better = first * second
        both_worse = (unsure * (1.0 - lean)) * (unsure * lean)
        return both_better + 0.5 * (1.0 - both_better - both_worse)


@dataclass(frozen=True)
class JudgedField:
    """A simulated run seen through a simulated judge: single calls and combined outcomes."""

    verdicts: Verdicts  # one call per (task, pair, order)
    comparisons: Comparisons  # the two orders combined, a disagreement counting as a tie
    strength: ModelVector
    judge: SimulatedJudge
    task_effect_sd: float
    expected_score: PairMatrix  # expected combined score of a against b
    target_log_strength: ModelVector
    target_expected_win_rate: ModelVector


def simulate_judged_field(
    n_models: int,
    n_tasks: int,
    judge: SimulatedJudge,
    seed: int | np.random.Generator = 0,
    strength: npt.ArrayLike | None = None,
    spread: float = 1.0,
    task_effect_sd: float = 0.0,
) -> JudgedField:
    """Draw a field, judge every pair in both orders, and combine the two calls."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    beta = draw_strengths(rng, n_models, strength, spread)
    task, i, j, better_i = draw_outcomes(rng, beta, n_tasks, task_effect_sd)
    n = task.size
    # Column 0: i shown first; column 1: j shown first. Score of the first-shown answer.
    first_is_better = np.stack([better_i, ~better_i], axis=1)
    tie = rng.random((n, 2)) < judge.tie_rate
    sure = rng.random((n, 2)) < judge.accuracy
    leans_first = rng.random((n, 2)) < judge.position_bias
    coin = rng.random((n, 2)) < 0.5
    first_wins = np.where(sure, first_is_better, leans_first | coin)
    score_first = np.where(tie, 0.5, first_wins.astype(np.float64))
    score_i = np.stack([score_first[:, 0], 1.0 - score_first[:, 1]], axis=1)
    combined = np.where(score_i[:, 0] == score_i[:, 1], score_i[:, 0], 0.5)
    calls = verdicts(
        np.concatenate([task, task]),
        np.concatenate([i, j]),
        np.concatenate([j, i]),
        np.concatenate([score_first[:, 0], score_first[:, 1]]),
        n_models,
        n_tasks,
    )
    good = judge.combined_better_score()
    prob = better_probability(beta, task_effect_sd)
    expected = prob * good + (1.0 - prob) * (1.0 - good)
    np.fill_diagonal(expected, 0.0)
    target = fit_bt_wins(expected, prior=0.0)
    return JudgedField(
        verdicts=calls,
        comparisons=comparisons(task, i, j, combined, n_models, n_tasks),
        strength=beta,
        judge=judge,
        task_effect_sd=task_effect_sd,
        expected_score=expected,
        target_log_strength=target.log_strength,
        target_expected_win_rate=target.expected_win_rate,
    )
