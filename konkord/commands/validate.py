"""`konkord validate`: check suites and runs.json without calling anything."""

from __future__ import annotations

from pathlib import Path

import click

from konkord.errors import KonkordError


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
def validate(paths: tuple[Path, ...]) -> None:
    """Check suite files (.yaml), folders of suites and runs.json files (.json).

    Each problem is printed as FILE:LINE: FIELD MESSAGE. A runs.json is checked
    together with the suites it names. Exits non-zero if any file is invalid;
    nothing is written.
    """
    from konkord.configuration.runs_config import load_runs
    from konkord.configuration.suite import load_suite

    failed = 0
    files: list[Path] = []
    for path in paths:
        if not path.is_dir():
            files.append(path)
            continue
        found = sorted(p for p in path.iterdir() if p.suffix in {".yaml", ".yml"})
        if not found:
            failed += 1
            click.secho(f"error: {path}: a folder with no suite files (.yaml) in it", fg="red", err=True)
        files += found
    for path in files:
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
