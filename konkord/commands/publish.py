"""`konkord publish`: list a run of your own in runs.json so the site shows it."""

from __future__ import annotations

from pathlib import Path

import click

from konkord.commands.inputs import RUN_NAME


@click.command()
@click.argument("name", type=RUN_NAME)
@click.option(
    "--runs",
    "runs_file",
    type=click.Path(path_type=Path),
    default=Path("runs.json"),
    show_default=True,
    help="The runs file to add the run to (created if missing).",
)
def publish(name: str, runs_file: Path) -> None:
    """List run NAME in runs.json so `konkord build` renders it and keeps it up to date.

    The entry (suite, models, judges, generation settings) is taken from the
    run's manifest, runs/NAME/run.json, written by `konkord run` or `konkord
    import`, and from results/NAME.json when it exists. runs.json is replaced
    atomically; edit it afterwards to add a label plan or prices.
    """
    from konkord.stages.build.publish import publish as publish_run

    entry = publish_run(name, runs_file)
    if entry is None:
        click.echo(f'run "{name}" is already listed in {runs_file}; `konkord build` renders it')
        return
    judges = ", ".join(entry.get("judges", [])) or "none yet"
    click.echo(
        f'listed run "{name}" in {runs_file}: suite {entry["suite"]}, '
        f"{len(entry['models'])} models, judges: {judges}; now run `konkord build`"
    )
