"""A large report's task files made in a worker process (`python -m
konkord.stages.report.task_worker`) while this process computes the figures.

On a thread beside the figures (`TasksInBackground`) the tasks share one interpreter with them:
at 20 models x 1,000 tasks making and serialising 190,000 comparisons holds it for about two
seconds, which the figures wait through. A worker process runs them on a core of its own. It is
sent the `TaskSource` in one pickle (the log's columns as arrays of codes with their few
distinct values, the answers and the rationales: a few dozen MB), makes the tasks from it by
the same code as the thread (`task_source.tasks_of`), writes them into the staging folder and
sends back what it wrote. Used where it pays (`pays`): a run of `PROCESS_MIN_COMPARISONS` or
more and a core free now; `konkord report` of a large log starts it before it is needed
(`task_spawn`), and then sends it the run's answers as soon as they are read (`EarlyAnswers`):
the worker counts their style features on its core (a fifth of a second at 20,000 answers)
while this process combines the verdicts, and the answers are not sent again with the tasks.
The worker ignores Ctrl-C (this process stops it) and dies with this process; a worker that
dies fails the report with its exit status and the end of what it printed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import pickle
import shutil
import signal
import sys
import threading
from pathlib import Path
from typing import IO, Any

from konkord.errors import KonkordError
from konkord.evidence.workers import core_free, die_with_parent
from konkord.results import files
from konkord.results.files import StagedTasks, TasksWritten, write_tasks
from konkord.stages.report.task_source import TaskSource, answer_features, tasks_of
from konkord.stages.report.task_spawn import take_worker, waiting

# Below this many comparisons the thread is as quick: starting the worker costs about half a
# second of CPU (its imports), and sending the source a tenth more. Tests make it 0.
PROCESS_MIN_COMPARISONS = 20_000


def pays(source: TaskSource) -> bool:
    """Whether `source`'s tasks are made in a worker process rather than on a thread: where
    they are many and a core is free now, or a worker started early waits for them already."""
    return source.size >= PROCESS_MIN_COMPARISONS and (waiting() or core_free())


class EarlyAnswers:
    """The run's answers sent to the worker started early (`task_spawn.start_early`) as soon
    as they are read, with a request to count their style features there (`count`); the
    tasks then go to this worker (`TasksInProcess`), and their source without the answers."""

    def __init__(self, answers: dict[tuple[str, str], Any], count: bool) -> None:
        self.worker, self.errors = take_worker()
        self._replies: list[Any] = []
        stdin, stdout = self.worker.stdin, self.worker.stdout
        self.sending = threading.Thread(
            target=_send, args=(stdin, ("answers", answers, count), False), daemon=True
        )
        self.sending.start()
        self.reading: threading.Thread | None = None
        if count:
            self.reading = threading.Thread(
                target=_receive, args=(stdout, self._replies, False), daemon=True
            )
            self.reading.start()

    def features(self) -> dict[tuple[str, str], dict[str, int]] | None:
        """The features the worker counted; None where it could not (it died, or failed:
        the caller counts them, and a dead worker fails the report when its tasks are due)."""
        if self.reading is None:
            return None
        self.reading.join()
        reply = self._replies[0] if self._replies else None
        if reply is None or reply[0] != "features":
            return None
        counted: dict[tuple[str, str], dict[str, int]] | None = reply[1]
        return counted

    def stop(self) -> None:
        """Stop the worker (its tasks are made elsewhere, or the report failed)."""
        with contextlib.suppress(ProcessLookupError):
            self.worker.kill()
        self.sending.join()
        if self.reading is not None:
            self.reading.join()
        self.worker.wait()
        self.errors.close()


class TasksInProcess(StagedTasks):
    """Tasks made and written by a worker process into the staging folder (see the module):
    the worker `early` was sent the answers by, or one taken now."""

    def __init__(
        self, path: Path, run: str, source: TaskSource, early: EarlyAnswers | None = None
    ) -> None:
        super().__init__(path, run)
        if early is None:
            self._worker, self._errors = take_worker()
        else:  # its answers are sent, and its features read: one message at a time each way
            self._worker, self._errors = early.worker, early.errors
            early.sending.join()
            if early.reading is not None:
                early.reading.join()
            source = dataclasses.replace(source, answers={})
        self._replies: list[Any] = []
        request = (
            "tasks", str(path), run, str(self.staging), files.INLINE_TASKS_MAX, source,
            early is not None,
        )  # fmt: skip
        self._threads = [
            threading.Thread(target=_send, args=(self._worker.stdin, request), daemon=True),
            threading.Thread(
                target=_receive, args=(self._worker.stdout, self._replies), daemon=True
            ),
        ]
        for thread in self._threads:
            thread.start()

    def result(self) -> TasksWritten:
        for thread in self._threads:
            thread.join()
        status = self._worker.wait()
        reply = self._replies[0] if self._replies else None
        if status == 0 and reply is not None and reply[0] == "done":
            self._errors.close()
            written: TasksWritten = reply[1]
            return written
        if reply is not None and reply[0] == "error":
            self._errors.close()
            raise reply[1]
        raise KonkordError(
            f"the report's task-file worker (pid {self._worker.pid}) ended with exit status "
            f"{status}{_last_words(self._errors)}"
        )

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._worker.kill()
        for thread in self._threads:
            thread.join()
        self._worker.wait()
        self._errors.close()
        shutil.rmtree(self.staging, ignore_errors=True)


def _send(stream: IO[bytes] | None, message: Any, last: bool = True) -> None:
    """A message pickled into the worker's input, which is then closed if it is the `last`
    (a worker that died meanwhile is reported by `result`)."""
    assert stream is not None
    with contextlib.suppress(BrokenPipeError, OSError, ValueError):
        try:
            pickle.dump(message, stream, protocol=pickle.HIGHEST_PROTOCOL)
            stream.flush()
        finally:
            if last:
                stream.close()


def _receive(stream: IO[bytes] | None, replies: list[Any], last: bool = True) -> None:
    """The worker's next reply, if it sends a whole one (the stream closed after the `last`)."""
    assert stream is not None
    with contextlib.suppress(EOFError, pickle.UnpicklingError, OSError, ValueError):
        try:
            replies.append(pickle.load(stream))
        finally:
            if last:
                stream.close()


