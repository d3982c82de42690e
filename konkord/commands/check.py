"""`konkord check`: run each task's declared checks on every answer, the tests in a sandbox."""

from __future__ import annotations

import click

from konkord.commands.inputs import COUNT, RUN_NAME

# Shown in --help; konkord.checks.sandbox.Limits' defaults (a test keeps the two equal).
LIMITS_HELP = (
    "wall time 10 s, CPU time 10 s, memory 512 MB, 32 processes,\n  "
    "1000000 bytes of output, 64 MB of disk"
)


@click.command(
    epilog=(
        "\b\nSandbox limits per answer (tests check), defaults:\n  "
        + LIMITS_HELP
        + ".\nThe bwrap sandbox: no network, read-only system, a fresh /tmp as working\n"
        "directory, no home directory, no repository, an empty environment, and no\n"
        "process outlives the run."
    )
)
@click.option(
    "--run", "run_name", type=RUN_NAME, required=True, help="Run name (in runs.json, or started by `konkord run`)."
)
@click.option(
    "--concurrency", type=COUNT, default=2, show_default=True, help="Answers checked in parallel."
)
@click.option(
    "--sandbox",
    type=click.Choice(["bwrap", "none"]),
    default="bwrap",
    show_default=True,
    help="Where `tests` run: bubblewrap, or `none` = no isolation (model-written code runs "
    "as you; only on a throwaway machine).",
)
def check(run_name: str, concurrency: int, sandbox: str) -> None:
    """Run every declared check on every answer of a run.

    compiles, ruff_clean and mypy_clean only read the code; tests runs the
    answer's code inside a bubblewrap sandbox, with the limits below, and the
    task's tests outside it: the tests call the answer's functions, values
    cross as plain data, and the verdict is never in the answer's reach. The code is the answer's fenced block in the suite's
    answer_language (or the whole answer when it has none). Each result is
    saved as it arrives (runs/<run>/checks.jsonl); a rerun checks only new or
    changed answers.
    """
    from konkord.commands.progress import progress_bar
    from konkord.configuration.runspec import resolve_run
    from konkord.errors import KonkordError
    from konkord.stages.check import check_run, missing_checks

    if concurrency < 1:
        raise KonkordError("--concurrency must be at least 1")
    spec = resolve_run(run_name)
    if sandbox == "none":
        click.secho(
            "warning: --sandbox none: the answers' code runs WITHOUT isolation, as your user, "
            "with your files and network; results are recorded with sandbox \"none\"",
            fg="yellow",
            err=True,
        )
    todo = missing_checks(spec, sandbox)
    click.echo(f"check {spec.name}: {todo} checks to run", err=True)
    with progress_bar("checks", todo) as advance:
        shown = [0]

        def on_progress(done: int, total: int) -> None:
            target = done - (total - todo)  # the bar counts only the checks run now
            advance(target - shown[0])
            shown[0] = target

        summary = check_run(spec, concurrency, sandbox, on_progress=on_progress)
    click.echo(
        f"checked {summary.checked} (passed {summary.passed}, failed {summary.failed}), "
        f"already recorded {summary.already_recorded}; sandbox {summary.sandbox}"
    )
    for name, (passed, total) in summary.totals.items():
        click.echo(f"  {name:<11} {passed}/{total} answers pass")
    if summary.no_answer:
        click.echo(
            f"{summary.no_answer} answers are missing or failed to generate and were not "
            "checked (run `konkord run` again)",
            err=True,
        )
    for line in summary.failures[:10]:
        click.echo(f"  failed: {line}", err=True)
    if len(summary.failures) > 10:
        click.echo(f"  ... and {len(summary.failures) - 10} more failures", err=True)
    for line in summary.errors:
        click.secho(f"  could not check: {line}", fg="red", err=True)
    if summary.errors:
        click.echo("run the same command again to retry the checks that could not run", err=True)
        raise SystemExit(1)
