"""Statistical validity against a known truth, in loose bands with fixed seeds (the figures
themselves come from benchmarks/bench_validity.py)."""

from __future__ import annotations

import numpy as np

from konkord import stats
from konkord.stages.simulate.simulate import (
    JudgeModel,
    Plan,
    draw_run,
    run_plan,
    strengths_from_spread,
)

JUDGE = JudgeModel(accuracy=0.85, position_bias=0.5, tie_rate=0.1)
TWINS = np.array([0.8, 0.8, 0.0, 0.0, -0.8, -0.8])


def test_task_bootstrap_covers_and_beats_the_judgment_bootstrap_under_task_effects() -> None:
    """(a) With task effects, resampling judgments ignores the clustering and under-covers."""
    strength = strengths_from_spread(5, 2.0)
    task = run_plan(Plan(strength, 25, JUDGE, 2.0, runs=60, resamples=200, seed=11))
    judgments = run_plan(
        Plan(strength, 25, JUDGE, 2.0, runs=60, resamples=200, seed=11, mode="judgments")
    )
    assert task.coverage >= 0.86
    assert task.coverage >= judgments.coverage - 0.02


def test_without_task_effects_both_bootstraps_cover() -> None:
    strength = strengths_from_spread(5, 2.0)
    plan = Plan(strength, 25, JUDGE, 0.0, runs=40, resamples=200, seed=12)
    assert run_plan(plan).coverage >= 0.85


def test_supported_claims_are_rarely_false_and_twins_rarely_split() -> None:
    """(b) and (d) on three pairs of models of equal strength."""
    out = run_plan(Plan(TWINS, 25, JUDGE, 1.0, runs=60, resamples=200, seed=13))
    assert out.claims_made > 60  # the field is spread enough for claims to be made
    assert out.claims_false / out.claims_made <= 0.08
    split = np.mean([1.0 - out.together[k, k + 1] for k in (0, 2, 4)])
    assert split <= 0.1
    # a claim between twins is false by definition, and the counts say so
    between_twins = sum(out.claimed[k, k + 1] + out.claimed[k + 1, k] for k in (0, 2, 4))
    assert between_twins * out.plan.runs <= out.claims_false + 1e-9


def test_a_pure_position_judge_gives_all_flips_all_ties_and_no_ranking() -> None:
    """(c) The answer shown first always wins, so the two orders always disagree."""
    judge = JudgeModel(accuracy=0.0, position_bias=1.0, tie_rate=0.0)
    plan = Plan(strengths_from_spread(5, 3.0), 25, judge, 1.0)
    comp, flips, _, score = draw_run(plan, 25, np.random.default_rng(0))
    assert flips == len(comp)
    assert np.all(score == 0.5)
    assert np.allclose(stats.fit_bt(comp).log_strength, 0.0)
    out = run_plan(Plan(plan.strength, 25, judge, 1.0, runs=10, resamples=100))
    assert out.claims_made == 0
    assert out.flip_rate == 1.0
