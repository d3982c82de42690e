"""Rendering runs on every core: the runs that are not current, and the task pages of a large
run split into slices, rendered in worker processes.

A run of at least SPLIT_MIN_TASKS tasks is cut into slices of its tasks, several per worker
(the pool hands the next slice to whichever worker is free, so a slow one holds up no other).
Meanwhile the main process renders that run's own pages (leaderboard, methodology, calibration,
judges) and copies its results file; the task index, made from every slice's rows in the run's
order, comes last. The same pages in the same bytes as one process renders them, each written
atomically into the staging copy of the site (`konkord.site.staging`), so a build stopped
half way leaves the site as it was.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from konkord.results.files import TaskShelf
from konkord.results.schema import Results
from konkord.site.environment import sha256
from konkord.site.generate import (
    LoadedRun,
    SiteRenderer,
    copy_results,
    load_results_fast,
    run_line,
)
from konkord.site.incremental import Manifest, OutputWriter
from konkord.site.render import RunPlanner, load_content, validate_task_ids

Progress = Callable[[str], None]

# Below this many tasks to render, starting worker processes costs more than it saves.
PARALLEL_MIN_TASKS = 300
# A run with this many tasks is split into slices of its tasks, SLICES_PER_WORKER per worker.
SPLIT_MIN_TASKS = 200
SLICES_PER_WORKER = 4


@dataclass(frozen=True)
class RenderJob:
    """One run, or one slice of a run's tasks, to render in a worker process: everything it
    needs, as absolute paths."""

    run: LoadedRun
    out: Path
    templates_dir: Path
    content_dir: Path
    previous_outputs: dict[str, str]
    tasks: range | None = None  # None: the whole run; else only these task pages
    # The results file's sha256 and each of its task files' as the main process checked them
    # (`load_tasks`): a slice's worker then reads only its own task files, each against its
    # hash, not all of them against the results file's.
    checked: tuple[str, tuple[bytes, ...]] | None = None


@dataclass(frozen=True)
class RenderOutcome:
    """What a worker did, merged into the main writer afterwards."""

    pages: dict[str, Any]
    outputs: dict[str, str]
    written: list[str]
    unchanged: int
    line: str
    rows: list[dict[str, Any]] = field(default_factory=list)  # a slice's task index rows


# A worker process's renderer: its templates compiled and hashed once, then reused for every
# job the worker renders. Workers live for one build only, so nothing stale outlives it.
_worker_renderer: SiteRenderer | None = None


def start_worker(templates_dir: Path, content_dir: Path) -> None:
    """Pool initializer: make this worker's renderer (its writer is replaced per job)."""
    import gc

    global _worker_renderer
    writer = OutputWriter(Path(), Manifest())
    _worker_renderer = SiteRenderer(templates_dir, writer, load_content(content_dir))
    # What is alive now (modules, compiled templates) lives as long as the worker: out of the
    # collector's sight, each collection walks only the pages' own objects (about a tenth of
    # a worker's time otherwise).
    gc.freeze()


def render_job(job: RenderJob) -> RenderOutcome:
    """Render one run, or one slice of its tasks, in a worker process (module level, so it
    can be pickled)."""
    writer = OutputWriter(job.out, Manifest(outputs=job.previous_outputs))
    renderer = _worker_renderer
    if renderer is None or renderer.templates_dir != job.templates_dir:
        renderer = SiteRenderer(job.templates_dir, writer, load_content(job.content_dir))
    renderer.writer = writer
    rows: list[dict[str, Any]] = []
    if job.tasks is None:
        pages, line = renderer.render_run(job.run)
    else:  # the main process checked the task ids before handing out slices
        planner = RunPlanner(load_checked(job), renderer.content, job.run.entry.names)
        pages = {}
        renderer.render_plans(job.run, planner.tasks(job.tasks, rows), pages)
        line = ""
    return RenderOutcome(
        pages, writer.current.outputs, writer.written, writer.unchanged, line, rows
    )


def load_checked(job: RenderJob) -> Results:
    """The job's results file, its task files trusted to be as the main process checked them
    only if the results file's bytes are the ones it checked."""
    data = job.run.path.read_bytes()
    if job.checked is not None and sha256(data) == job.checked[0]:
        return load_results_fast(job.run.path, data, checked=job.checked[1])
    return load_results_fast(job.run.path, data)


