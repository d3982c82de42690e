"""runs.json against results/, both ways: each listed run's results file agrees with its entry,
and a results file no entry lists is named with what would publish it or take it away.

Kept apart from the build's loading and rendering (`build.py`): these are the checks a user
reads when the two disagree, each with its fix.
"""

from __future__ import annotations

import os
from pathlib import Path

from konkord.configuration.runs_config import RunEntry, RunsFile
from konkord.site.render import RunSummary

RESULTS_DIR = Path("results")


def _same_path(a: str | Path, b: str | Path) -> bool:
    return os.path.normpath(a) == os.path.normpath(b)


def _differences(label: str, listed: list[str], found: list[str]) -> str | None:
    if sorted(listed) == sorted(found):
        return None
    only_file = sorted(set(found) - set(listed))
    only_runs = sorted(set(listed) - set(found))
    return (
        f"{label} differ (only in the results file: {', '.join(only_file) or 'none'}; "
        f"only in runs.json: {', '.join(only_runs) or 'none'})"
    )


def check_against_entry(
    entry: RunEntry, summary: RunSummary, path: Path, runs_file: Path
) -> list[str]:
    """Where a results file disagrees with its runs.json entry, each with the fix."""
    fix = (
        f"regenerate it with `konkord report --run {entry.name}`, or correct the entry in "
        f"{runs_file}"
    )
    problems = []
    if summary.run != entry.name:
        problems.append(f'it is the results of run "{summary.run}", not "{entry.name}"')
    if not (
        _same_path(summary.suite_path, entry.suite)
        or _same_path(summary.suite_path, runs_file.parent / entry.suite)
    ):
        problems.append(f"its suite is {summary.suite_path}, runs.json says {entry.suite}")
    for label, listed, found in (
        ("models", list(entry.models), summary.models),
        ("judges", list(entry.judges), summary.judges),
    ):
        diff = _differences(label, listed, found)
        if diff:
            problems.append(diff)
    return [f'{path}: run "{entry.name}": {problem}; {fix}' for problem in problems]


def unlisted_results(runs: RunsFile, runs_file: Path) -> list[str]:
    """Results files in results/ that no run in runs.json claims: warnings, not errors, since
    a run of your own is made (and reported) before it is published. Each says what would
    put it on the site, or take it away, as things stand."""
    listed = {os.path.normpath(entry.results_path) for entry in runs.runs}
    folders = {RESULTS_DIR} | {entry.results_path.parent for entry in runs.runs}
    problems = []
    for folder in sorted(folders):
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            if os.path.normpath(path) not in listed:
                problems.append(f"{path}: not on the site, {_unlisted_advice(path, runs, runs_file)}")
    return problems


def _unlisted_advice(path: Path, runs: RunsFile, runs_file: Path) -> str:
    """Why a results file is off the site, and the command or edit that settles it."""
    from konkord.configuration.runspec import manifest_path
    from konkord.stages.report.freshness import stored_run_name

    run = stored_run_name(path)
    if run is None:
        return f"and not a results file konkord can read; move it out of {path.parent}/"
    entry = next((e for e in runs.runs if e.name == run), None)
    if entry is not None:
        return (
            f'though its run "{run}" is in {runs_file}, with results {entry.results_path}: '
            f'delete this copy, or set "results": "{path.as_posix()}" in that entry'
        )
    if not manifest_path(run).is_file():
        return (
            f'as {runs_file} does not list its run "{run}", which has no runs/{run}/run.json '
            f"to publish it from; delete it or move it out of {path.parent}/"
        )
    expected = Path(f"results/{run}.json")
    if os.path.normpath(path) != os.path.normpath(expected):
        return (
            f'as {runs_file} does not list its run "{run}"; move it to {expected} and run '
            f"`konkord publish {run}`"
        )
    return f"as {runs_file} does not list it; to publish it run `konkord publish {run}`"
