"""The short table `konkord simulate` prints: coverage, separation, rank groups, labels."""

from __future__ import annotations

import itertools
import math

from konkord.stages.simulate.simulate import Outlook, Plan
from konkord.stages.simulate.simulate_sweep import Sweep
from konkord.stats.anchored_sim import CoverageStudy
from konkord.stats.style_sim import StyleCoverage


def describe_groups(groups: tuple[tuple[int, ...], ...], names: list[str]) -> str:
    """Rank groups as text, best first: `[m1] [m2 m3 m4] [m5]`."""
    return " ".join("[" + " ".join(names[k] for k in group) + "]" for group in groups)


def summary_lines(
    outlook: Outlook, names: list[str], result: Sweep | None, gap: tuple[float, int | None] | None
) -> list[str]:
    """The short table `konkord simulate` prints."""
    plan, truth, judge = outlook.plan, outlook.truth, outlook.plan.judge
    lines = [
        f"{plan.runs} simulated runs: {plan.n_models} models x {plan.n_tasks} tasks, task "
        f"effects sd {plan.task_effect:g}, {plan.resamples} task-bootstrap resamples each",
        f"judge: accuracy {judge.accuracy:.0%}, position bias {judge.position_bias:g}, tie rate "
        f"{judge.tie_rate:g}; flip rate {judge.flip_rate:.1%} expected, "
        f"{outlook.flip_rate:.1%} measured",
        "",
        f"coverage of the 95% intervals of win rate vs field: {outlook.coverage:.1%} "
        "(should be near 95%)",
        f"runs claiming an ordering the truth contradicts: {outlook.wrong_claims:.1%}",
        "",
        f"{'model':<8} {'true win rate':>14} {'interval covers':>16} {'stands apart':>15}",
    ]
    for k in truth.order:
        lines.append(
            f"{names[k]:<8} {truth.expected_win_rate[k]:>14.1%} "
            f"{outlook.coverage_by_model[k]:>16.0%} {outlook.alone[k]:>15.0%}"
        )
    lines += [
        "(true win rate: what endless tasks would show through this judge, the target of the",
        " intervals: the field's strengths pulled toward 50% by the judge's mistakes and ties and",
        " by task-to-task variation; rates given with --win-rates first gain the ties they leave",
        " out, shared evenly)",
    ]
    lines += [
        "",
        f"{'adjacent pair':<18} {'head-to-head':>12} {'separated':>10} {'tasks for 80%':>14}",
    ]
    for k, (upper, lower) in enumerate(itertools.pairwise(truth.order)):
        beats = 1.0 / (1.0 + math.exp(-(truth.log_strength[upper] - truth.log_strength[lower])))
        needed = "-"
        if result is not None:
            found = result.needed[k]
            needed = str(found) if found is not None else f"> {max(result.tasks)}"
        lines.append(
            f"{names[upper] + ' > ' + names[lower]:<18} {beats:>12.0%} "
            f"{outlook.separated[k]:>10.0%} {needed:>14}"
        )
    lines.append(
        "(head-to-head: as the judge sees it; separated: runs whose 95% interval of the "
        "difference orders the pair rightly)"
    )
    lines += [
        "",
        f"distinct rank ranges: {outlook.groups_mean:.1f} on average (neighbours with the same "
        "range taken together); most often:",
    ]
    for groups, share in outlook.common_patterns(1):
        lines.append(f"  {describe_groups(groups, names)} ({share:.0%} of runs)")
    if gap is not None:
        points, needed_gap = gap
        told = f"{needed_gap} tasks" if needed_gap is not None else "more than the largest grid"
        lines.append(
            f"a gap of {100 * points:g} points of win rate (in an evenly spaced field) "
            f"separates 80% of the time at about {told}"
        )
    if outlook.labels is not None:
        lab = outlook.labels
        lines += [
            "",
            f"labelling {lab.budget} comparisons (labeller accuracy {lab.labeller_accuracy:.0%}): "
            f"judge-human agreement {lab.expected_agreement:.1%} expected, {lab.mean_measured:.1%} "
            f"measured on average; typical 95% interval {lab.typical_low:.1%} to "
            f"{lab.typical_high:.1%} (holds the expected value in {lab.coverage:.0%} of runs)",
        ]
    return lines


def anchored_lines(plan: Plan, study: CoverageStudy, bias: float, favoured: str) -> list[str]:
    """The table `konkord simulate --judge-bias` prints."""
    lines = [
        f"{study.n_fields} simulated runs: {plan.n_models} models x {plan.n_tasks} tasks, "
        f"{plan.label_budget} comparisons labelled by people, {plan.resamples} resamples each",
        f"judge: reads a pair right {plan.judge.accuracy:.0%} of the time and favours "
        f"{favoured} by {bias:g} logits; people label right {plan.labeller_accuracy:.0%}",
        "",
        f"{'interval':<13} {'covers people':>14} {'every model':>12} {'mean width':>11}",
    ]
    for row in study.rows:
        lines.append(
            f"{row.name:<13} {row.coverage:>8.1%} ±{100 * row.coverage_se:>4.1f} "
            f"{row.all_covered:>12.0%} {100 * row.mean_width:>7.1f} pts"
        )
    lines += [
        "(covers people: share of models whose 95% interval of win rate vs field holds the",
        " win rate people's labels converge to; every model: runs where all intervals hold it)",
        f"power tuning lambda {study.mean_lambda:.2f} on average: the {plan.label_budget} labels "
        f"with the judge are worth about {study.mean_effective_labels:.0f} labels alone",
    ]
    return lines


def style_lines(plan: Plan, study: StyleCoverage, coefficient: float) -> list[str]:
    """The table `konkord simulate --length-bias` prints."""
    return [
        f"{study.n_fields} simulated runs: {plan.n_models} models x {plan.n_tasks} tasks, "
        f"{plan.resamples} resamples each",
        f"judge: prefers the longer answer by {coefficient:g} log-odds per unit of normalised "
        "length difference; weaker models write longer; people ignore length",
        "",
        f"{'ranking':<17} {'covers people':>14} {'every model':>12} {'claims (false)':>15}",
        f"{'plain':<17} {study.plain_coverage:>14.1%} {study.plain_all_covered:>12.0%} "
        f"{study.plain_claims:>9} ({study.plain_false_claims})",
        f"{'style-controlled':<17} {study.controlled_coverage:>14.1%} "
        f"{study.controlled_all_covered:>12.0%} "
        f"{study.controlled_claims:>9} ({study.controlled_false_claims})",
        "(covers people: share of models whose 95% interval of win rate vs field holds the",
        " win rate people's preferences give; every model: runs where all intervals hold it)",
        f"length coefficient: {study.mean_coefficient:+.2f} on average against the true "
        f"{coefficient:+g}; its 95% interval holds the truth in {study.coefficient_coverage:.0%}"
        " of runs",
        f"style control changed the supported claims in {study.claims_changed:.0%} of runs "
        f"(the plain ranking's own claims change with the bootstrap seed alone in "
        f"{study.claims_reseeded:.0%})",
    ]
