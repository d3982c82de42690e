"""`konkord validate`: check suites and runs.json without calling anything."""

from __future__ import annotations

from pathlib import Path

import click

from konkord.errors import KonkordError


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
def validate(paths: tuple[Path, ...]) -> None:
    """Check suite files (.yaml) and runs.json files (.json) for errors.

    Each problem is printed as FILE:LINE: FIELD MESSAGE. A runs.json is checked
    together with the suites it names. Exits non-zero if any file is invalid;
    nothing is written.
    """
    from konkord.runs_config import load_runs
    from konkord.suite import load_suite

    failed = 0
    for path in paths:
        try:
            if path.suffix == ".json":
                runs = load_runs(path, check_suites=True)
                for index in range(len(runs.runs)):
                    load_suite(runs.suite_file(index))
                click.echo(f"ok  {path} ({len(runs.runs)} runs)")
            else:
                suite = load_suite(path)
                click.echo(f"ok  {path} ({len(suite.tasks)} tasks)")
        except KonkordError as exc:
            failed += 1
            click.secho(f"error: {exc}", fg="red", err=True)
    if failed:
        raise SystemExit(2)
