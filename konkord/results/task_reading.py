"""A results file's task files read back: each checked against the hash the results file
holds, parsed at once or when asked (`TaskShelf`), and their names kept inside the results'
folder. Written by `konkord.results.files`, which re-exports what is here."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar, overload

from pydantic import BaseModel, ValidationError

from konkord.errors import KonkordError
from konkord.results.task_structs import read_task
from konkord.results.tasks import TaskFiles, TaskView


class TasksHolder(Protocol):
    """What this module and `files` need of a results file (konkord.results.schema.Results),
    named here so that the schema, which writes and reads through them, is not imported
    back."""

    @property
    def run(self) -> str: ...
    @property
    def tasks(self) -> list[TaskView]: ...
    @property
    def task_files(self) -> TaskFiles | None: ...
    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self: ...
    def model_dump_json(self, *, indent: int | None = None) -> str: ...


ResultsT = TypeVar("ResultsT", bound=TasksHolder)

# A folder name (no separators, no `..`) and a task id (a suite slug) are all a task file's
# path is made of, so a results file cannot point a reader outside its own folder.
_FOLDER = re.compile(r"[a-z0-9][a-z0-9_.-]*\.tasks")
_TASK_ID = re.compile(r"[a-z0-9][a-z0-9_.-]*")


def task_file_paths(path: Path, files: TaskFiles) -> Iterator[tuple[str, Path]]:
    """Each task id with its file, refusing names that could leave the results' folder."""
    if not _FOLDER.fullmatch(files.folder):
        raise KonkordError(f"{path}: task_files.folder {files.folder!r} is not <run>.tasks")
    folder = path.parent / files.folder
    for task_id in files.ids:
        if not _TASK_ID.fullmatch(task_id):
            raise KonkordError(f"{path}: task_files.ids has {task_id!r}, not a task id")
        yield task_id, folder / f"{task_id}.json"


def load_tasks(
    path: Path,
    results: ResultsT,
    parse: bool = True,
    lazy: bool = False,
    checked: Sequence[bytes] | None = None,
) -> ResultsT:
    """The results with their tasks read back from `task_files` (unchanged if inline); with
    parse=False the task files are only checked against their hash, and the results come
    back as they are (no tasks, `task_files` set); with lazy=True they are checked, and the
    tasks come back as a `TaskShelf` that parses each when asked, checking it again against
    its own hash as read.

    `checked` (with lazy=True) holds each task file's sha256 as another process found it
    when it checked these very results (`TaskShelf.shas`): the files are then not all read
    here, only each one as it is asked for, against its own hash. A worker rendering a tenth
    of a large run's tasks reads a tenth of its task files, not all of them."""
    files = results.task_files
    if files is None:
        return results
    paths = [task_path for _, task_path in task_file_paths(path, files)]  # names refused
    if lazy and checked is not None and len(checked) == len(files.ids):
        lazy_shelf = TaskShelf(path, files, results.run, shas=tuple(checked))
        return results.model_copy(update={"tasks": lazy_shelf, "task_files": None})
    # Checked already in this process, every file the same version since (`konkord build`
    # checks a results file to find it current, then again to render it: 132 MB of task files
    # at 20 models x 1,000 tasks): not read again. A page reads each file against its hash.
    versions = _versions(paths) if lazy or not parse else None
    known = None if versions is None else CHECKED_FOLDERS.get((files.sha256, versions))
    if known is not None:
        if not parse:
            return results
        lazy_shelf = TaskShelf(path, files, results.run, shas=known)
        return results.model_copy(update={"tasks": lazy_shelf, "task_files": None})
    digest = hashlib.sha256()
    tasks: list[TaskView] = []
    shas: list[bytes] = []
    for task_path in paths:
        data = _read_task(path, task_path, results.run)
        digest.update(data)
        if lazy or not parse:
            shas.append(hashlib.sha256(data).digest())
        else:
            tasks.append(_parse_task(task_path, data, results.run))
    if digest.hexdigest() != files.sha256:
        raise KonkordError(
            f"{path.parent / files.folder}: the task files are not the ones {path} was written "
            f"with (changed or cut short since); {_regenerate(results.run)}"
        )
    if versions is not None and _versions(paths) == versions:  # none changed while read
        CHECKED_FOLDERS[(files.sha256, versions)] = tuple(shas)
    if not parse:
        return results
    shelf: Sequence[TaskView] = (
        TaskShelf(path, files, results.run, shas=tuple(shas)) if lazy else tasks
    )
    # In memory the results are whole again: where the tasks go is decided when written.
    return results.model_copy(update={"tasks": shelf, "task_files": None})


