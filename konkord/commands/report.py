"""`konkord report`: ratings, intervals, diagnostics and cost into results/<run>.json."""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path

import click

import konkord.commands
from konkord.commands.inputs import RUN_NAME, SEED_LIMIT, whole


@click.command()
@click.option("--run", "run_name", type=RUN_NAME, required=True, help="Run name (from runs.json or `konkord run`).")
@click.option("--out", type=click.Path(path_type=Path), help="Results file [default: results/<run>.json].")
@click.option("--resamples", type=whole(1, 1_000_000), default=1000, show_default=True, help="Bootstrap resamples.")
@click.option("--seed", type=whole(0, SEED_LIMIT, "a whole number from 0 that fits in 64 bits"), default=0, show_default=True, help="Bootstrap seed (same seed, same intervals).")
@click.option(
    "--resample",
    type=click.Choice(["task", "judgments"]),
    default="task",
    show_default=True,
    help="Resample whole tasks (honest when tasks differ) or single judgments (naive, for comparison).",
)
def report(run_name: str, out: Path | None, resamples: int, seed: int, resample: str) -> None:
    """Fit Bradley-Terry ratings with bootstrap intervals, rank ranges, claims,
    diagnostics and cost, and write them with every answer and verdict to one
    versioned results file. Calls no model.
    """
    from konkord.evidence.paths import require_state_inside
    from konkord.results import reportstamp

    require_state_inside()  # the stamp is read from .konkord/: never from outside the project
    key = reportstamp.report_key(run_name, out, (resamples, seed, resample))
    replayed = reportstamp.replay(key)
    if replayed is not None:  # nothing it reads changed since an identical report
        click.echo(replayed, nl=False)
        return
    if not (out or Path(f"results/{run_name}.json")).exists():  # a report to compute, surely
        _start_task_worker(run_name)

    from konkord.configuration.display_names import renamed
    from konkord.configuration.runs_config import DEFAULT_RUNS_FILE
    from konkord.configuration.runspec import manifest_path, resolve_run
    from konkord.errors import KonkordError
    from konkord.evidence.paths import require_inside
    from konkord.results.schema import read_results
    from konkord.stages.report.freshness import ReportOptions, inputs_digest, stored_digest
    from konkord.stages.report.report_print import print_report

    spec = resolve_run(run_name)
    if out is not None:
        require_inside(out, "--out")
    options = ReportOptions(resamples=resamples, seed=seed, unit=resample)  # type: ignore[arg-type]
    path = out or spec.results_path
    files, folders = reportstamp.inputs(
        DEFAULT_RUNS_FILE,
        manifest_path(run_name),
        spec.suite_path,
        spec.deployments_file,
        spec.run_dir,
        path,
    )
    # The results are a function of the evidence, suite and options (their digest is in the
    # file): when none changed, print the file as it is rather than recompute the same bytes.
    # With no results file there is nothing to reuse, and no need to hash every input first
    # (300 MB of verdicts at 20 models x 1,000 tasks). Each stream is read once to hash it:
    # for the digest, for the stamp's fingerprint, and for a stale file's new results.
    stream_hashes: dict[str, bytes] = {}
    digest = inputs_digest(spec, options, stream_hashes) if path.exists() else None
    before = None
    if digest is not None:
        before = reportstamp.fingerprint(key, files, folders, stream_hashes)
    if before is not None and stored_digest(path) == digest:
        try:
            current = read_results(path, tasks=False)  # (the summary is what is printed)
        except KonkordError:
            pass
        else:
            with reportstamp.captured() as printed:
                print_report(renamed(current, spec.names))
                click.echo(f"{path} is up to date with the evidence; nothing recomputed")
            # Kept only if nothing changed while it was read: the text is then theirs.
            if reportstamp.fingerprint(key, files, folders) == before:
                reportstamp.record(key, files, folders, before, printed.getvalue())
            return
    from konkord.evidence.log import EvidenceLog
    from konkord.evidence.verdict_table import start_early

    # The verdict log's saved columns are read and checked now, or a large log's later part
    # starts parsing in a worker, while this process imports the statistics and reads the
    # answers.
    verdicts = EvidenceLog(spec.run_dir).path("verdicts")
    start_early(verdicts)
    _start_task_worker(run_name)  # (where not started above)
    from konkord.stages.report.report import write_report

    # The cyclic collector stays off to the end of this command (`write_report` pauses it
    # while it works), and to the end of the process where that ends with it: turned on
    # again, its first collection walked the millions of objects the report made (0.06 s at
    # 20 models x 1,000 tasks) to free a few hundred, just before the process let them go.
    collecting = gc.isenabled()
    gc.disable()
    try:
        results = write_report(spec, path, options, digest)
        print_report(renamed(results, spec.names))
        click.echo(f"wrote {path}")
    finally:
        if collecting and not konkord.commands.PROCESS_ENDS_WITH_COMMAND:
            gc.enable()


def _start_task_worker(run_name: str) -> None:
    """Start the task-file worker of a large log's report now (`task_spawn`): its imports
    (half a second of CPU) run on the core this process leaves idle while it imports and
    reads the configuration, not beside the check of the log's saved columns that follows.
    Where no results file stands this is the command's first step; else once the file is
    found stale. A worker no report takes up is stopped at exit."""
    from konkord.evidence.paths import RUNS_ROOT
    from konkord.stages.report.task_spawn import start_early

    with contextlib.suppress(OSError):  # (no log: the report says so)
        start_early((RUNS_ROOT / run_name / "verdicts.jsonl").stat().st_size)