def worker_count() -> int:
    """Processes to render runs with: one per CPU, or KONKORD_BUILD_WORKERS (1 = in-process)."""
    setting = os.environ.get("KONKORD_BUILD_WORKERS", "")
    if setting.isdigit() and int(setting) > 0:
        return int(setting)
    return os.cpu_count() or 1


def slices(count: int, parts: int) -> list[range]:
    """`range(count)` cut into at most `parts` consecutive slices of nearly equal length."""
    parts = max(1, min(parts, count))
    return [range(count * k // parts, count * (k + 1) // parts) for k in range(parts)]


@dataclass
class _SplitRun:
    """A run rendered in slices: what the main process did of it, and the slices' results."""

    planner: RunPlanner
    pages: dict[str, dict[str, Any]]
    written: int
    futures: list[Future[RenderOutcome]]


def _pool(templates_dir: Path, content_dir: Path, workers: int) -> ProcessPoolExecutor:
    import multiprocessing

    # spawn, not fork: serve mode has threads running, and forking those is unsafe. Not
    # forkserver either: its workers are the server's children, and their CPU time and peak
    # memory would be missing from this process's own account (and from bench_scale's).
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=start_worker,
        initargs=(templates_dir.resolve(), content_dir.resolve()),
    )


def _previous_of(writer: OutputWriter, run: LoadedRun) -> dict[str, str]:
    return {
        path: digest
        for path, digest in writer.previous.outputs.items()
        if path.startswith(f"{run.entry.name}/")
    }


def _submit_slices(
    pool: ProcessPoolExecutor,
    renderer: SiteRenderer,
    run: LoadedRun,
    out: Path,
    content_dir: Path,
    workers: int,
) -> _SplitRun:
    """Check a large run's task ids, then hand its task slices to the pool."""
    data = run.path.read_bytes()
    results = load_results_fast(run.path, data)
    validate_task_ids(results, run.path)  # before any worker makes a folder of one
    shelf = results.tasks
    checked = (
        (sha256(data), shelf.shas)
        if isinstance(shelf, TaskShelf) and shelf.shas is not None
        else None
    )
    planner = RunPlanner(results, renderer.content, run.entry.names)
    parts = slices(len(planner.results.tasks), workers * SLICES_PER_WORKER)
    previous = _previous_of(renderer.writer, run)
    paths = (out.resolve(), renderer.templates_dir.resolve(), content_dir.resolve())
    futures = [
        pool.submit(render_job, RenderJob(run, *paths, previous, part, checked))
        for part in parts
    ]
    return _SplitRun(planner, {}, 0, futures)


@dataclass
class Ahead:
    """Large runs' task slices handed to worker processes before `konkord build` has checked
    that nothing is owed (the check reads every run's evidence, about a quarter of a large
    build): they render while it reads. A slice is used only if its run's results file is,
    after the check, the one it was rendered from (same hash, same display names); else what
    it wrote is deleted and the run is rendered again."""

    pool: ProcessPoolExecutor
    workers: int
    runs: dict[str, tuple[str, _SplitRun]] = field(default_factory=dict)  # name -> (key, slices)

    def take(self, run: LoadedRun) -> _SplitRun | None:
        """The run's slices if they were rendered from its results file as checked."""
        early = self.runs.get(run.entry.name)
        return early[1] if early is not None and early[0] == run.key else None

    def discard(self, writer: OutputWriter, keep: set[str]) -> None:
        """Wait for the slices of runs not in `keep`, then delete every page they wrote and
        forget it was current: a page rendered from a results file the check replaced is
        never kept, even if the previous build wrote that page from the same inputs."""
        dropped = [early for name, (_key, early) in self.runs.items() if name not in keep]
        self.runs = {name: found for name, found in self.runs.items() if name in keep}
        for early in dropped:  # the slices not started are not started at all
            for future in early.futures:
                future.cancel()
        for early in dropped:
            for future in early.futures:
                if future.cancelled():
                    continue
                try:
                    outcome = future.result()
                except Exception:  # a slice that failed wrote nothing worth keeping
                    continue
                for path in outcome.written:
                    (writer.out / path).unlink(missing_ok=True)
                    writer.previous.outputs.pop(path, None)

    def close(self) -> None:
        """Stop the pool: pending slices cancelled, running ones waited for."""
        self.pool.shutdown(wait=True, cancel_futures=True)


def render_ahead(
    renderer: SiteRenderer, runs: list[LoadedRun], out: Path, content_dir: Path
) -> Ahead | None:
    """Start the task slices of every large run that is not current, in a pool of workers;
    None when there are not two workers or no such run. `renderer`'s writer is the build's
    (nothing is recorded in it here)."""
    workers = worker_count()
    scratch = SiteRenderer(renderer.templates_dir, OutputWriter(out, renderer.writer.previous),
                           renderer.content)  # fmt: skip
    big = [
        run
        for run in runs
        if run.summary.tasks >= SPLIT_MIN_TASKS and scratch.keep_if_current(run) is None
    ]
    if workers < 2 or sum(run.summary.tasks for run in big) < PARALLEL_MIN_TASKS:
        return None
    ahead = Ahead(_pool(renderer.templates_dir, content_dir, workers), workers)
    try:
        for run in big:
            early = _submit_slices(ahead.pool, renderer, run, out, content_dir, workers)
            ahead.runs[run.entry.name] = (run.key, early)
    except BaseException:
        ahead.close()
        raise
    return ahead


def render_runs(
    renderer: SiteRenderer,
    runs: list[LoadedRun],
    out: Path,
    content_dir: Path,
    progress: Progress,
    ahead: Ahead | None = None,
) -> dict[str, dict[str, Any]]:
    """Render every run that is not current, in parallel when there is enough work (using
    the slices rendered `ahead` where they still hold); returns each run's page list for the
    manifest."""
    pages: dict[str, dict[str, Any]] = {}
    todo: list[LoadedRun] = []
    if ahead is not None:  # first, so that no page it wrote from a replaced file looks current
        ahead.discard(renderer.writer, {run.entry.name for run in runs if ahead.take(run)})
    for run in runs:
        kept = renderer.keep_if_current(run)
        if kept is None:
            todo.append(run)
        else:
            pages[run.entry.name] = kept
            progress(f"run {run.entry.name}: {len(kept)} pages, unchanged")
    if ahead is not None:
        pages.update(_render_in_workers(renderer, todo, out, content_dir, ahead, progress))
        return pages
    workers = worker_count()
    if workers > 1 and sum(run.summary.tasks for run in todo) >= PARALLEL_MIN_TASKS:
        pool = Ahead(_pool(renderer.templates_dir, content_dir, workers), workers)
        try:
            pages.update(_render_in_workers(renderer, todo, out, content_dir, pool, progress))
        finally:
            pool.close()
    else:
        for run in todo:
            pages[run.entry.name], line = renderer.render_run(run)
            progress(line)
    return pages


def _render_in_workers(
    renderer: SiteRenderer,
    todo: list[LoadedRun],
    out: Path,
    content_dir: Path,
    ahead: Ahead,
    progress: Progress,
) -> dict[str, dict[str, Any]]:
    """Render `todo` with the pool of `ahead` (its slices of a run used where they hold);
    the caller closes the pool."""
    writer = renderer.writer
    pool, workers = ahead.pool, ahead.workers

    def merge(outcome: RenderOutcome) -> None:
        writer.current.outputs.update(outcome.outputs)
        writer.written.extend(outcome.written)
        writer.unchanged += outcome.unchanged

    pages: dict[str, dict[str, Any]] = {}
    whole: dict[str, Future[RenderOutcome]] = {}
    split: dict[str, _SplitRun] = {}
    for run in todo:
        early = ahead.take(run)
        if early is not None:
            split[run.entry.name] = early
        elif run.summary.tasks < SPLIT_MIN_TASKS:
            paths = (out.resolve(), renderer.templates_dir.resolve(), content_dir.resolve())
            job = RenderJob(run, *paths, _previous_of(writer, run))
            whole[run.entry.name] = pool.submit(render_job, job)
        else:
            split[run.entry.name] = _submit_slices(pool, renderer, run, out, content_dir, workers)
    # While the workers render task pages, this process renders the runs' own pages.
    for run in todo:
        if run.entry.name in split:
            done = split[run.entry.name]
            done.written += renderer.render_plans(run, done.planner.head(), done.pages)
            copy_results(writer, run)
    for run in todo:
        name = run.entry.name
        if name in whole:
            outcome = whole[name].result()
            merge(outcome)
            pages[name] = outcome.pages
            progress(outcome.line)
            continue
        done = split[name]
        rows: list[dict[str, Any]] = []
        for future in done.futures:
            outcome = future.result()
            merge(outcome)
            done.pages.update(outcome.pages)
            done.written += len(outcome.written)
            rows += outcome.rows
        index = done.planner.index(rows)
        done.written += renderer.render_plans(run, [index], done.pages)
        pages[name] = done.pages
        progress(run_line(run, done.pages, done.written))
    return pages
