"""`konkord build`: check runs.json against results/, then render the site."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.option("--offline", is_flag=True, help="Never call a model; render from committed evidence.")
@click.option(
    "--out",
    default="public",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder the site is written to.",
)
@click.option(
    "--runs",
    "runs_file",
    default="runs.json",
    show_default=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The runs file listing the published runs.",
)
def build(offline: bool, out: Path, runs_file: Path) -> None:
    """Render every run in runs.json into a static site.

    Checks runs.json against results/ both ways first (a listed run without a
    results file, a results file nobody lists, a suite, models or judges that
    differ, a schema version this konkord cannot read) and names the fix for
    each. Pages whose inputs did not change are not rewritten. Run it from the
    project root; open OUT/index.html through `konkord serve`.
    """
    from konkord.stages.build import build_site

    summary = build_site(out, offline, runs_file, progress=click.echo)
    click.echo(f"built {out}/: {summary.line()}")
