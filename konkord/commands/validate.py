"""`konkord validate`: check suites and runs.json without calling anything."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from konkord.errors import KonkordError

if TYPE_CHECKING:
    from konkord.configuration.runs_config import RunsFile


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
def validate(paths: tuple[Path, ...]) -> None:
    """Check suite files (.yaml), folders of suites and runs.json files (.json).

    Each problem is printed as FILE:LINE: FIELD MESSAGE. A runs.json is checked
    together with the suites it names. Exits non-zero if any file is invalid;
    nothing is written.
    """
    from konkord.configuration.runs_config import load_runs
    from konkord.configuration.suite import load_suite, tests_problems

    problems: list[str] = []
    files: list[Path] = []
    for path in paths:
        if not path.is_dir():
            files.append(path)
            continue
        found = sorted(p for p in path.iterdir() if p.suffix in {".yaml", ".yml"})
        if not found:
            problems.append(f"{path}: a folder with no suite files (.yaml) in it")
        files += found
    for path in files:
        if path.suffix == ".json":
            try:
                runs = load_runs(path)
            except KonkordError as exc:
                problems += _problems(exc)
                continue
            found_here = [problem for index in range(len(runs.runs))
                          for problem in _run_problems(runs, index)]
            problems += found_here
            if not found_here:
                click.echo(f"ok  {path} ({len(runs.runs)} runs)")
            continue
        try:
            suite = load_suite(path)
        except KonkordError as exc:
            problems += _problems(exc)
            continue
        broken = tests_problems(path, suite)
        problems += broken
        if not broken:
            click.echo(f"ok  {path} ({len(suite.tasks)} tasks)")
    for problem in problems:
        click.secho(f"error: {problem}", fg="red", err=True)
    if problems:
        raise SystemExit(2)


def _problems(exc: KonkordError) -> list[str]:
    """Every problem an error carries (a file with several bad fields), or its message."""
    return list(getattr(exc, "problems", None) or [str(exc)])


def _run_problems(runs: RunsFile, index: int) -> list[str]:
    """What is wrong with the files one run of runs.json names: its suite (and its tests),
    and its deployments file."""
    from konkord.configuration.deployments import load_deployment_file
    from konkord.configuration.suite import load_suite, tests_problems

    problems: list[str] = []
    try:
        runs.check_suite_exists(index)
        suite_path = runs.suite_file(index)
        problems += tests_problems(suite_path, load_suite(suite_path))
    except KonkordError as exc:
        problems += _problems(exc)
    deployments = runs.runs[index].deployments
    if isinstance(deployments, str):
        where = runs.deployments_file(index)
        if not where.is_file():
            problems.append(f'{runs.where(("runs", index, "deployments"))} "{deployments}" was '
                            f"not found (looked for {where})")
        else:
            try:
                load_deployment_file(where)
            except KonkordError as exc:
                problems += _problems(exc)
    return problems
