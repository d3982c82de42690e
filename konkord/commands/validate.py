"""`konkord validate`: check suites and runs.json without calling anything."""

from __future__ import annotations

from pathlib import Path

import click

from konkord.errors import KonkordError


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
def validate(paths: tuple[Path, ...]) -> None:
    """Check suite files (.yaml) and runs.json files (.json) for errors.

    Each problem is printed as FILE:LINE: FIELD MESSAGE. Exits non-zero if any
    file is invalid; nothing is written.
    """
    from konkord.runs_config import load_runs
    from konkord.suite import load_suite

    failed = 0
    for path in paths:
        try:
            if path.suffix == ".json":
                runs = load_runs(path)
                for entry in runs.runs:
                    suite_path = path.parent / entry.suite
                    if not suite_path.exists() and not Path(entry.suite).exists():
                        raise KonkordError(f'{path}: run "{entry.name}": suite {entry.suite} not found')
                click.echo(f"ok  {path} ({len(runs.runs)} runs)")
            else:
                suite = load_suite(path)
                click.echo(f"ok  {path} ({len(suite.tasks)} tasks)")
        except KonkordError as exc:
            failed += 1
            click.secho(f"error: {exc}", fg="red", err=True)
    if failed:
        raise SystemExit(2)
