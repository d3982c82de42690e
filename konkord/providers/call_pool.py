"""Model calls made in worker processes, so that litellm's own work per call runs on every core.

litellm costs about 1.9 ms of CPU a call (its request path and its logging, under one GIL): one
process cannot make more than about 500 calls a second however fast the server is. A
`ModelClient` with `processes` > 1 keeps everything else where it was (the cache, the budget,
retries and backoff, Ctrl-C's bookkeeping, and the stage's parsing and evidence, which only
the parent writes) and sends each attempt's litellm arguments to the least busy of its worker
processes (`konkord.providers.call_worker`), which calls litellm and sends back the
`CallResult`, or the failure read as plain data (`RemoteCallError`: litellm's exception
objects need not pickle). One frame each way a call, a 4-byte length and a pickle; the
frames of one turn of the event loop go out in one write.

The workers are fresh interpreters (spawned, never forked: litellm starts threads), ignore
Ctrl-C (the parent decides what lands), and die with the parent: PR_SET_PDEATHSIG, and they
exit as soon as their input pipe closes. A worker that dies under the stage breaks the pool:
every call waiting on it and every later one fails with `PoolBroken`, naming the worker, its
exit code and the end of what it wrote on stderr.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import pickle
import struct
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import konkord
from konkord.configuration.runs_config import Price
from konkord.errors import KonkordError
from konkord.providers.calls import CallResult
from konkord.providers.loading import RemoteCallError

FRAME = struct.Struct("!I")  # the length of the pickle that follows
WORKER_MODULE = "konkord.providers.call_worker"
PARENT_ENV = "KONKORD_CALL_POOL_PARENT"  # the parent's pid: a worker whose parent is gone exits
STDERR_LINES = 20  # the end of a dead worker's stderr kept for its error
READ_SIZE = 1 << 18


class PoolBroken(KonkordError):
    """A worker process of the call pool died: the stage stops, what is on disk stays."""


def frame(payload: Any) -> bytes:
    """One message on a pool pipe."""
    blob = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    return FRAME.pack(len(blob)) + blob


async def read_frame(stream: asyncio.StreamReader) -> Any:
    """The next message on a pool pipe (IncompleteReadError at its end)."""
    head = await stream.readexactly(FRAME.size)
    return pickle.loads(await stream.readexactly(FRAME.unpack(head)[0]))


async def read_frames(stream: asyncio.StreamReader) -> AsyncIterator[list[Any]]:
    """The messages on a pool pipe, as many at a time as have arrived whole (one read and
    one wake-up for all the replies that landed together, not two awaits a message)."""
    buffer = bytearray()
    while chunk := await stream.read(READ_SIZE):
        buffer += chunk
        out: list[Any] = []
        at, end = 0, len(buffer)
        while end - at >= FRAME.size:
            size = FRAME.unpack_from(buffer, at)[0]
            if end - at - FRAME.size < size:
                break
            out.append(pickle.loads(buffer[at + FRAME.size : at + FRAME.size + size]))
            at += FRAME.size + size
        del buffer[:at]
        if out:
            yield out


class Outbox:
    """Frames for one pipe, written together once per turn of the event loop."""

    def __init__(self, write: Callable[[bytes], object]) -> None:
        self.write = write
        self.frames: list[bytes] = []

    def put(self, payload: Any) -> None:
        if not self.frames:
            asyncio.get_running_loop().call_soon(self.flush)
        self.frames.append(frame(payload))

    def flush(self) -> None:
        frames, self.frames = self.frames, []
        if frames:
            self.write(b"".join(frames))


class _Worker:
    def __init__(self, number: int, process: asyncio.subprocess.Process) -> None:
        self.number = number
        self.process = process
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        self.stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self.tasks: list[asyncio.Task[None]] = []
        stdin = process.stdin
        assert stdin is not None
        self.outbox = Outbox(stdin.write)

    def send(self, payload: Any) -> None:
        self.outbox.put(payload)


class CallPool:
    """`processes` worker processes making litellm calls for one event loop (started at the
    first call, stopped by `close`)."""

    def __init__(self, processes: int, prices: dict[str, Price]) -> None:
        self.processes = processes
        self.prices = prices
        self.workers: list[_Worker] = []
        self.broken: PoolBroken | None = None
        self._starting: asyncio.Future[None] | None = None
        self._closing = False
        self._next_id = 0

    async def call(self, kwargs: dict[str, Any], attempts: int) -> CallResult:
        """One attempt of a call in a worker: its result, or RemoteCallError for a failure."""
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        await asyncio.shield(self._starting)
        if self.broken is not None:
            raise self.broken
        worker = min(self.workers, key=lambda w: len(w.waiting))
        self._next_id += 1
        call_id = self._next_id
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        worker.waiting[call_id] = waiter
        try:
            worker.send((call_id, kwargs, attempts))
            reply = await waiter
        finally:
            worker.waiting.pop(call_id, None)
        if isinstance(reply, CallResult):
            return reply
        kind, text, retry_after = reply
        raise RemoteCallError(kind, text, retry_after)

    async def _start(self) -> None:
        env = {**os.environ, PARENT_ENV: str(os.getpid())}
        # the workers import the konkord this process runs, wherever sys.path found it
        home = str(Path(konkord.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(
            [home, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
        )
        for number in range(self.processes):
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", WORKER_MODULE,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
            )
            worker = _Worker(number, process)
            worker.send(self.prices)
            worker.tasks = [
                asyncio.ensure_future(self._drain_stderr(worker)),
                asyncio.ensure_future(self._read(worker)),
            ]
            self.workers.append(worker)

    async def _drain_stderr(self, worker: _Worker) -> None:
        stream = worker.process.stderr
        assert stream is not None
        async for line in stream:  # read on, or a chatty worker would block on a full pipe
            worker.stderr.append(line.decode(errors="replace").rstrip())

    async def _read(self, worker: _Worker) -> None:
        stream = worker.process.stdout
        assert stream is not None
        try:
            async for replies in read_frames(stream):
                for call_id, reply in replies:
                    waiter = worker.waiting.pop(call_id, None)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(reply)
        except ConnectionError:
            pass
        if self._closing:
            return
        code = await worker.process.wait()
        await worker.tasks[0]  # the rest of its stderr
        said = " | ".join(line for line in worker.stderr if line.strip())[-1500:]
        error = PoolBroken(
            f"call worker process {worker.number + 1} of {self.processes} (pid "
            f"{worker.process.pid}) died with exit code {code}"
            + (f": {said}" if said else "")
            + "; the calls it held are lost, the evidence saved so far is kept: "
            "run the same command again"
        )
        self.broken = self.broken or error
        for waiter in worker.waiting.values():
            if not waiter.done():
                waiter.set_exception(self.broken)
        worker.waiting.clear()

    async def close(self) -> None:
        """Stop the workers: their input pipes close and they exit (killed after 10 s)."""
        self._closing = True
        if self._starting is None:
            return
        with contextlib.suppress(Exception):  # a failed start leaves what started to stop
            await self._starting
        for worker in self.workers:
            if worker.process.stdin is not None:
                worker.process.stdin.close()
        for worker in self.workers:
            try:
                await asyncio.wait_for(worker.process.wait(), 10)
            except TimeoutError:
                worker.process.kill()
                await worker.process.wait()
            for task in worker.tasks:
                task.cancel()
            await asyncio.gather(*worker.tasks, return_exceptions=True)
            for waiter in worker.waiting.values():
                waiter.cancel()
        self.workers.clear()
