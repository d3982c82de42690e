"""`konkord judge`: compare every pair of answers blind, in both orders, with one or more judges."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import click

from konkord.commands.inputs import COUNT, MAX_TOKENS, RUN_NAME, finite
from konkord.commands.large_run_options import (
    POOL_FROM_CALLS,
    batch_status,
    default_processes,
    large_run_options,
    print_estimates,
    report_budget,
)

if TYPE_CHECKING:
    from konkord.configuration.runspec import RunSpec


@click.command()
@click.option(
    "--run", "run_name", type=RUN_NAME, required=True, help="Run name (in runs.json, or started by `konkord run`)."
)
@click.option(
    "--judge",
    "judges",
    multiple=True,
    help="Judge model (litellm name); repeat for a panel. Default: the run's judges in runs.json.",
)
@click.option("--concurrency", type=COUNT, default=8, show_default=True, help="Parallel judge calls.")
@click.option(
    "--max-tokens",
    type=MAX_TOKENS,
    default=8192,
    show_default=True,
    help="Output token cap per judge call (a reasoning judge on a tight cap spends it thinking).",
)
@click.option(
    "--api-base", help="Base URL of an OpenAI-compatible server for the judge [default: the run's]."
)
@click.option(
    "--first-pass",
    help="Cheap judge in front of --judge: it judges every pair, the strong judge only the "
    "pairs where its two orders disagree or its confidence is under --accept-at.",
)
@click.option(
    "--accept-at",
    type=finite(0.5, 1.0),
    help="Averaged confidence at which the first pass decides a pair [default: 0.8].",
)
@click.option(
    "--confidence",
    help="Where the first pass's confidence comes from: logprobs (of the verdict token) or "
    "samples:N (vote share of N calls per order at temperature 1) [default: logprobs].",
)
@click.option(
    "--audit",
    type=click.IntRange(min=0),
    help="Pairs the first pass decided that the strong judge judges too, so labels can compare "
    "the cascade with the strong judge alone [default: the run's, else the label plan's n].",
)
@click.option(
    "--design",
    help="Which comparisons to pay for: all (every pair on every task), random:K (K balanced "
    "pairs per task) or adaptive:CALLS (rounds that spend CALLS judge calls on unseparated "
    "neighbours) [default: the run's \"design\" in runs.json, else all].",
)
@click.option(
    "--processes",
    type=COUNT,
    help="Processes making the judge's litellm calls; 1: this process alone (litellm's own "
    "work is about 2 ms of CPU a call, one core's worth at 500 calls a second). Default: 1 "
    f"for a judging of fewer than {POOL_FROM_CALLS:,} calls (recorded ones included), else "
    "one worker per core, started at the first call not served from the cache. --batch, a "
    "first-pass cascade and judges served by deployments (litellm's Router keeps its rate "
    "limits per process) always use this process. Evidence is written by this process alone.",
)
@large_run_options
def judge(
    run_name: str,
    judges: tuple[str, ...],
    concurrency: int,
    max_tokens: int,
    api_base: str | None,
    first_pass: str | None,
    accept_at: float | None,
    confidence: str | None,
    audit: int | None,
    design: str | None,
    processes: int | None,
    batch: bool,
    dry_run: bool,
    max_cost: float | None,
) -> None:
    """Judge every pair of answers of a run, blind and in both orders.

    The judge sees the rubric, the task and "Answer 1" / "Answer 2", never a
    model name. Each pair is asked twice, once per order; orders that disagree
    count as a tie marked flipped. A judge from the same provider family as any
    ranked model is refused. Resumable: a rerun judges only what is missing,
    failed or stale. Credentials come from the environment or a .env file.
    """
    from konkord.commands.progress import progress_bar
    from konkord.configuration.credentials import url_credentials_problem
    from konkord.configuration.runspec import resolve_run
    from konkord.errors import KonkordError
    from konkord.providers.model_names import check_model_names
    from konkord.stages.judge.judge import judge_run, planned_calls, preflight, summary_lines

    if url_credentials_problem(api_base):
        raise KonkordError(f"--api-base {url_credentials_problem(api_base)}")
    spec = resolve_run(run_name)
    chosen = judges or spec.judges
    if design is not None:
        from dataclasses import replace as replaced

        from konkord.configuration.pair_design import parse_design

        try:
            wanted = parse_design(design)
        except ValueError as exc:
            raise KonkordError(f"--design {exc}") from None
        if spec.in_runs_file and wanted != spec.design:
            raise KonkordError(
                f'--design {design}: run "{spec.name}" is in runs.json with design '
                f'{spec.design.label}; set "design" there instead, so the report states it'
            )
        if wanted != spec.design and not dry_run:
            from konkord.configuration.runspec import write_manifest

            spec = replaced(spec, design=wanted)
            write_manifest(spec)  # the report and later reruns read the design from it
        spec = replaced(spec, design=wanted, judges=tuple(chosen))
    named = (*chosen, *([first_pass] if first_pass else []))
    check_model_names(
        [j for j in named if j not in spec.deployments],
        "--judge",
        api_base or spec.settings.api_base,
    )
    _require_usable_answers(spec)
    from konkord.commands.judge_cascade import cascade_plan, run_cascade
    from konkord.evidence.stopping import run_lock

    if not dry_run:  # one writer for the whole command: the cascade's run.json and every call
        click.get_current_context().with_resource(run_lock(spec.run_dir, "judge"))
    plan = cascade_plan(spec, judges, first_pass, accept_at, confidence, audit)
    if plan is not None:
        if dry_run and not batch and max_cost is None:
            from konkord.stages.dry_run import cascade_estimates

            estimates, strong_line = cascade_estimates(spec, plan, max_tokens)
            print_estimates(estimates, False)
            click.echo(strong_line)
            return
        if batch or dry_run or max_cost is not None:
            raise KonkordError(
                "--batch and --max-cost do not drive a first-pass cascade yet: "
                "judge without them, or without the cascade"
            )
        run_cascade(spec, plan, concurrency, max_tokens, api_base)
        _keep_columns(spec)
        # the run's other judges, if any, judge every pair as usual
        chosen = () if first_pass else tuple(j for j in chosen if j != plan.strong)
        if not chosen:
            return
    for note in preflight(spec, chosen):
        click.echo(f"note: {note}", err=True)
    click.echo(
        f"judge {spec.name}: {len(spec.suite.tasks)} tasks x {len(spec.models)} models, "
        f"both orders, judges: {', '.join(chosen)}; design {spec.design.label}",
        err=True,
    )
    if dry_run:
        from konkord.stages.dry_run import judge_estimates
        from konkord.stages.judge.design import planned_rounds_line

        print_estimates(judge_estimates(spec, tuple(chosen), max_tokens, batch), batch)
        line = planned_rounds_line(spec, tuple(chosen))
        if line:
            click.echo(line)
        return
    from dataclasses import replace

    from konkord.configuration.display_names import rename_text
    from konkord.providers.door import check_options, check_prices, make_client
    from konkord.providers.failures import failure_lines

    if api_base:
        spec = replace(spec, settings=replace(spec.settings, api_base=api_base))
    check_options(spec, tuple(chosen), batch)
    client = make_client(
        spec, batch=batch, max_cost=max_cost, concurrency=concurrency, on_status=batch_status,
        models=tuple(chosen),
    )
    check_prices(client, tuple(chosen))
    total = planned_calls(spec, chosen)
    if not batch:
        client.processes = processes or default_processes(total)
    with progress_bar("verdicts", total) as advance:
        moved = [0]

        def on_progress(done: int, _total: int) -> None:
            advance(done - moved[0])
            moved[0] = done

        summary = asyncio.run(
            judge_run(
                spec,
                chosen,
                client,
                # in batch mode every call joins a batch at once; the batch client splits them
                concurrency=10**9 if batch else concurrency,
                max_tokens=max_tokens,
                on_progress=on_progress,
                api_base=api_base,
            )
        )
    _keep_columns(spec)
    if summary.skipped_pairs:
        click.echo(
            f"{summary.skipped_pairs} task pairs not judged: an answer is missing or failed "
            f"(run `konkord run --run {spec.name}` first)",
            err=True,
        )
    for line in summary_lines(summary):
        click.echo(rename_text(line, spec.names))
    for tally in summary.tallies.values():
        for line in failure_lines(tally.failures, spec.settings.api_base):
            click.secho(f"  failed: {line}", fg="red", err=True)
    stopped = report_budget(client)
    if summary.failed:
        click.echo("rerun the same command to retry the failures", err=True)
    if summary.failed or stopped:
        raise SystemExit(1)
    if not summary.skipped_pairs:
        _stamp_complete(spec)


def _stamp_complete(spec: RunSpec) -> None:
    """Where the run now owes nothing, say so for the commands after (`owed_stamp`): the build
    then does not compose and hash every call again. A check that cannot finish leaves no
    stamp and the judging as it was."""
    import contextlib

    from konkord.errors import KonkordError
    from konkord.stages.pipeline import stamp_if_owing_nothing

    with contextlib.suppress(KonkordError, OSError):
        stamp_if_owing_nothing(spec)


def _keep_columns(spec: RunSpec) -> None:
    """The verdict log's columns saved for the commands after the judge (`verdict_saved`),
    where the log is large. A log that cannot be read now is left for the next command to
    report."""
    import contextlib
    import warnings

    from konkord.errors import KonkordError
    from konkord.evidence.log import EvidenceLog
    from konkord.evidence.verdict_table import save_columns

    with warnings.catch_warnings(), contextlib.suppress(KonkordError):
        warnings.simplefilter("ignore")  # a torn last line is the next reader's to report
        save_columns(EvidenceLog(spec.run_dir))


def _require_usable_answers(spec: RunSpec) -> None:
    """Refuse a run where no task has two good answers: there is nothing to compare, and a
    judge stage that "succeeds" with zero verdicts would hide it."""
    from konkord.errors import KonkordError
    from konkord.evidence.log import EvidenceLog
    from konkord.evidence.verdicts import answer_shas
    from konkord.stages.current import good_answers

    answers = good_answers(spec, EvidenceLog(spec.run_dir))
    usable = answer_shas(answers)
    per_task: dict[str, int] = {}
    for task_id, _model in usable:
        per_task[task_id] = per_task.get(task_id, 0) + 1
    if any(count >= 2 for count in per_task.values()):
        return
    failed = len(answers) - len(usable)
    found = (
        f"{len(answers)} answers recorded, {failed} of them failed"
        if answers
        else "no answers are recorded"
    )
    raise KonkordError(
        f"run {spec.name}: nothing to judge: no task has two usable answers ({found}); "
        f"run `konkord run --run {spec.name}` first"
    )
