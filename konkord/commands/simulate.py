"""`konkord simulate`: before paying for an eval, see what an eval of that size can claim."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import click

from konkord.commands.inputs import PROBABILITY, SEED_LIMIT, finite, whole

if TYPE_CHECKING:
    from konkord.stages.simulate.simulate import Plan


def _rates(value: str | None) -> list[float] | None:
    from konkord.errors import KonkordError

    if not value:
        return None
    try:
        rates = [float(part.rstrip("%")) for part in value.split(",") if part.strip()]
    except ValueError:
        raise KonkordError(f"--win-rates {value}: expected win rates, e.g. 80,70,55") from None
    if not rates or not all(math.isfinite(r) and 0 <= r <= 100 for r in rates):
        raise KonkordError(f"--win-rates {value}: expected win rates from 0 to 100, e.g. 80,70,55")
    return [r / 100 if r > 1 else r for r in rates]


@click.command()
@click.option("--models", "n_models", type=whole(2, 1000), default=5, show_default=True, help="Number of models.")
@click.option(
    "--spread",
    type=finite(0, 50),
    default=2.0,
    show_default=True,
    help="Logits between the strongest and weakest model (evenly spaced).",
)
@click.option(
    "--win-rates",
    help="The field as a leaderboard's win rates against the rest of the field, e.g. "
    "80,70,55,30; rates averaging below 50% are read as leaving ties out "
    "(overrides --models and --spread).",
)
@click.option("--tasks", "n_tasks", type=whole(2, 1_000_000), default=25, show_default=True, help="Tasks in the study.")
@click.option(
    "--task-effect",
    type=finite(0, 20),
    default=0.5,
    show_default=True,
    help="SD (logits) of how much a model's strength varies from task to task.",
)
@click.option("--judge-accuracy", type=PROBABILITY, help="P(the judge reads a pair right) [0.85].")
@click.option(
    "--flip-rate", type=PROBABILITY, help="Instead of --judge-accuracy: the judge's order-flip rate."
)
@click.option(
    "--position-bias",
    type=PROBABILITY,
    default=0.5,
    show_default=True,
    help="When unsure, how often the judge takes the answer shown first (0.5 = none).",
)
@click.option(
    "--tie-rate", type=PROBABILITY, default=0.1, show_default=True, help="When unsure, how often it says TIE."
)
@click.option("--label-budget", type=whole(0, 10_000_000), default=0, show_default=True, help="Comparisons people label.")
@click.option(
    "--labeller-accuracy", type=PROBABILITY, default=0.8, show_default=True, help="P(a person labels right)."
)
@click.option(
    "--judge-bias",
    type=finite(-20, 20),
    help="A judge that favours one model by this many logits (with --label-budget): prints "
    "how often judge-only, labels-only and human-anchored intervals cover people's ranking.",
)
@click.option(
    "--favour",
    type=whole(1, 1000),
    help="Which model the biased judge favours, 1 = strongest [middle of the field].",
)
@click.option(
    "--length-bias",
    type=finite(-50, 50),
    help="A judge that prefers longer answers by this many log-odds per unit of normalised "
    "length difference (weaker models writing longer): prints how often the plain and the "
    "style-controlled intervals cover people's ranking, and the coefficient's coverage.",
)
@click.option("--gap", type=finite(0, 1, low_open=True), help="Also price this gap (0.10 = ten points of win rate).")
@click.option("--runs", type=whole(1, 1_000_000), default=200, show_default=True, help="Simulated runs.")
@click.option("--resamples", type=whole(10, 1_000_000), default=500, show_default=True, help="Bootstrap resamples per run.")
@click.option(
    "--sweep-runs",
    type=whole(0, 1_000_000),
    default=80,
    show_default=True,
    help="Runs per point of the tasks sweep (0 skips the sweep and the plot).",
)
@click.option(
    "--plot",
    type=click.Path(path_type=Path),
    default=Path("simulate.svg"),
    show_default=True,
    help="Where to write the SVG of separation against tasks.",
)
@click.option("--seed", type=whole(0, SEED_LIMIT, "a whole number from 0 that fits in 64 bits"), default=0, show_default=True, help="Seed of the simulation.")
def simulate(
    n_models: int,
    spread: float,
    win_rates: str | None,
    n_tasks: int,
    task_effect: float,
    judge_accuracy: float | None,
    flip_rate: float | None,
    position_bias: float,
    tie_rate: float,
    label_budget: int,
    labeller_accuracy: float,
    judge_bias: float | None,
    favour: int | None,
    length_bias: float | None,
    gap: float | None,
    runs: int,
    resamples: int,
    sweep_runs: int,
    plot: Path,
    seed: int,
) -> None:
    """Simulate many whole runs with known truth and report what such an eval can claim.

    \b
    Prints the coverage of the 95% intervals, how often each adjacent pair
    of models comes out separated, the flip rate to expect, the tasks needed
    to separate each gap, and (with --label-budget) the judge-human agreement
    a labeller will measure with its interval. Writes an SVG plot of
    separation probability against number of tasks. Reads no files.

    \b
    Example (nine models from 80% down to 3%, fourteen prompts, a judge
    that flips 14% of pairs):
      konkord simulate --win-rates 80,70,61,51,42,32,22,13,3 --tasks 14 --flip-rate 0.14
    """
    from konkord.errors import KonkordError
    from konkord.stages.simulate import simulate as sim
    from konkord.stages.simulate import simulate_summary, simulate_sweep

    if judge_accuracy is not None and flip_rate is not None:
        raise KonkordError("give --judge-accuracy or --flip-rate, not both")
    for name, value in (
        ("--position-bias", position_bias),
        ("--tie-rate", tie_rate),
        ("--labeller-accuracy", labeller_accuracy),
        ("--judge-accuracy", judge_accuracy),
    ):
        if value is not None and not 0.0 <= value <= 1.0:
            raise KonkordError(f"{name} {value:g} must be between 0 and 1")
    if n_tasks < 2 or runs < 1 or resamples < 10:
        raise KonkordError("--tasks must be at least 2, --runs at least 1, --resamples 10")
    if sweep_runs > 0:
        from konkord.evidence.paths import require_inside

        require_inside(plot, "--plot")
    rates = _rates(win_rates)
    if rates is not None:
        strength = sim.strengths_from_win_rates(sorted(rates, reverse=True))
    else:
        strength = sim.strengths_from_spread(n_models, spread)
    if flip_rate is not None:
        judge_accuracy = sim.accuracy_for_flip_rate(flip_rate, position_bias, tie_rate)
    judge = sim.JudgeModel(
        0.85 if judge_accuracy is None else judge_accuracy, position_bias, tie_rate
    )
    plan = sim.Plan(
        strength=strength,
        n_tasks=n_tasks,
        judge=judge,
        task_effect=task_effect,
        runs=runs,
        resamples=resamples,
        label_budget=label_budget,
        labeller_accuracy=labeller_accuracy,
        seed=seed,
    )
    names = [f"m{k + 1}" for k in range(plan.n_models)]
    if judge_bias is not None:
        _biased_judge(plan, judge_bias, favour, names)
        return
    if length_bias is not None:
        _length_biased_judge(plan, length_bias)
        return
    click.echo(f"simulating {runs} runs ...", err=True)
    outlook = sim.run_plan(plan)
    sweep = None
    grid = tuple(sorted({*sim.DEFAULT_GRID, n_tasks}))
    if sweep_runs > 0:
        click.echo(f"sweeping {len(grid)} study sizes ({sweep_runs} runs each) ...", err=True)
        sweep = simulate_sweep.sweep(plan, grid, names, sweep_runs)
    priced = None
    if gap is not None:
        needed = simulate_sweep.tasks_for_gap(plan, sim.gap_to_logits(gap), grid, max(sweep_runs, 20))
        priced = (gap, needed)
    click.echo("\n".join(simulate_summary.summary_lines(outlook, names, sweep, priced)))
    if sweep is not None:
        title = f"{plan.n_models} models, judge flip rate {judge.flip_rate:.0%}"
        plot.parent.mkdir(parents=True, exist_ok=True)
        from konkord.evidence.atomic import write_atomic

        write_atomic(plot, simulate_sweep.sweep_svg(sweep, title))
        click.echo(f"\nplot: {plot}")


def _biased_judge(plan: Plan, bias: float, favour: int | None, names: list[str]) -> None:
    """The biased-judge study: coverage of people's ranking by three kinds of interval."""
    from konkord.errors import KonkordError
    from konkord.stages.simulate.simulate_summary import anchored_lines
    from konkord.stats.anchored_sim import coverage_study

    if plan.label_budget < 1:
        raise KonkordError("--judge-bias needs --label-budget N (the comparisons people label)")
    pairs = plan.n_tasks * plan.n_models * (plan.n_models - 1) // 2
    if plan.label_budget > pairs:
        raise KonkordError(f"--label-budget {plan.label_budget} exceeds the {pairs} comparisons")
    favoured = (plan.n_models + 1) // 2 if favour is None else favour
    if not 1 <= favoured <= plan.n_models:
        raise KonkordError(f"--favour {favoured} must be between 1 and {plan.n_models}")
    click.echo(f"simulating {plan.runs} runs with a biased judge ...", err=True)
    study = coverage_study(
        plan.runs, plan.n_models, plan.n_tasks, plan.label_budget, bias,
        judge_accuracy=plan.judge.accuracy, labeller_accuracy=plan.labeller_accuracy,
        task_effect_sd=plan.task_effect, resamples=plan.resamples, seed=plan.seed,
        strength=plan.strength, favoured=favoured - 1,
    )
    click.echo("\n".join(anchored_lines(plan, study, bias, names[favoured - 1])))


def _length_biased_judge(plan: Plan, coefficient: float) -> None:
    """The length-biased-judge study: plain and style-controlled intervals against people."""
    from konkord.stages.simulate.simulate_summary import style_lines
    from konkord.stats.style_sim import style_coverage_study

    click.echo(f"simulating {plan.runs} runs with a length-biased judge ...", err=True)
    study = style_coverage_study(
        plan.runs, plan.n_models, plan.n_tasks, coefficient, resamples=plan.resamples,
        seed=plan.seed, strength=plan.strength,
    )
    click.echo("\n".join(style_lines(plan, study, coefficient)))
