"""`konkord calibrate`: how far each judge agrees with the people who labelled the run."""

from __future__ import annotations

import click

from konkord.commands.inputs import RUN_NAME


@click.command()
@click.option("--run", "run_name", type=RUN_NAME, required=True, help="Run name (from runs.json or a manifest).")
@click.option(
    "--judge",
    help="Calibrate only this judge, or a cascade by the name the report shows "
    "[default: every judge in the results file].",
)
def calibrate(run_name: str, judge: str | None) -> None:
    """Measure the judge against blind human labels, with intervals.

    Compares every human label with the judge's verdict on the same task and
    model pair (in model terms, both orders combined) and stores the figures in
    the calibration block of results/<run>.json: agreement with a Wilson 95%
    interval clustered by task, Cohen's kappa (every comparison counted in both
    pair orientations) with a bootstrap interval, the confusion matrix,
    agreement without ties, on consistent and on flipped pairs, breakdowns by
    task, pair, answer length, labeller and turn, agreement between people, and
    every disagreement. Without a results file yet, computes it first, as
    `konkord report` would. Calls no model.
    """
    from konkord.configuration.runspec import resolve_run
    from konkord.stages.calibrate.calibrate_run import calibrate_run

    spec = resolve_run(run_name)
    if not spec.results_path.exists():
        from konkord.stages.report.report import ReportOptions, write_report

        click.echo(
            f"no {spec.results_path} yet: computing it first, as `konkord report --run "
            f"{spec.name}` would",
            err=True,
        )
        write_report(spec, spec.results_path, ReportOptions())
    calibrate_run(spec, judge=judge, echo=click.echo)
