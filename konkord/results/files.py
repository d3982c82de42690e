"""A results file's tasks on disk: inline in the file, or one file per task beside it.

Twenty models on 1,000 tasks are 190 pairs a task, and every pair's verdicts and rationales in one
file make it about 190 MB: more than a browser wants to fetch and more than a static host serves
(Cloudflare takes at most 25 MiB per file; GitHub refuses files over 100 MB). Past
INLINE_TASKS_MAX of task JSON, `report` writes each task to `<run>.tasks/<task>.json` next to the
results file, which keeps the rest (ratings, intervals, diagnostics, calibration: the leaderboard)
and `task_files`: the folder, the task ids in order and a hash of the task files' bytes. Reading
puts the tasks back, so every consumer sees one `Results`; a file written whole (every file
before this layout) reads as it always did.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import threading
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from konkord.evidence.atomic import fsync_dir, sweep_stale_tmp, temporary_name, write_atomic
from konkord.results.task_reading import (
    TaskShelf,
    TasksHolder,
    load_tasks,
    task_file_paths,
    task_files_of,
    task_ids,
)
from konkord.results.tasks import TaskFiles, TaskView

__all__ = [
    "INLINE_TASKS_MAX",
    "StagedTasks",
    "TaskData",
    "TaskShelf",
    "TasksHolder",
    "TasksInBackground",
    "TasksWritten",
    "dump_results",
    "load_tasks",
    "task_file_paths",
    "task_files_of",
    "task_folder",
    "task_ids",
    "write_tasks",
]


# Tasks whose JSON is larger than this go to files of their own: the leaderboard's data stays
# well under 5 MB and each task file is a few hundred KB at 20 models. Measured without
# indentation, as task files are written; kept in the results file, the tasks are indented
# with it, which makes them about a quarter larger.
INLINE_TASKS_MAX = 3 * 2**20

class TaskData:
    """One task as the JSON its validated `TaskView` writes (without indentation, as a task
    file holds it), made straight from the evidence (`konkord.stages.report.task_json`)
    without building a model per comparison and per order: at 20 models x 1,000 tasks that
    validation cost more than the rest of writing the tasks. A test holds the bytes to what
    the model, validated from them, writes back. Validated only where the task is kept in the
    results file, or marked by a cascade."""

    __slots__ = ("id", "raw")

    def __init__(self, task_id: str, raw: bytes) -> None:
        self.id = task_id
        self.raw = raw

    def json(self) -> bytes:
        """The task's JSON, as `TaskView.model_dump_json()` writes it."""
        return self.raw

    def view(self) -> TaskView:
        """The task validated into its model."""
        return TaskView.model_validate_json(self.raw)


def task_folder(path: Path, run: str) -> Path:
    """The folder of a results file's task files."""
    return path.parent / f"{run}.tasks"


def dump_results(
    results: TasksHolder,
    path: Path,
    tasks: Iterable[TaskView | TaskData] | StagedTasks | None = None,
) -> bytes:
    """The results file's bytes, writing the task files first when the tasks are large.

    Each task is serialised by pydantic straight to bytes, one at a time, so the whole file is
    never held as Python objects and bytes at once; the tasks' bytes are kept only while they
    fit under INLINE_TASKS_MAX. `tasks`, when given, stands for `results.tasks`: made one at a
    time by the report, each task is written and let go before the next is made; a task given
    as `TaskData` is written as it is, and validated only if it stays in the file. Tasks
    already being written elsewhere (`StagedTasks`) are waited for.
    """
    folder = task_folder(path, results.run)
    if isinstance(tasks, StagedTasks):
        written = tasks.result()
        if written.sha256 is not None:
            tasks.move_in(folder, written.ids)
    else:
        written = write_tasks(path, results.run, results.tasks if tasks is None else tasks)
    if written.sha256 is None:
        _remove_task_files(folder, keep=set())
        inline = [task.view() if isinstance(task, TaskData) else task for task, _ in written.held]
        whole = results.model_copy(update={"tasks": inline, "task_files": None})
        return whole.model_dump_json(indent=1).encode() + b"\n"
    _remove_task_files(folder, keep=set(written.ids))
    fsync_dir(folder)
    files = TaskFiles(folder=folder.name, ids=written.ids, sha256=written.sha256)
    summary = results.model_copy(update={"tasks": [], "task_files": files})
    return summary.model_dump_json(indent=1).encode() + b"\n"


class TasksWritten(NamedTuple):
    """What `write_tasks` did: the tasks held with their bytes (they stay in the results
    file: sha256 None), or the ids of the task files written and the hash of their bytes."""

    held: list[tuple[TaskView | TaskData, bytes]]
    ids: list[str]
    sha256: str | None


class Stopped(Exception):
    """The task files were being written for a report that stopped (see StagedTasks)."""


def write_tasks(
    path: Path,
    run: str,
    tasks: Iterable[TaskView | TaskData],
    stop: threading.Event | None = None,
    staging: Path | None = None,
    inline_max: int | None = None,
    write_beside: bool = True,
) -> TasksWritten:
    """Each task serialised in turn; held while they all fit under `inline_max` (by default
    INLINE_TASKS_MAX), else each written to its file in the results' task folder (or in
    `staging`, from where `dump_results` moves them in), on a thread of its own while the next
    task is made (`write_beside`) or here. Raises Stopped once `stop` is set."""
    limit = INLINE_TASKS_MAX if inline_max is None else inline_max
    held: list[tuple[TaskView | TaskData, bytes]] = []
    ids: list[str] = []
    size = 0
    folder = task_folder(path, run) if staging is None else staging
    writer: _TaskWriter | None = None
    try:
        for task in tasks:
            if stop is not None and stop.is_set():
                raise Stopped(run)
            data = (
                task.json()
                if isinstance(task, TaskData)
                else task.model_dump_json().encode()
            )
            ids.append(task.id)
            if writer is None and size + len(data) > limit:
                folder.mkdir(parents=True, exist_ok=True)
                writer = _TaskWriter(folder, write_beside, staged=staging is not None)
                for earlier, held_data in held:
                    writer.put(earlier.id, held_data)
                held = []
            if writer is not None:
                writer.put(task.id, data)
            else:
                held.append((task, data))
                size += len(data)
        sha256 = None if writer is None else writer.finish()
    finally:
        if writer is not None:
            writer.close()
    return TasksWritten(held, ids, sha256)


