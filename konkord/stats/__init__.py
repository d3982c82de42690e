"""The statistics engine: pure functions, numpy arrays in, arrays or frozen dataclasses out.

Input representation. A run's outcomes are `Comparisons` (build with `comparisons(...)`):
parallel arrays with one entry per (task, model pair) outcome, the judge's combined verdict
over both orders:

    task   int   (C,)  task index, 0..n_tasks-1
    i, j   int   (C,)  model indices, 0..n_models-1, i != j (either order)
    score  float (C,)  1 = i won, 0.5 = tie (a flipped pair counts as a tie), 0 = j won

Order-level diagnostics (flip rate, positional split) take `Verdicts` from
`konkord.stats.diagnostics`: one entry per (task, pair, order) call.

Modules:
    bt           Bradley-Terry fit (batched Newton), per-model figures
    resample     task / judgment bootstrap, percentile and BCa intervals
    jackknife_t  leave-one-task-out t intervals (the anchored ranking's)
    ranking      pairwise difference intervals, rank groups, supported claims
    diagnostics  flips, position, cycles, connectivity, consistency
    judges       judges compared: consensus match (leave one judge out), per-task consistency,
                 length preference
    simfield     simulated fields with known strengths (tests, benchmarks, `simulate`)
    special      the special functions they use (normal, Student t, binomial, logistic)
    components   connected components of a small graph

May import: numpy, scipy and itself; nothing else of konkord (pyproject.toml's "Statistics
are pure" contract). What a report computes imports numpy alone (`special`, `components`:
scipy's import took a third of a second of it); scipy is imported only where a rarer path
needs it (the sparse matrices of the judgments resampling unit).

The names below are loaded when first asked for (`from konkord.stats import fit_bt`, or
`stats.fit_bt`): importing one module of the package (`konkord.stats.style_features`) does
not import the others (about a quarter of a second, which `konkord report` spends later,
beside another process, not before it can hand the tasks to one).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .bt import (
        BTFit,
        Comparisons,
        NewtonResult,
        comparisons,
        expected_win_rate,
        fit_bt,
        fit_bt_wins,
        newton_bt,
        raw_win_rate,
        task_win_matrices,
        win_matrix,
        win_probability,
    )
    from .diagnostics import (
        Connectivity,
        Consistency,
        CycleStats,
        DisconnectedGraphError,
        FlipRates,
        PositionSplit,
        Verdicts,
        connectivity,
        consistency,
        consistency_of_wins,
        cycle_rate,
        flip_rates,
        position_split,
        verdicts,
        wilson_interval,
    )
    from .planning import tasks_to_separate
    from .ranking import (
        Claim,
        PairwiseDifferences,
        Ranking,
        Separation,
        pairwise_differences,
        rank,
    )
    from .ranking_text import describe_claims, describe_separations
    from .resample import Bootstrap, Interval, bootstrap, bootstrap_interval
    from .simfield import (
        JudgedField,
        SimulatedField,
        SimulatedJudge,
        simulate_field,
        simulate_judged_field,
    )

# Each name of __all__ and the module of the package that holds it.
_HOME = {
    "BTFit": "bt",
    "Bootstrap": "resample",
    "Claim": "ranking",
    "Comparisons": "bt",
    "Connectivity": "diagnostics",
    "Consistency": "diagnostics",
    "CycleStats": "diagnostics",
    "DisconnectedGraphError": "diagnostics",
    "FlipRates": "diagnostics",
    "Interval": "resample",
    "JudgedField": "simfield",
    "NewtonResult": "bt",
    "PairwiseDifferences": "ranking",
    "PositionSplit": "diagnostics",
    "Ranking": "ranking",
    "Separation": "ranking",
    "SimulatedField": "simfield",
    "SimulatedJudge": "simfield",
    "Verdicts": "diagnostics",
    "bootstrap": "resample",
    "bootstrap_interval": "resample",
    "comparisons": "bt",
    "connectivity": "diagnostics",
    "consistency": "diagnostics",
    "consistency_of_wins": "diagnostics",
    "cycle_rate": "diagnostics",
    "describe_claims": "ranking_text",
    "describe_separations": "ranking_text",
    "expected_win_rate": "bt",
    "fit_bt": "bt",
    "fit_bt_wins": "bt",
    "flip_rates": "diagnostics",
    "newton_bt": "bt",
    "pairwise_differences": "ranking",
    "position_split": "diagnostics",
    "rank": "ranking",
    "raw_win_rate": "bt",
    "simulate_field": "simfield",
    "simulate_judged_field": "simfield",
    "task_win_matrices": "bt",
    "tasks_to_separate": "planning",
    "verdicts": "diagnostics",
    "wilson_interval": "diagnostics",
    "win_matrix": "bt",
    "win_probability": "bt",
}


def __getattr__(name: str) -> Any:
    """A name of `__all__`, imported from its module on first use and kept here."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

__all__ = [
    "BTFit",
    "Bootstrap",
    "Claim",
    "Comparisons",
    "Connectivity",
    "Consistency",
    "CycleStats",
    "DisconnectedGraphError",
    "FlipRates",
    "Interval",
    "JudgedField",
    "NewtonResult",
    "PairwiseDifferences",
    "PositionSplit",
    "Ranking",
    "Separation",
    "SimulatedField",
    "SimulatedJudge",
    "Verdicts",
    "bootstrap",
    "bootstrap_interval",
    "comparisons",
    "connectivity",
    "consistency",
    "consistency_of_wins",
    "cycle_rate",
    "describe_claims",
    "describe_separations",
    "expected_win_rate",
    "fit_bt",
    "fit_bt_wins",
    "flip_rates",
    "newton_bt",
    "pairwise_differences",
    "position_split",
    "rank",
    "raw_win_rate",
    "simulate_field",
    "simulate_judged_field",
    "task_win_matrices",
    "tasks_to_separate",
    "verdicts",
    "wilson_interval",
    "win_matrix",
    "win_probability",
]
