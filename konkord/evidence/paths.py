"""Paths stay inside the project: what Konkord reads from runs.json or writes never leaves it.

The project folder is the folder of runs.json (the working directory for the stages). A path
is inside when it resolves there with every symlink followed, so "../../etc/passwd", an
absolute path elsewhere, or a symlink that points out of the project are all refused.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from konkord.errors import KonkordError

RUNS_ROOT = Path("runs")  # each run's evidence in a folder of its own: runs/<run>/


class PathError(KonkordError):
    """A path that leaves the project folder, or is not the kind of file it should be."""


def resolved(path: Path) -> Path | None:
    """`path` with every symlink followed (it need not exist), or None for a symlink loop."""
    try:
        return Path(os.path.realpath(path, strict=False))
    except (OSError, RuntimeError, ValueError):
        return None


def outside_problem(path: Path, project: Path, allow_root: bool = False) -> str | None:
    """Why `path` (relative to `project`) is not inside `project`; None when it is."""
    root = resolved(project)
    target = resolved(project / path)
    if root is None or target is None:
        return f'"{path}" is a symlink loop'
    if target == root and not allow_root:
        return f'"{path}" is the project folder itself, not a path inside it'
    if target != root and root not in target.parents:
        plain = Path(os.path.normpath(Path(os.path.abspath(project)) / path))
        through = "" if root != plain and root not in plain.parents else (
            f" (through a symlink: it resolves to {target})"
        )
        return f'"{path}" is outside the project folder{through}; use a path inside it'
    return None


def file_problem(path: Path, project: Path) -> str | None:
    """Why `path` cannot be a file Konkord writes or reads: outside, or a folder/device/FIFO."""
    problem = outside_problem(path, project)
    if problem is not None:
        return problem
    target = project / path
    try:
        os.stat(target)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f'"{path}" is a symlink loop'
    if target.is_dir():
        return f'"{path}" is a folder, expected a file'
    if target.exists() and not target.is_file():
        return f'"{path}" is not a regular file'
    return None


def require_inside(path: Path, what: str, project: Path = Path("."),
                   is_file: bool = True) -> Path:
    """`path` itself when it is a usable path inside the project; else a one-line PathError."""
    problem = file_problem(path, project) if is_file else outside_problem(path, project)
    if problem is not None:
        raise PathError(f"{what} {problem}")
    return path


def require_folder_inside(folder: Path, what: str, project: Path = Path(".")) -> None:
    """`folder` and every symlink under it stay inside the project, and everything else in it is
    a regular file or a folder (else one PathError line).

    Konkord writes files under the run folder and the site folder; a symlink planted there
    (runs/demo/answers.jsonl -> /etc/passwd) would send a write out of the project."""
    require_inside(folder, what, project, is_file=False)
    pending = [project / folder] if (project / folder).is_dir() else []
    while pending:  # scandir's entries know whether they are symlinks without a stat each
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_symlink():
                    inner = Path(entry.path).relative_to(project)
                    problem = outside_problem(inner, project)
                    if problem is not None:
                        raise PathError(f"{what} holds a symlink: {problem}")
                elif entry.is_dir():
                    pending.append(Path(entry.path))
                elif not entry.is_file():  # a FIFO would hang the next read, a device flood it
                    raise PathError(f'{what} holds "{entry.path}", which is not a regular file')


STATE_DIR = Path(".konkord")


def require_state_inside(project: Path = Path(".")) -> None:
    """.konkord (the response cache, the run locks, the build stamps) is written by every
    stage, so it and every symlink in it stay inside the project, as the run folder does."""
    require_folder_inside(STATE_DIR, "the .konkord folder", project)
    target = project / STATE_DIR
    if os.path.lexists(target) and not target.is_dir():
        raise PathError(f'"{STATE_DIR}" is not a folder; move it away, Konkord keeps its cache '
                        "and locks there")
