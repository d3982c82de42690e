"""`konkord build`: bring every run up to date, check runs.json against results/, render."""

from __future__ import annotations

from pathlib import Path

import click

from konkord.commands.site_options import site_options


@click.command()
@click.option("--offline", is_flag=True, help="Never call a model; render from committed evidence.")
@site_options("Folder the site is written to.")
def build(offline: bool, out: Path, runs_file: Path) -> None:
    """Bring every run in runs.json up to date and render the site.

    Like make, runs only what is missing or stale for each run: answers,
    verdicts, simulated labels (demo runs), code checks, the results file.
    People's labels are never made up. With --offline, or without credentials
    for a model, nothing is called and the message names the run, the stage,
    how many items are missing and the variable to set.

    Then checks runs.json against results/ both ways (a listed run without a
    results file, a results file nobody lists, a suite, models or judges that
    differ, a schema version this konkord cannot read) and names the fix for
    each. Pages whose inputs did not change are not rewritten. Run it from the
    project root; open OUT/index.html through `konkord serve`.
    """
    from konkord.evidence.paths import require_state_inside
    from konkord.results.buildstamp import replay

    require_state_inside()  # the stamp is read from .konkord/: never from outside the project
    unchanged = replay(out, runs_file)
    if unchanged is not None:  # nothing the last build read has changed since
        for line in unchanged.lines():
            click.echo(line)
        click.echo(f"built {out}/: {unchanged.summary()}")
        return
    from konkord.stages.build.build import build_site

    summary = build_site(out, offline, runs_file, progress=click.echo)
    click.echo(f"built {out}/: {summary.line()}")
