"""`konkord judge --first-pass`: the cascade's part of the judge command."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import click

from konkord.configuration.runspec import RunSpec
from konkord.errors import KonkordError
from konkord.stages.judge.cascade_view import CascadePlan, plan_of


def cascade_plan(
    spec: RunSpec,
    judges: tuple[str, ...],
    first_pass: str | None,
    accept_at: float | None,
    confidence: str | None,
    audit: int | None = None,
) -> CascadePlan | None:
    """The cascade to run: from the options, else the run's own when no --judge was given."""
    from konkord.configuration.runs_config import Cascade, parse_confidence

    try:
        parse_confidence(confidence or "logprobs")
    except ValueError as exc:
        raise KonkordError(f"--confidence {exc}") from None
    if first_pass is None:
        if judges or spec.cascade is None:
            if accept_at is not None or confidence is not None or audit is not None:
                raise KonkordError(
                    "--accept-at, --confidence and --audit need --first-pass CHEAP_JUDGE"
                )
            return None
        plan = plan_of(spec, accept_at)
        if plan is None:
            return None
        return replace(
            plan,
            confidence=confidence or plan.confidence,
            audit=plan.audit if audit is None else audit,
        )
    strong = judges or spec.judges[:1]
    if len(strong) != 1:
        raise KonkordError("--first-pass needs exactly one strong judge: give --judge STRONG")
    if first_pass in spec.judges or first_pass in spec.models:
        role = "judges" if first_pass in spec.judges else "models"
        raise KonkordError(
            f'--first-pass "{first_pass}" is one of the run\'s {role}; a first pass must be '
            "another model, judging for the cascade only"
        )
    default = spec.cascade.accept_at if spec.cascade else 0.8
    plan = CascadePlan(
        first_pass, strong[0], accept_at or default, confidence or "logprobs", audit
    )
    if not spec.in_runs_file:
        from konkord.configuration.runspec import write_manifest

        cascade = Cascade(
            first_pass=plan.first_pass,
            strong=plan.strong,
            accept_at=plan.accept_at,
            confidence=plan.confidence,
            audit=plan.audit,
        )
        judges_now = tuple(dict.fromkeys([*spec.judges, plan.strong]))
        write_manifest(replace(spec, judges=judges_now, cascade=cascade))
    elif spec.cascade is None or spec.cascade.first_pass != plan.first_pass:
        # report and build read the cascade from runs.json; one they do not know would leave
        # the strong judge's partial verdicts to be ranked as if they were a whole judging
        raise KonkordError(
            f'run "{spec.name}" is listed in runs.json without this cascade: add "cascade": '
            f'{{"first_pass": "{plan.first_pass}", "accept_at": {plan.accept_at:g}}} to its entry '
            f"(its strong judge is the first of \"judges\"), then run `konkord judge --run "
            f"{spec.name}`"
        )
    return plan


def run_cascade(
    spec: RunSpec, plan: CascadePlan, concurrency: int, max_tokens: int, api_base: str | None
) -> None:
    """Run the cascade with a progress bar and print what it decided."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

    from konkord.configuration.display_names import rename_text
    from konkord.providers.failures import failure_lines
    from konkord.stages.judge.cascade import cascade_lines, cascade_run
    from konkord.stages.judge.judge import summary_lines

    click.echo(
        f"judge {spec.name}: first pass {plan.first_pass} on every pair, both orders; "
        f"{plan.strong} on pairs it is unsure of (accept at {plan.accept_at:g}, "
        f"confidence from {plan.confidence})",
        err=True,
    )
    from konkord.commands.large_run_options import batch_status
    from konkord.providers.door import settle_open_batches
    from konkord.providers.llm import ModelClient

    client = ModelClient(concurrency=concurrency, prices=spec.prices)
    # a batch an earlier `judge --batch` left open is collected, never paid for again
    settle_open_batches(client, spec, (plan.first_pass, plan.strong), batch_status)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=Console(stderr=True)) as progress:
        phases: list[TaskID] = []

        def on_phase(judge: str) -> None:
            role = "first pass" if judge == plan.first_pass else "strong"
            phases.append(progress.add_task(f"{role} {judge}", total=None))

        def on_progress(done: int, total: int) -> None:
            progress.update(phases[-1], completed=done, total=total)

        summary = asyncio.run(
            cascade_run(
                spec,
                plan,
                client,
                concurrency=concurrency,
                max_tokens=max_tokens,
                on_progress=on_progress,
                api_base=api_base,
                on_phase=on_phase,
            )
        )
    for note in summary.notes:
        click.echo(f"note: {note}", err=True)
    for line in summary_lines(summary) + cascade_lines(spec, plan):
        click.echo(rename_text(line, spec.names))
    for tally in summary.tallies.values():
        for line in failure_lines(tally.failures, spec.settings.api_base):
            click.secho(f"  failed: {line}", fg="red", err=True)
    if summary.failed:
        click.echo("rerun the same command to retry the failures", err=True)
        raise SystemExit(1)
