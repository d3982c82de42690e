"""What konkord's worker processes share: the verdict log's parse worker (`verdict_split`), the
call pool's workers (`konkord.providers.call_worker`) and the report's task-file worker
(`konkord.stages.report.task_worker`). Each is a fresh interpreter started with this konkord
found first, dies with the process that started it, and is started only where a core is free
for it: on a busy machine a worker only waits for a core, and its start costs CPU.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from pathlib import Path

import konkord

PR_SET_PDEATHSIG = 1


def worker_env() -> dict[str, str]:
    """The environment with this konkord found first, wherever it was imported from."""
    root = str(Path(konkord.__file__).resolve().parent.parent)
    found = os.environ.get("PYTHONPATH")
    path = root if not found else os.pathsep.join((root, found))
    return {**os.environ, "PYTHONPATH": path}


def die_with_parent(parent: int | None) -> None:
    """SIGKILL this process when its parent dies (Linux), and exit now if the parent it was
    started by (`parent`, a pid) is already gone."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the worker's closed pipes still end it
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def core_free() -> bool:
    """Whether a worker would have a core to itself now: this process may run on two cores or
    more, and no more threads of other processes are running or waiting for a core than leave
    one beside this process (`others_running`, the fewer of two readings 2 ms apart; where that
    is not known, the load average of the last minute below the cores less one)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    if cores < 2:
        return False
    others = others_running()
    if others is not None and others > cores - 2:
        # A moment's count: read again, so that a thread that ran for a blink (a kernel
        # worker, the end of another command) does not count as a load.
        time.sleep(0.002)
        again = others_running()
        others = others if again is None else min(others, again)
    if others is not None:
        return others <= cores - 2
    try:
        return os.getloadavg()[0] < cores - 1
    except OSError:  # not known: taken as busy
        return False


def others_running() -> int | None:
    """Threads of other processes running or waiting for a core at this moment (Linux: the
    count in /proc/loadavg less this process's own running threads), or None where unknown.
    A moment's count, not an average: the previous command of a benchmark or a script, which
    has ended, does not count, as it would for a minute in the load average."""
    try:
        loadavg = Path("/proc/loadavg").read_text()
        with os.scandir("/proc/self/task") as tasks:
            states = [Path(task.path, "stat").read_text() for task in tasks]
        return others_in(loadavg, states)
    except (OSError, ValueError, IndexError):
        return None


def others_in(loadavg: str, thread_stats: list[str]) -> int:
    """Threads of other processes running, from the text of /proc/loadavg (its fourth field:
    running/all) and of /proc/self/task/*/stat (the state follows the command's closing
    parenthesis; R for running)."""
    running = int(loadavg.split()[3].split("/")[0])
    mine = sum(stat[stat.rindex(")") + 2] == "R" for stat in thread_stats)
    return max(running - mine, 0)
