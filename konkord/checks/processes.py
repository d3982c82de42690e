"""Watching the two processes of a check: capped output, a deadline, and kills that stick."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
from pathlib import Path


def read_outputs(
    procs: list[subprocess.Popen[bytes]], until: subprocess.Popen[bytes],
    output_bytes: int, deadline: float,
) -> tuple[list[bytes], bool, bool]:
    """Each process's output until `until` closes its own, or a limit is hit.

    The output cap counts every process's bytes together; (outputs, timed_out, exceeded)."""
    chunks: dict[int, list[bytes]] = {p.pid: [] for p in procs}
    size = 0
    timed_out = exceeded = False
    with selectors.DefaultSelector() as selector:
        for proc in procs:
            assert proc.stdout is not None
            selector.register(proc.stdout, selectors.EVENT_READ, proc.pid)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in selector.select(timeout=min(remaining, 1.0)):
                data = os.read(key.fd, 65536)
                if not data:
                    selector.unregister(key.fileobj)
                    continue
                chunks[key.data].append(data[: max(0, output_bytes - size)])
                size += len(data)
            if size > output_bytes:
                exceeded = True
                break
            if until.pid not in {k.data for k in selector.get_map().values()}:
                break
    return [b"".join(chunks[p.pid]) for p in procs], timed_out, exceeded


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the whole process group; bwrap's --die-with-parent takes the sandbox down with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def read_pipe(fd: int, limit: int = 65536) -> bytes:
    """What is waiting in a pipe, without blocking on writers that are still alive."""
    os.set_blocking(fd, False)
    data = b""
    try:
        while len(data) <= limit and (chunk := os.read(fd, 65536)):
            data += chunk
    except BlockingIOError:
        pass
    return data


def wait_for_sandbox_end(info: bytes, program_dir: Path) -> None:
    """Make sure nothing of the sandbox is alive when the run returns.

    bwrap reports its exit as soon as the main program ends; the sandbox's init (the
    `child-pid` of --info-fd) is killed a moment later and takes every process of the pid
    namespace with it. Killing and waiting for it here makes that synchronous. Before a
    signal is sent, the pid is confirmed to be this sandbox's (its command line names this
    run's private directory), so a forged or reused pid is never killed."""
    try:
        pid = int(json.JSONDecoder().raw_decode(info.decode().lstrip())[0]["child-pid"])
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError):
        return
    marker = str(program_dir).encode()
    for _ in range(500):  # at most about 5 s
        try:
            state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, IndexError):
            return
        if state in (b"Z", b"X") or marker not in cmdline:
            return  # a dead init has already taken its namespace down (zap_pid_ns_processes)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def read_status(fd: int) -> dict[str, object] | None:
    """The harness's JSON verdict, or None when it never got to write it."""
    data = read_pipe(fd)
    if len(data) > 65536:
        return None
    try:
        status = json.loads(data)
    except ValueError:
        return None
    return status if isinstance(status, dict) else None