# Task folders checked in this process: (their hash, each file's version) -> each file's sha256.
CHECKED_FOLDERS: dict[tuple[str, tuple[tuple[int, ...], ...]], tuple[bytes, ...]] = {}


def _versions(paths: list[Path]) -> tuple[tuple[int, ...], ...] | None:
    """Each file's (device, inode, size, modification and change times in ns: a file written
    again with its size and modification time put back still has a new change time); None
    where one cannot be read (the check then reads them, and says which)."""
    try:
        stats = [os.stat(p) for p in paths]
    except OSError:
        return None
    return tuple((s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for s in stats)


def _regenerate(run: str) -> str:
    return f"regenerate it with `konkord report --run {run}`"


def _read_task(path: Path, task_path: Path, run: str) -> bytes:
    try:
        return task_path.read_bytes()
    except OSError as exc:
        raise KonkordError(
            f"{task_path}: cannot read this task file of {path} "
            f"({exc.strerror or exc}); {_regenerate(run)}"
        ) from None


def _parse_task(task_path: Path, data: bytes, run: str, for_pages: bool = False) -> TaskView:
    """The task in a task file; `for_pages`: as read-only structs where they take it
    (`task_structs.read_task`), for a page to read."""
    try:
        return read_task(data) if for_pages else TaskView.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the top"
        raise KonkordError(
            f"{task_path}: invalid task file at {where}: {first['msg']}; {_regenerate(run)}"
        ) from None


class TaskShelf(Sequence[TaskView]):
    """A large run's tasks, each read from its file when asked and only the last few kept:
    at 20 models x 1,000 tasks they are 190,000 comparisons, which the site renders one task
    page at a time and never needs at once. `shown` is applied to each task as it is read
    (display names). Each task comes as read-only structs with the model's fields where they
    take its file (`task_structs`): the pages only read them."""

    KEPT = 4

    def __init__(
        self,
        path: Path,
        files: TaskFiles,
        run: str,
        shown: Callable[[TaskView], TaskView] | None = None,
        shas: tuple[bytes, ...] | None = None,
    ) -> None:
        self.path = path
        self.files = files
        self.run = run
        self.shown = shown
        self.ids = list(files.ids)
        # Each file's sha256 as checked with the others against the results file's hash: a
        # file changed since is refused when read, not rendered.
        self.shas = shas
        self._kept: dict[int, TaskView] = {}

    def showing(self, shown: Callable[[TaskView], TaskView]) -> TaskShelf:
        """The same tasks, each passed through `shown` when read."""
        return TaskShelf(self.path, self.files, self.run, shown, self.shas)

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> TaskView: ...
    @overload
    def __getitem__(self, index: slice) -> list[TaskView]: ...
    def __getitem__(self, index: int | slice) -> TaskView | list[TaskView]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        task = self._kept.get(index)
        if task is None:
            task_path = self.path.parent / self.files.folder / f"{self.ids[index]}.json"
            data = _read_task(self.path, task_path, self.run)
            if self.shas is not None and hashlib.sha256(data).digest() != self.shas[index]:
                raise KonkordError(
                    f"{task_path}: this task file of {self.path} changed since it was "
                    f"checked; {_regenerate(self.run)}"
                )
            task = _parse_task(task_path, data, self.run, for_pages=True)
            if self.shown is not None:
                task = self.shown(task)
            if len(self._kept) >= self.KEPT:
                self._kept.pop(next(iter(self._kept)))
            self._kept[index] = task
        return task

    def __iter__(self) -> Iterator[TaskView]:
        for index in range(len(self)):
            yield self[index]


def task_ids(tasks: Sequence[TaskView]) -> list[str]:
    """The ids of `tasks` without reading a shelf's task files."""
    return list(tasks.ids) if isinstance(tasks, TaskShelf) else [task.id for task in tasks]


class _TaskFilesHead(BaseModel):
    """Only `task_files` of a results file, read without validating the rest."""

    task_files: TaskFiles | None = None


def task_files_of(data: bytes) -> TaskFiles | None:
    """A results file's `task_files` from its bytes (None when its tasks are inline, or when
    the file is malformed: reading it whole says what is wrong)."""
    try:
        return _TaskFilesHead.model_validate_json(data).task_files
    except ValidationError:
        return None
