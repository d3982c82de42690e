"""`konkord simulate`: the judge model's closed forms, the published-like field, the command."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from konkord.cli import cli
from konkord.errors import KonkordError
from konkord.stages.simulate import simulate as sim
from konkord.stages.simulate import simulate_sweep

PUBLISHED_WIN_RATES = [0.80, 0.70, 0.61, 0.51, 0.42, 0.32, 0.22, 0.13, 0.03]


def test_pure_position_bias_flips_every_pair_and_carries_no_signal() -> None:
    judge = sim.JudgeModel(accuracy=0.0, position_bias=1.0, tie_rate=0.0)
    assert judge.flip_rate == pytest.approx(1.0)
    assert judge.attenuation == pytest.approx(0.0)


def test_perfect_judge_never_flips_and_keeps_every_gap() -> None:
    judge = sim.JudgeModel(accuracy=1.0, position_bias=0.9, tie_rate=0.3)
    assert judge.flip_rate == pytest.approx(0.0)
    assert judge.attenuation == pytest.approx(1.0)


def test_accuracy_for_flip_rate_inverts_the_flip_rate() -> None:
    accuracy = sim.accuracy_for_flip_rate(0.14, position_bias=0.5, tie_rate=0.1)
    assert 0.8 < accuracy < 0.9
    assert sim.JudgeModel(accuracy, 0.5, 0.1).flip_rate == pytest.approx(0.14, abs=1e-9)


def test_unreachable_flip_rate_is_refused_with_the_reachable_range() -> None:
    with pytest.raises(KonkordError, match=r"out of reach .* \(from 0% to 50%\)"):
        sim.accuracy_for_flip_rate(0.9, position_bias=0.5, tie_rate=0.0)


def test_drawn_flips_match_the_closed_form() -> None:
    judge = sim.JudgeModel(accuracy=0.7, position_bias=0.8, tie_rate=0.2)
    plan = sim.Plan(sim.strengths_from_spread(4, 2.0), n_tasks=400, judge=judge)
    comp, flips, _, _ = sim.draw_run(plan, 400, np.random.default_rng(1))
    assert flips / len(comp) == pytest.approx(judge.flip_rate, abs=0.03)


def test_win_rates_are_round_robin_shares_with_ties_left_out() -> None:
    # Two models: 80% against the field means beta difference logit(0.8), exactly.
    strength = sim.strengths_from_win_rates([0.8, 0.2])
    assert strength[0] - strength[1] == pytest.approx(np.log(4.0))
    # Rates averaging below 50% leave ties out; each model gets half the missing share back.
    rates = [0.80, 0.70, 0.61, 0.51, 0.42, 0.32, 0.22, 0.13, 0.03]
    beta = sim.strengths_from_win_rates(rates)
    prob = 1.0 / (1.0 + np.exp(-(beta[:, None] - beta[None, :])))
    field = (prob.sum(axis=1) - 0.5) / 8
    assert field == pytest.approx(np.array(rates) + 0.5 - np.mean(rates), abs=1e-9)
    with pytest.raises(KonkordError, match="strictly between 0 and 1"):
        sim.strengths_from_win_rates([1.2, 0.5])


def test_wilson_interval_matches_the_design_example() -> None:
    low, high = sim.wilson(46, 75)
    assert (round(low, 3), round(high, 3)) == (0.500, 0.715)


def test_tasks_needed_interpolates_on_log_tasks() -> None:
    grid = (10, 40)
    assert simulate_sweep.tasks_needed(grid, np.array([0.6, 1.0])) == 20
    assert simulate_sweep.tasks_needed(grid, np.array([0.9, 1.0])) == 10
    assert simulate_sweep.tasks_needed(grid, np.array([0.1, 0.5])) is None


def test_published_like_field_separates_only_at_the_extremes() -> None:
    """Nine models from 80% down to 3%, fourteen prompts, a judge flipping 14% of pairs."""
    accuracy = sim.accuracy_for_flip_rate(0.14, 0.5, 0.1)
    plan = sim.Plan(
        strength=sim.strengths_from_win_rates(PUBLISHED_WIN_RATES),
        n_tasks=14,
        judge=sim.JudgeModel(accuracy, 0.5, 0.1),
        runs=100,
        resamples=200,
        seed=3,
    )
    outlook = sim.run_plan(plan)
    assert outlook.truth.order == list(range(9))
    assert outlook.flip_rate == pytest.approx(0.14, abs=0.02)
    # As in the study, only the top or the bottom model ever stands apart from the rest (less
    # often than interval alone would say: a claim also needs the sign test over 14 tasks, and
    # all of a ranking's claims are held to 95% together: the bottom model stood alone in 11%
    # of runs when each pair was held to 95% on its own, 2% now; the top in 6%, now none) ...
    ends = max(outlook.alone[0], outlook.alone[8])
    middle = outlook.alone[1:8].max()
    assert ends >= 0.02
    assert middle <= 0.01
    assert ends > 2 * middle
    # ... and no adjacent pair is separated in even half of the runs: 14 prompts are few.
    assert np.all(outlook.separated < 0.5)
    # the top and bottom models are told apart; wrong claims stay rare
    assert outlook.claimed[0, 8] > 0.95
    assert outlook.wrong_claims <= 0.1
    assert 0.8 <= outlook.coverage <= 1.0


def test_labelling_outlook_centres_on_the_expected_agreement() -> None:
    judge = sim.JudgeModel(0.9, 0.5, 0.1)
    plan = sim.Plan(
        sim.strengths_from_spread(4, 2.0),
        n_tasks=20,
        judge=judge,
        runs=30,
        resamples=50,
        label_budget=80,
        labeller_accuracy=0.8,
    )
    labels = sim.run_plan(plan).labels
    assert labels is not None
    assert labels.expected_agreement == pytest.approx(sim.expected_agreement(judge, 0.8))
    assert labels.mean_measured == pytest.approx(labels.expected_agreement, abs=0.04)
    assert labels.typical_low < labels.expected_agreement < labels.typical_high
    assert labels.coverage >= 0.8


def test_command_prints_the_table_and_writes_a_plot(project: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "simulate",
            "--win-rates",
            "80,50,20",
            "--tasks",
            "10",
            "--runs",
            "8",
            "--resamples",
            "40",
            "--sweep-runs",
            "4",
            "--label-budget",
            "30",
            "--plot",
            "out/plan.svg",
        ],
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "coverage of the 95% intervals" in out
    assert "m1 > m2" in out and "m2 > m3" in out
    assert "judge-human agreement" in out
    svg = ET.parse(project / "out" / "plan.svg").getroot()
    assert svg.tag.endswith("svg")
    lines = [e for e in svg.iter() if e.tag.endswith("polyline")]
    assert len(lines) == 2  # one curve per adjacent pair


def test_command_refuses_accuracy_and_flip_rate_together(project: Path) -> None:
    result = CliRunner().invoke(
        cli, ["simulate", "--judge-accuracy", "0.9", "--flip-rate", "0.1", "--runs", "1"]
    )
    assert result.exit_code == 2
    assert "give --judge-accuracy or --flip-rate, not both" in result.output


def test_simulate_with_a_biased_judge_prints_coverage_of_three_intervals() -> None:
    """`--judge-bias`: the judge-only interval misses people's ranking; anchored holds it."""
    from click.testing import CliRunner

    from konkord.cli import cli

    result = CliRunner().invoke(
        cli,
        ["simulate", "--tasks", "60", "--label-budget", "150", "--judge-bias", "1.5",
         "--favour", "5", "--runs", "25", "--resamples", "150"],
    )
    assert result.exit_code == 0, result.output
    rows = {
        line.split("  ")[0].strip(): float(line.split("%")[0].split()[-1])
        for line in result.output.splitlines()
        if line.startswith(("judge only", "labels only", "anchored"))
    }
    assert set(rows) == {"judge only", "labels only", "anchored"}
    assert rows["judge only"] < 60.0
    assert rows["anchored"] > 85.0
    assert "favours m5 by 1.5 logits" in result.output