class StagedTasks:
    """A report's tasks being made, serialised and written elsewhere (a thread, or a worker
    process) while the report computes its figures, into a staging folder beside the results
    file, moved into the task folder only when the results are written (`dump_results`): a
    report that stops (its figures fail, Ctrl-C) leaves the previous results and their task
    files as they were, and a killed one leaves a temporary folder that the next report into
    that folder removes. `result` waits for the tasks; `stop` stops making them, waits, and
    removes the staging folder."""

    def __init__(self, path: Path, run: str) -> None:
        folder = task_folder(path, run)
        folder.parent.mkdir(parents=True, exist_ok=True)
        sweep_stale_tmp(folder.parent)  # what a killed report left
        self.staging = temporary_name(folder)

    def move_in(self, folder: Path, ids: list[str]) -> None:
        """The staged task files moved into `folder` (replacing files of the same task)."""
        folder.mkdir(exist_ok=True)
        for task_id in ids:
            name = f"{task_id}.json"
            os.replace(self.staging / name, folder / name)
        shutil.rmtree(self.staging, ignore_errors=True)

    def result(self) -> TasksWritten:
        """The tasks written (an error met while making them is raised here)."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop making tasks, wait, and remove the staging folder (whatever the making raised
        is dropped: the report is stopping for a reason of its own)."""
        raise NotImplementedError


class TasksInBackground(StagedTasks):
    """Tasks made and written (`write_tasks`) on a thread of their own: the tasks need only
    the verdicts, the figures' statistics let go of the interpreter in numpy, so the two share
    the machine's cores."""

    def __init__(self, path: Path, run: str, tasks: Iterable[TaskView | TaskData]) -> None:
        super().__init__(path, run)
        self._stop = threading.Event()
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="konkord-task-files")
        try:
            self._future = pool.submit(
                write_tasks, path, run, tasks, self._stop, self.staging
            )
        finally:
            pool.shutdown(wait=False)  # the thread ends when the tasks are written

    def result(self) -> TasksWritten:
        return self._future.result()

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(BaseException):  # the report's own error is the one raised
            self._future.result()
        shutil.rmtree(self.staging, ignore_errors=True)


class _TaskWriter:
    """Task files written, and hashed in their order, on a thread of their own while the next
    tasks are made (writing a file and hashing its bytes let go of the interpreter); a few
    files' bytes wait at most, so memory stays one task's worth. Or, with `beside` False, each
    written at once: in the report's task worker, where nothing else runs, handing the files to
    a thread cost more than it saved (1.9 s in place against 2.5 s for the 1,000 tasks of
    20 models x 1,000 tasks, in one process alone).
    """

    PENDING = 8

    def __init__(self, folder: Path, beside: bool = True, staged: bool = False) -> None:
        self.folder = folder
        self.digest = hashlib.sha256()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="konkord-tasks")
        self._pending: deque[Future[None]] = deque()
        self._failed = False
        self._beside = beside
        self._staged = staged

    def put(self, task_id: str, data: bytes) -> None:
        """Write one task's file (after those put before it)."""
        if not self._beside:
            self._write(task_id, data)
            return
        self._pending.append(self._pool.submit(self._write, task_id, data))
        while len(self._pending) > self.PENDING:
            self._pending.popleft().result()  # a failed write is raised here

    def _write(self, task_id: str, data: bytes) -> None:
        if self._failed:  # nothing after a failed write: the report stops at it
            return
        try:
            _write_task(self.folder, task_id, data, self._staged)
        except BaseException:
            self._failed = True
            raise
        self.digest.update(data)

    def finish(self) -> str:
        """Wait for every file to be written; the hash of their bytes, in order."""
        while self._pending:
            self._pending.popleft().result()
        return self.digest.hexdigest()

    def close(self) -> None:
        """Stop the thread (files not yet written are dropped: the results file that would
        name them is not written)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def _write_task(folder: Path, task_id: str, data: bytes, staged: bool = False) -> None:
    if staged:
        # A staging folder is this process's own, made for this report and moved in whole
        # once every file is written (a killed report's is removed by the next): a file is
        # written in place, not through a temporary beside it (0.3 ms a file, 1,000 files).
        fd = os.open(folder / f"{task_id}.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            view = memoryview(data)
            written = 0
            while written < len(view):
                written += os.write(fd, view[written:])
        finally:
            os.close(fd)
        return
    # Not fsynced one by one (a thousand fsyncs): the results file, written after them and
    # durably, holds their hash, so a task file lost to a power cut is found on reading.
    write_atomic(folder / f"{task_id}.json", data, durable=False)


def _remove_task_files(folder: Path, keep: set[str]) -> None:
    """Task files of an earlier report that this one does not list (and the folder, if empty)."""
    if not folder.is_dir():
        return
    for stale in folder.glob("*.json"):
        if stale.stem not in keep:
            stale.unlink()
    if not keep and not any(folder.iterdir()):
        folder.rmdir()
