"""A large verdict log parsed in two processes: this one parses the first half of its lines
while a worker process (this module, run as `python -m konkord.evidence.verdict_split`) parses
the second and sends each chunk's columns back; they are merged after this half's.

Used only where it pays (`splits`): a log of 48 MB or more, and a core free for the worker
at that moment; on a busy machine the worker would only wait for a core. `konkord report`
starts the worker early (`start_early`), on the later 45% of the log, so that it parses while
the report imports the statistics and reads the answers. At 20 models x 1,000 tasks the log is
300 MB: one process takes about 2.1-2.3 s of CPU to parse it; split in halves, this process
about 1.4 s, and the two 0.4 s more than one alone. The worker reads the file this process has open
(its descriptor, inherited, read at offsets of its own), so both halves are one version of the
file, and it parses small chunks, so its memory stays a few dozen MB. Anything unusual in the
worker's half (a line that is not a record, a field of the wrong type, a worker that fails to
start or dies) makes this process parse the whole log again itself, which names the line at
fault as a one-process read does.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path
from typing import IO, Any

from konkord.evidence import parse as evidence_parse
from konkord.evidence.parse import Reader, file_version, parse_stream
from konkord.evidence.verdict_build import ColumnBuilder, decode_lines
from konkord.evidence.workers import core_free, worker_env

# Logs smaller than this are parsed here alone (starting a worker costs about 0.2 s of CPU);
# tests make it small.
SPLIT_BYTES = 48 << 20
# The part of the log an early worker takes (`start_early`). It starts about half a second
# before this process parses (its imports), but parses more slowly: each chunk's columns are
# built afresh, pickled and merged here. With both decoding by msgspec, at 60% this process
# waited about a second for it at 20 x 1,000; at 40-45% the two end together (the parse ended
# at a median 2.8-3.0 s of three against 3.2 s, on an idle machine).
EARLY_SHARE = 0.45
# Bytes the worker parses at a time: its records of a chunk are most of its memory.
WORKER_CHUNK_BYTES = 2 << 20
_WINDOW = 1 << 16


def read_split(into: ColumnBuilder, path: Path, handle: IO[bytes], size: int) -> bool:
    """The first `size` bytes of the verdict log parsed into `into`, by two processes where
    `splits` says so (or a worker `start_early` started on this version of the file is still
    at work); returns whether the last line was torn."""
    early = _take_early(path, handle, size)
    if early is not None:
        return _finish(into, path, handle, size, early)
    half = _line_start(handle.fileno(), size // 2, size) if splits(size) else None
    started = None if half is None else _start(path, handle.fileno(), half, size)
    if started is None:
        return parse_stream(path, handle, size, into)
    return _finish(into, path, handle, size, started)


class _Worker:
    """A worker parsing a log from byte `half` to `size`, and what it sent so far."""

    def __init__(self, worker: subprocess.Popen[bytes], half: int, version: tuple[int, ...]):
        assert worker.stdout is not None
        self.worker = worker
        self.half = half
        self.version = version  # (device, inode, size, modification time) when it started
        self.messages: deque[tuple[str, Any]] = deque()
        self.reader = threading.Thread(
            target=_receive, args=(worker.stdout, self.messages), daemon=True
        )
        self.reader.start()

    def stop(self) -> None:
        self.worker.kill()
        self.reader.join()
        self.worker.wait()


def _start(path: Path, fd: int, half: int, size: int) -> _Worker | None:
    """A worker started on bytes `half` to `size` of the open file `fd`; None if it cannot."""
    try:
        worker = subprocess.Popen(
            [sys.executable, "-m", __name__, str(path), str(fd), str(half), str(size - half),
             str(WORKER_CHUNK_BYTES)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            pass_fds=(fd,),
            env=worker_env(),
        )  # fmt: skip
    except OSError:
        return None
    return _Worker(worker, half, file_version(fd, size))


def _finish(
    into: ColumnBuilder, path: Path, handle: IO[bytes], size: int, started: _Worker
) -> bool:
    """The log parsed up to where the worker began, here, then the worker's columns merged
    after; parsed again whole, here, if the worker failed."""
    try:
        parse_stream(path, handle, started.half, into)  # ends where a line does: never torn
    except BaseException:
        started.worker.kill()
        raise
    finally:
        started.reader.join()
        started.worker.wait()
    messages = started.messages
    if started.worker.returncode != 0 or not messages or messages[-1][0] != "end":
        handle.seek(0)  # parsed again whole, here: the error names its line
        into.reset()
        return parse_stream(path, handle, size, into)
    _, torn = messages.pop()
    while messages:
        into.merge(messages.popleft()[1])
    return bool(torn)


# Workers started early (`start_early`), by the log's path, until `read_split` takes them up.
EARLY: dict[str, _Worker] = {}


def start_early(path: Path) -> None:
    """Start the worker on the later part of the verdict log at `path` now, where `splits`
    says so, for a command that will read the log after other work (`konkord report`: its
    imports and the answers, about a second): the worker parses while this process does that
    work, so it takes `EARLY_SHARE` of the log rather than half. `read_split` takes it up if
    the log is then still as it was (same file, size and modification time); else, or if it
    never does, the worker is stopped. A log whose last line is not whole (a crash, or a
    writer mid-line) is left to the ordinary read, which reports or repairs it."""
    import atexit
    import fcntl

    key = str(path.resolve())
    if key in EARLY:
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # never half of a record another process is writing
        try:
            size = os.fstat(fd).st_size
            whole = size > 0 and os.pread(fd, 1, size - 1) == b"\n"
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        if not whole or not splits(size):
            return
        half = _line_start(fd, int(size * (1 - EARLY_SHARE)), size)
        started = None if half is None else _start(path, fd, half, size)
    except OSError:
        return
    finally:
        os.close(fd)  # the worker has its own copy
    if started is not None:
        if not EARLY:
            atexit.register(stop_early)
        EARLY[key] = started


def _take_early(path: Path, handle: IO[bytes], size: int) -> _Worker | None:
    """The early worker on this version of the log, if there is one; one on another version
    is stopped."""
    started = EARLY.pop(str(path.resolve()), None)
    if started is None:
        return None
    if started.version == file_version(handle.fileno(), size) and started.worker.poll() in (None, 0):
        return started
    started.stop()
    return None


def stop_early() -> None:
    """Stop the early workers no read took up (the command ended another way)."""
    while EARLY:
        EARLY.popitem()[1].stop()


def splits(size: int) -> bool:
    """Whether a log of `size` bytes is parsed in two processes: when it is at least
    `SPLIT_BYTES` and a core is free for the worker now (`workers.core_free`). On a busy
    machine the worker only waits for a core, and its start and the columns it sends cost
    about 0.4 s of CPU at 300 MB."""
    return size >= SPLIT_BYTES and core_free()


def _line_start(fd: int, at: int, size: int) -> int | None:
    """Where the first line after byte `at` begins; None if none begins before `size`."""
    while at < size:
        window = os.pread(fd, min(_WINDOW, size - at), at)
        if not window:
            return None
        newline = window.find(b"\n")
        if newline >= 0:
            start = at + newline + 1
            return start if start < size else None
        at += len(window)
    return None


def _receive(stream: IO[bytes], messages: deque[tuple[str, Any]]) -> None:
    """Every message of the worker, in order, until it closes its output."""
    with stream:
        while True:
            try:
                messages.append(pickle.load(stream))
            except EOFError:
                return
            except Exception:  # cut off mid-message (the worker died): not "end"
                messages.append(("failed", None))
                return


class _Sender:
    """The worker's collector: each chunk's columns built and sent at once, nothing kept."""

    checks_fields = True  # by the builder

    def __init__(self, out: IO[bytes], base: int) -> None:
        self.out = out
        self.base = base

    def decode(self, array: bytearray) -> list[Any] | None:
        """A chunk decoded as the builder decodes it (`verdict_build.decode_lines`)."""
        return decode_lines(array)

    def add(self, records: list[dict[str, Any]], chunk: bytes, start: int) -> None:
        builder = ColumnBuilder()
        builder.add(records, chunk, self.base + start)
        pickle.dump(("chunk", builder.message()), self.out, protocol=5)

    def result(self, path: Path, torn: bool) -> bool:
        return torn


class _Pread:
    """An inherited descriptor read from `at` on, at offsets of its own (the parent's reads
    of the same open file move its offset, never these)."""

    def __init__(self, fd: int, at: int) -> None:
        self.fd = fd
        self.at = at

    def read(self, size: int, /) -> bytes:
        data = os.pread(self.fd, size, self.at)
        self.at += len(data)
        return data


def _work(argv: list[str]) -> int:
    """The worker: parse `size` bytes from `start` of the open file `fd`, `chunk` bytes at a
    time, and send them."""
    path, fd, start, size, chunk = Path(argv[0]), *map(int, argv[1:5])
    evidence_parse.CHUNK_BYTES = chunk
    out = sys.stdout.buffer
    reader: Reader = _Pread(fd, start)
    torn = parse_stream(path, reader, size, _Sender(out, start))
    pickle.dump(("end", torn), out, protocol=5)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_work(sys.argv[1:]))
