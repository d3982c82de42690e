"""Starting the report's task-file worker (`task_worker`), also before it is needed: kept apart
from the worker's own module, which imports what making tasks takes (half a second), so that
`konkord report` starts it before importing anything heavy.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import tempfile
from typing import IO

from konkord.evidence.workers import core_free, worker_env

WORKER_MODULE = "konkord.stages.report.task_worker"


# A log this large holds more comparisons than `task_worker.PROCESS_MIN_COMPARISONS` (a verdict
# takes 300-800 bytes, two a comparison): its report is started a worker before it needs it.
EARLY_LOG_BYTES = 32 << 20
# A worker started early (`start_early`), with the file of its stderr, until a report takes it.
EARLY: list[tuple[subprocess.Popen[bytes], IO[bytes]]] = []


def _spawn() -> tuple[subprocess.Popen[bytes], IO[bytes]]:
    """A worker process, waiting for its request, and the file its stderr goes to."""
    errors = tempfile.TemporaryFile()  # noqa: SIM115 (closed by result or stop)
    try:
        worker = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE, str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
            env=worker_env(),
        )  # fmt: skip
    except BaseException:
        errors.close()
        raise
    return worker, errors


def start_early(log_bytes: int) -> None:
    """Start the worker now for the report of a verdict log of `log_bytes` (where it is large
    and a core is free): it imports what it needs (about half a second of CPU) while this
    process imports the statistics and reads the evidence, when the other core has little
    else to do, rather than when the figures and the tasks both want it. A worker no report
    takes up is stopped at exit."""
    if EARLY or log_bytes < EARLY_LOG_BYTES or not core_free():
        return
    try:
        EARLY.append(_spawn())
    except OSError:
        return
    atexit.register(stop_early)


def stop_early() -> None:
    """Stop the workers started early that no report took up."""
    while EARLY:
        worker, errors = EARLY.pop()
        with contextlib.suppress(ProcessLookupError):
            worker.kill()
        worker.wait()
        errors.close()


def waiting() -> bool:
    """Whether a worker started early still waits for its tasks."""
    return any(worker.poll() is None for worker, _ in EARLY)


def take_worker() -> tuple[subprocess.Popen[bytes], IO[bytes]]:
    """The worker started early, if it is still waiting; else one started now."""
    while EARLY:
        worker, errors = EARLY.pop()
        if worker.poll() is None:
            return worker, errors
        errors.close()
    return _spawn()
