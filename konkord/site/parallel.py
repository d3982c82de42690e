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
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
        planner = RunPlanner(load_results_fast(job.run.path), renderer.content, job.run.entry.names)
        pages = {}
        renderer.render_plans(job.run, planner.tasks(job.tasks, rows), pages)
        line = ""
    return RenderOutcome(pages, writer.current.outputs, writer.written, writer.unchanged, line, rows)


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


def render_runs(
    renderer: SiteRenderer,
    runs: list[LoadedRun],
    out: Path,
    content_dir: Path,
    progress: Progress,
) -> dict[str, dict[str, Any]]:
    """Render every run that is not current, in parallel when there is enough work; returns
    each run's page list for the manifest."""
    pages: dict[str, dict[str, Any]] = {}
    todo: list[LoadedRun] = []
    for run in runs:
        kept = renderer.keep_if_current(run)
        if kept is None:
            todo.append(run)
        else:
            pages[run.entry.name] = kept
            progress(f"run {run.entry.name}: {len(kept)} pages, unchanged")
    workers = worker_count()
    if workers > 1 and sum(run.summary.tasks for run in todo) >= PARALLEL_MIN_TASKS:
        pages.update(_render_in_workers(renderer, todo, out, content_dir, workers, progress))
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
    workers: int,
    progress: Progress,
) -> dict[str, dict[str, Any]]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    writer = renderer.writer

    def job(run: LoadedRun, tasks: range | None = None) -> RenderJob:
        previous = {
            path: digest
            for path, digest in writer.previous.outputs.items()
            if path.startswith(f"{run.entry.name}/")
        }
        return RenderJob(
            run, out.resolve(), renderer.templates_dir.resolve(), content_dir.resolve(), previous,
            tasks,
        )  # fmt: skip

    def merge(outcome: RenderOutcome) -> None:
        writer.current.outputs.update(outcome.outputs)
        writer.written.extend(outcome.written)
        writer.unchanged += outcome.unchanged

    pages: dict[str, dict[str, Any]] = {}
    # spawn, not fork: serve mode has threads running, and forking those is unsafe. Not
    # forkserver either: its workers are the server's children, and their CPU time and peak
    # memory would be missing from this process's own account (and from bench_scale's).
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=start_worker,
        initargs=(renderer.templates_dir.resolve(), content_dir.resolve()),
    )
    try:
        whole: dict[str, Future[RenderOutcome]] = {}
        split: dict[str, _SplitRun] = {}
        for run in todo:
            if run.summary.tasks < SPLIT_MIN_TASKS:
                whole[run.entry.name] = pool.submit(render_job, job(run))
                continue
            results = load_results_fast(run.path)
            validate_task_ids(results, run.path)  # before any worker makes a folder of one
            planner = RunPlanner(results, renderer.content, run.entry.names)
            parts = slices(len(planner.results.tasks), workers * SLICES_PER_WORKER)
            futures = [pool.submit(render_job, job(run, part)) for part in parts]
            split[run.entry.name] = _SplitRun(planner, {}, 0, futures)
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
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return pages