def _last_words(errors: IO[bytes]) -> str:
    """The end of what the worker wrote on stderr, as one line, if anything."""
    errors.seek(0)
    text = errors.read()[-2000:].decode(errors="replace").strip()
    errors.close()
    return f": {text.splitlines()[-1]}" if text else ""


def _work() -> int:
    """The worker: perhaps first the answers ("answers", answers, count), with their features
    sent back if `count` (("features", features), or ("features", None) where counting them
    failed); then one request ("tasks", results path, run, staging folder, the most task JSON
    kept in the results file, source, whether its answers came first), the tasks written, one
    reply out: ("done", TasksWritten) or ("error", the exception)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(int(sys.argv[1]))
    # Everything the worker makes lives until it ends or is let go by reference counting: the
    # cyclic collector would only walk it (a quarter of a second of 2-3 s at 20 x 1,000).
    gc.disable()
    out = sys.stdout.buffer
    message = pickle.load(sys.stdin.buffer)
    answers = None
    if message[0] == "answers":
        _, answers, count = message
        if count:
            try:
                features: Any = answer_features(answers)
            except Exception:  # counted again by the report, which then raises it
                features = None
            pickle.dump(("features", features), out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()
        message = pickle.load(sys.stdin.buffer)
    _, path, run, staging, inline_max, source, answers_first = message
    if answers_first:
        source.answers = answers
    reply: tuple[str, Any]
    try:
        tasks = tasks_of(source)
        reply = ("done", write_tasks(Path(path), run, tasks, None, Path(staging), inline_max,
                                     write_beside=False))
    except Exception as exc:  # sent back whole where it pickles (an OSError: a full disk)
        try:
            pickle.dumps(exc)
            reply = ("error", exc)
        except Exception:
            reply = ("error", KonkordError(f"writing the task files failed: {exc!r}"))
    pickle.dump(reply, out, protocol=pickle.HIGHEST_PROTOCOL)
    out.flush()
    return 0


if __name__ == "__main__":
    code = _work()
    sys.stderr.flush()
    os._exit(code)  # the source's objects need no teardown
