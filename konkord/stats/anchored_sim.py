"""Simulated fields with a biased judge and a labelled sample, to check the anchored ranking.

Every pair meets once per task. Which answer is better is drawn from the models' latent
strengths (with task effects, as in `simfield`). People label an item right with
`labeller_accuracy`; the truth a human-anchored interval should cover is what endless labels
would give: the Bradley-Terry fit to people's expected score matrix. The judge reads an item
right with `judge_accuracy`, and on top of that favours one model by `bias` logits, the kind
of error (a judge that likes one model's style) that more tasks cannot fix. A sample of
`n_labels` comparisons is drawn uniformly without replacement, so every inclusion probability
is n_labels / N.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .bt import FloatArray, ModelVector, comparisons, fit_bt_wins
from .ppi import (
    AnchoredData,
    anchored_bootstrap,
    anchored_data,
    effective_labels,
    win_rate_variance,
)
from .resample import bootstrap
from .simfield import better_probability, draw_outcomes, draw_strengths


@dataclass(frozen=True)
class BiasedJudgeField:
    """One simulated run: judge on every pair, people on a sample, and the people's truth."""

    data: AnchoredData
    judge_task: npt.NDArray[np.int64]
    judge_i: npt.NDArray[np.int64]
    judge_j: npt.NDArray[np.int64]
    judge_score: FloatArray
    target_log_strength: ModelVector  # people's ranking with endless labels
    target_expected_win_rate: ModelVector


def _sigmoid(x: FloatArray) -> FloatArray:
    out: FloatArray = 0.5 * (1.0 + np.tanh(0.5 * x))
    return out


def simulate_biased_judge_field(
    n_models: int,
    n_tasks: int,
    n_labels: int,
    bias: float,
    favoured: int = 0,
    judge_accuracy: float = 0.8,
    labeller_accuracy: float = 0.9,
    seed: int | np.random.Generator = 0,
    strength: npt.ArrayLike | None = None,
    spread: float = 1.0,
    task_effect_sd: float = 0.5,
) -> BiasedJudgeField:
    """Draw a field, a judge biased by `bias` logits toward model `favoured`, and labels."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    beta = draw_strengths(rng, n_models, strength, spread)
    task, i, j, better_i = draw_outcomes(rng, beta, n_tasks, task_effect_sd)
    n = task.size
    if not 0 < n_labels <= n:
        raise ValueError(f"n_labels must be in 1..{n}, got {n_labels}")
    person_right = rng.random(n) < labeller_accuracy
    person_score = np.where(better_i == person_right, 1.0, 0.0)
    read_right = np.where(better_i, judge_accuracy, 1.0 - judge_accuracy)
    read_right = np.clip(read_right, 1e-9, 1.0 - 1e-9)
    lean = bias * ((i == favoured).astype(np.float64) - (j == favoured).astype(np.float64))
    judge_p = _sigmoid(np.log(read_right / (1.0 - read_right)) + lean)
    judge_score = (rng.random(n) < judge_p).astype(np.float64)
    sample = rng.choice(n, size=n_labels, replace=False)
    inclusion = np.full(n_labels, n_labels / n)
    data = anchored_data(
        (task, i, j, judge_score),
        (task[sample], i[sample], j[sample], person_score[sample]),
        judge_score[sample],
        inclusion,
        n_models,
        n_tasks,
    )
    prob = better_probability(beta, task_effect_sd)
    expected = labeller_accuracy * prob + (1.0 - labeller_accuracy) * (1.0 - prob)
    np.fill_diagonal(expected, 0.0)
    target = fit_bt_wins(expected, prior=0.0)
    return BiasedJudgeField(
        data=data,
        judge_task=task,
        judge_i=i,
        judge_j=j,
        judge_score=judge_score,
        target_log_strength=target.log_strength,
        target_expected_win_rate=target.expected_win_rate,
    )


@dataclass(frozen=True)
class CoverageRow:
    """How often one kind of interval covered people's ranking, and how wide it was."""

    name: str
    coverage: float  # share of (field, model) intervals of the win rate covering the truth
    coverage_se: float  # its binomial standard error over fields (clustered by field)
    all_covered: float  # share of fields where every model's interval covered the truth
    mean_width: float  # mean interval width of the expected win rate, in points of 0..1
    width_se: float


@dataclass(frozen=True)
class CoverageStudy:
    """Judge-only, labels-only and anchored intervals over many simulated fields."""

    rows: tuple[CoverageRow, CoverageRow, CoverageRow]
    n_fields: int
    mean_lambda: float
    mean_effective_labels: float


def _row(name: str, covered: FloatArray, widths: FloatArray) -> CoverageRow:
    per_field = covered.mean(axis=1)
    n = covered.shape[0]
    return CoverageRow(
        name=name,
        coverage=float(per_field.mean()),
        coverage_se=float(per_field.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan"),
        all_covered=float(covered.all(axis=1).mean()),
        mean_width=float(widths.mean()),
        width_se=float(widths.mean(axis=1).std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan"),
    )


def coverage_study(
    n_fields: int,
    n_models: int,
    n_tasks: int,
    n_labels: int,
    bias: float,
    judge_accuracy: float = 0.8,
    labeller_accuracy: float = 0.9,
    spread: float = 1.0,
    task_effect_sd: float = 0.5,
    resamples: int = 300,
    seed: int = 0,
    strength: npt.ArrayLike | None = None,
    favoured: int = 0,
) -> CoverageStudy:
    """Coverage of people's win rates by the three intervals, over `n_fields` fields.

    Strengths are drawn N(0, spread^2) per field unless `strength` fixes them.
    """
    rng = np.random.default_rng(seed)
    shape = (n_fields, n_models)
    covered = {k: np.zeros(shape, dtype=bool) for k in ("judge", "labels", "anchored")}
    widths = {k: np.zeros(shape) for k in covered}
    lambdas = np.zeros(n_fields)
    effective = np.zeros(n_fields)
    for f in range(n_fields):
        field = simulate_biased_judge_field(
            n_models, n_tasks, n_labels, bias, favoured=favoured,
            judge_accuracy=judge_accuracy, labeller_accuracy=labeller_accuracy,
            seed=rng, spread=spread, task_effect_sd=task_effect_sd, strength=strength,
        )
        truth = field.target_expected_win_rate
        judge = bootstrap(
            comparisons(field.judge_task, field.judge_i, field.judge_j, field.judge_score,
                        n_models, n_tasks),
            n_resamples=resamples, seed=f,
        ).intervals()["expected_win_rate"]
        labels = anchored_bootstrap(field.data, lam=0.0, n_resamples=resamples, seed=f)
        anchored = anchored_bootstrap(field.data, n_resamples=resamples, seed=f)
        lambdas[f] = anchored.lam
        label_iv = labels.bootstrap.intervals()["expected_win_rate"]
        anchored_iv = anchored.bootstrap.intervals()["expected_win_rate"]
        for name, iv in (("judge", judge), ("labels", label_iv), ("anchored", anchored_iv)):
            covered[name][f] = (iv.lower <= truth) & (truth <= iv.upper)
            widths[name][f] = iv.upper - iv.lower
        effective[f] = effective_labels(
            n_labels, win_rate_variance(labels.bootstrap), win_rate_variance(anchored.bootstrap)
        )
    rows = (
        _row("judge only", covered["judge"], widths["judge"]),
        _row("labels only", covered["labels"], widths["labels"]),
        _row("anchored", covered["anchored"], widths["anchored"]),
    )
    return CoverageStudy(rows, n_fields, float(lambdas.mean()), float(np.nanmean(effective)))
