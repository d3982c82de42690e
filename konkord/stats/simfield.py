"""Simulated fields with known strengths, to check that intervals cover the truth.

Each model has a latent log-strength; with `task_effect_sd > 0` each (task, model) gets its
own random shift, so a model is better on some tasks than others and the outcomes of one
task are correlated, which is what a task bootstrap is for. Every pair meets once per task.

The truth an interval should cover is what the estimator converges to with endless tasks:
the Bradley-Terry fit to the expected score matrix (task effects attenuate the gaps, so this
is not the latent strengths themselves when task effects are present).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .bt import Comparisons, ModelVector, PairMatrix, comparisons, fit_bt_wins

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


def expected_score(strength: ModelVector, task_effect_sd: float, tie_rate: float) -> PairMatrix:
    """Expected score of a against b over task effects (Gauss-Hermite quadrature)."""
    diff = strength[:, None] - strength[None, :]
    if task_effect_sd > 0.0:
        nodes, weights = np.polynomial.hermite_e.hermegauss(_HERMITE_NODES)
        weights = weights / weights.sum()
        spread = np.sqrt(2.0) * task_effect_sd  # sd of the difference of two task effects
        shifted = diff[..., None] + spread * nodes
        win = (0.5 * (1.0 + np.tanh(0.5 * shifted)) * weights).sum(axis=-1)
    else:
        win = 0.5 * (1.0 + np.tanh(0.5 * diff))
    score: PairMatrix = tie_rate * 0.5 + (1.0 - tie_rate) * win
    np.fill_diagonal(score, 0.0)
    return score


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
    if strength is None:
        beta = rng.normal(0.0, spread, size=n_models)
    else:
        beta = np.asarray(strength, dtype=np.float64).copy()
        if beta.shape != (n_models,):
            raise ValueError(f"strength must have {n_models} entries, got shape {beta.shape}")
    beta -= beta.mean()
    a, b = np.triu_indices(n_models, k=1)
    task = np.repeat(np.arange(n_tasks), a.size)
    i = np.tile(a, n_tasks)
    j = np.tile(b, n_tasks)
    local = np.broadcast_to(beta, (n_tasks, n_models)).copy()
    if task_effect_sd > 0.0:
        local += rng.normal(0.0, task_effect_sd, size=(n_tasks, n_models))
    logit = local[task, i] - local[task, j]
    won = rng.random(task.size) < 0.5 * (1.0 + np.tanh(0.5 * logit))
    score = won.astype(np.float64)
    if tie_rate > 0.0:
        score[rng.random(task.size) < tie_rate] = 0.5
    comp = comparisons(task, i, j, score, n_models, n_tasks)
    expected = expected_score(beta, task_effect_sd, tie_rate)
    target = fit_bt_wins(expected, prior=0.0)
    return SimulatedField(
        comparisons=comp,
        strength=beta,
        task_effect_sd=task_effect_sd,
        tie_rate=tie_rate,
        expected_score=expected,
        target_log_strength=target.log_strength,
        target_expected_win_rate=target.expected_win_rate,
    )