def test_simulate_judge_bias_needs_a_label_budget() -> None:
    from click.testing import CliRunner

    from konkord.cli import cli

    result = CliRunner().invoke(cli, ["simulate", "--judge-bias", "1"])
    assert result.exit_code != 0
    assert "--judge-bias needs --label-budget" in result.output


def test_the_true_win_rate_is_the_given_rate_with_ties_shared_then_pulled_to_half() -> None:
    """What the printed "true win rate" says it is: with a perfect judge and no task effects,
    the rates given (80..3, averaging 41.6%) plus the 8.4 points of ties they leave out, shared
    evenly; a judge that errs, and tasks that vary, pull every one toward 50%."""
    given = np.array([80, 70, 61, 51, 42, 32, 22, 13, 3]) / 100
    strength = sim.strengths_from_win_rates(list(given))
    judge = sim.JudgeModel(accuracy=1.0, tie_rate=0.0)
    perfect = sim.truth_of(sim.Plan(strength, 14, judge, task_effect=0.0))
    np.testing.assert_allclose(
        np.sort(perfect.expected_win_rate)[::-1], given + (0.5 - given.mean()), atol=1e-6
    )
    pulled = sim.truth_of(sim.Plan(strength, 14)).expected_win_rate
    shared = given + (0.5 - given.mean())
    assert np.all(np.abs(np.sort(pulled)[::-1] - 0.5) < np.abs(shared - 0.5))
