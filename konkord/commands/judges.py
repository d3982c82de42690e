"""`konkord judges`: the run's judges compared with people, with tests and with each other."""

from __future__ import annotations

import click

from konkord.commands.inputs import RUN_NAME


@click.command()
@click.option("--run", "run_name", type=RUN_NAME, required=True, help="Run name (from runs.json or a manifest).")
def judges(run_name: str) -> None:
    """Compare the run's judges with people, with executed tests and with each other.

    One row per judge: agreement with people and Cohen's kappa (where labels
    exist), agreement with executed tests (where checks ran), consensus match
    with the other judges (three or more), per-task consistency, order-flip
    rate, positional split, preference for the longer answer, failures, cost
    per 1,000 comparisons and median latency. Then the people's agreement with
    each other, the line the table is read against, and the panel ranking (all
    judges' verdicts pooled) beside each judge's own order. Reads
    results/<run>.json, computing it first (as `konkord report` would) where
    it is missing or older than the judge table. Calls no model.
    """
    from konkord.configuration.display_names import renamed
    from konkord.configuration.runspec import resolve_run
    from konkord.results.judges_table import judge_table
    from konkord.results.schema import read_results
    from konkord.stages.report.judges_print import format_judge_table

    spec = resolve_run(run_name)
    results = read_results(spec.results_path) if spec.results_path.exists() else None
    if results is None or results.judge_panel is None:
        from konkord.stages.report.report import ReportOptions, write_report

        why = "no" if results is None else "an older"
        click.echo(
            f"{why} {spec.results_path}: computing it first, as `konkord report --run "
            f"{spec.name}` would",
            err=True,
        )
        results = write_report(spec, spec.results_path, ReportOptions())
    for line in format_judge_table(spec.name, judge_table(renamed(results, spec.names))):
        click.echo(line)
