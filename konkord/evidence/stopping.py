"""Ctrl-C that keeps what was paid for, and one writer per run.

The first Ctrl-C stops launching calls and waits, with a countdown on stderr, until the calls
already sent have come back and landed in the evidence log; the stage then ends as an
interruption (exit 130) and a rerun continues from there, paying for nothing twice. A second
Ctrl-C aborts at once. Killing the in-flight calls instead would throw away replies the
provider has already billed.

One writer per run: a stage that pays for calls holds an exclusive lock on
.konkord/locks/<run>.lock (beside the evidence, not in it: the log stays what is committed)
for its whole life (flock: released by the kernel when the process dies, so a kill -9 never
leaves a stale lock). A second `konkord run` or `konkord judge` on the same run is refused
before any call, naming the process that holds it. People labelling take no lock: labels are
single appends, safe side by side.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from konkord.errors import KonkordError, NotLaunched

P = ParamSpec("P")
T = TypeVar("T")


class StopRequested(NotLaunched):
    """A call was not sent because Ctrl-C asked to stop; a rerun makes it."""


class RunBusy(KonkordError):
    """Another process is paying for calls on this run."""


# Whether the current task has already launched a call: a judge's follow-up call (the
# reminder after a reply with no verdict line) belongs to a call in flight and still goes out.
_launched: ContextVar[bool] = ContextVar("konkord_launched", default=False)


@dataclass
class Stop:
    """The process's stop state: asked or not, and the calls still in flight."""

    requested: bool = False
    not_launched: int = 0
    deadlines: dict[int, float] = field(default_factory=dict)  # call id -> when it times out
    _next: int = 0

    def launch(self, timeout_s: float) -> int:
        """Register a call about to go out (refused once a stop is asked, unless this task's
        own call is already out); returns the call's id for attempt() and land()."""
        if self.requested and not _launched.get():
            self.not_launched += 1
            raise StopRequested("stopped by Ctrl-C before this call was sent")
        _launched.set(True)
        self._next += 1
        self.deadlines[self._next] = time.monotonic() + timeout_s
        return self._next

    def attempt(self, call: int, timeout_s: float) -> None:
        """A new attempt of a call: its deadline moves."""
        self.deadlines[call] = time.monotonic() + timeout_s

    def land(self, call: int) -> None:
        """The call came back (or failed for good)."""
        self.deadlines.pop(call, None)


STOP = Stop()
_depth = 0  # nested stages (a cascade runs the judge stage) share one handler


def _countdown_line(stop: Stop) -> str:
    left = max(0.0, max(stop.deadlines.values(), default=time.monotonic()) - time.monotonic())
    n = len(stop.deadlines)
    return (
        f"stopping: waiting for {n} call{'s' if n != 1 else ''} in flight to land in the log "
        f"(at most {left:.0f} s); Ctrl-C again to abort at once and lose them"
    )


@contextlib.asynccontextmanager
async def graceful_stop() -> Any:
    """Install the two-step Ctrl-C for the stage running inside (main thread only)."""
    global _depth
    if _depth:
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
        return
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    STOP.requested, STOP.not_launched = False, 0
    STOP.deadlines.clear()
    aborted = False
    countdown: asyncio.Task[None] | None = None

    async def tick() -> None:
        while True:
            print(_countdown_line(STOP), file=sys.stderr, flush=True)
            await asyncio.sleep(1.0)

    def on_sigint() -> None:
        nonlocal aborted, countdown
        if not STOP.requested:
            STOP.requested = True
            countdown = loop.create_task(tick())
        else:
            aborted = True
            if task is not None:
                task.cancel()

    installed = False
    if threading.current_thread() is threading.main_thread():
        try:
            loop.add_signal_handler(signal.SIGINT, on_sigint)
            installed = True
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    _depth = 1
    try:
        yield
    except asyncio.CancelledError:
        if aborted:
            print("aborted: calls in flight were dropped", file=sys.stderr, flush=True)
            raise KeyboardInterrupt from None
        raise
    finally:
        _depth = 0
        if countdown is not None:
            countdown.cancel()
        if installed:
            loop.remove_signal_handler(signal.SIGINT)
    if STOP.requested:
        print(
            f"stopped: every call in flight landed in the log; {STOP.not_launched} "
            f"call{'s' if STOP.not_launched != 1 else ''} not sent",
            file=sys.stderr,
            flush=True,
        )
        raise KeyboardInterrupt


@contextlib.contextmanager
def run_lock(run_dir: Path, stage: str) -> Iterator[None]:
    """Hold the run's writer lock, or refuse at once naming who holds it."""
    key = str(run_dir.resolve())
    held = _held.get()
    if key in held:  # a stage inside another (a cascade runs the judge stage): already ours
        yield
        return
    path = lock_path(run_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:  # .konkord/locks is a file, or cannot be written
        folder_is_a_file = path.parent.exists() and not path.parent.is_dir()
        why = f"{path.parent} is a file" if folder_is_a_file else exc.strerror or exc
        raise KonkordError(
            f"{path}: cannot open the run's writer lock ({why}); "
            f"{path.parent} must be a folder Konkord can write: move away what is there"
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunBusy(
                f'run "{run_dir.name}" is being written by {_holder(fd)}; wait for it to '
                f"finish (or stop it), then run this again. Nothing was called"
            ) from None
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        me = f"`konkord {stage}` (pid {os.getpid()} on {socket.gethostname()}, since {since})"
        os.ftruncate(fd, 0)
        os.pwrite(fd, me.encode() + b"\n", 0)
        token = _held.set(held | {key})
        try:
            yield
        finally:
            _held.reset(token)
    finally:
        os.close(fd)  # releases the lock


# Runs whose lock the current task holds. Per task, not per process: two stages started side
# by side in one process contend like two processes (flock is per open file), while a stage
# awaited inside another shares its lock.
_held: ContextVar[frozenset[str]] = ContextVar("konkord_held_runs", default=frozenset())


def lock_path(run_dir: Path) -> Path:
    """Where the writer lock of a run lives: runs/NAME -> .konkord/locks/NAME.lock."""
    return run_dir.parent.parent / ".konkord" / "locks" / f"{run_dir.name}.lock"


def _holder(fd: int) -> str:
    for _ in range(20):  # the holder writes its name just after taking the lock
        text = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
        if text:
            return text
        time.sleep(0.05)
    return "another konkord process"


async def unless_not_launched(call: Awaitable[None]) -> None:
    """Await a stage's per-item work; a call refused before it was sent just ends it."""
    try:
        await call
    except NotLaunched:
        return


def one_writer(
    stage: str, run_dir_of: Callable[..., Path]
) -> Callable[[Callable[P, Coroutine[Any, Any, T]]], Callable[P, Coroutine[Any, Any, T]]]:
    """Decorate a stage that pays for calls: run lock for its life, and the two-step Ctrl-C."""

    def wrap(function: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
        @functools.wraps(function)
        async def staged(*args: P.args, **kwargs: P.kwargs) -> T:
            with run_lock(run_dir_of(*args, **kwargs), stage):
                async with graceful_stop():
                    return await function(*args, **kwargs)

        return staged

    return wrap
