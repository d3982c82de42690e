"""`konkord label` as a person starts it: no terminal input, local address only, clean stop.

Runs the real command (a Streamlit server) with stdin closed and a fresh HOME (no Streamlit
credentials, so a non-headless Streamlit would stop at its first-run e-mail prompt), a
BROWSER that records the URL it is asked to open, then stops it with SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from label_fixtures import free_port, make_run
from processes import alive, all_gone

pytest.importorskip("streamlit")

pytestmark = pytest.mark.slow


def listening_addresses(port: int) -> set[str]:
    """The local addresses (hex, as in /proc/net/tcp*) with a TCP listener on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                address, hex_port = fields[1].rsplit(":", 1)
                if int(hex_port, 16) == port and fields[3] == "0A":  # 0A = LISTEN
                    found.add(address)
    return found


def children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(p) for p in text.split()]


def start(project: Path, port: int, *args: str,
          own_group: bool = False) -> tuple[subprocess.Popen[bytes], Path]:
    """`konkord label` with no terminal, a fresh HOME and a recording BROWSER; up on return."""
    home = project / "home"
    home.mkdir(exist_ok=True)
    opened = project / "opened.txt"
    browser = project / "record-url"
    browser.write_text(f'#!/bin/sh\necho "$1" >> {opened}\n')
    browser.chmod(0o755)
    env = {**os.environ, "HOME": str(home), "BROWSER": str(browser)}
    process = subprocess.Popen(
        [sys.executable, "-m", "konkord.cli", "label", "--run", "demo", "--port", str(port),
         "--labeller", "ann", *args],
        cwd=project, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=own_group,
    )  # fmt: skip
    for _ in range(600):
        if process.poll() is not None:
            assert process.stderr is not None
            raise AssertionError(f"exited {process.returncode}: {process.stderr.read()!r}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1):
                return process, opened
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError("the labelling app did not come up within a minute")


def stopped_cleanly(
    process: subprocess.Popen[bytes], signum: int, whole_group: bool = False
) -> tuple[int, list[int]]:
    """Send `signum` to `konkord label` alone (or to its whole process group, as a terminal's
    Ctrl-C does); its exit status and the server pids it had."""
    servers = children(process.pid)
    assert servers, "konkord label has no server child"
    if whole_group:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    try:
        code = process.wait(timeout=30)
    finally:
        for pid in servers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return code, servers


def test_it_comes_up_without_a_terminal_on_127_0_0_1_and_sigterm_stops_the_server(
    project: Path,
) -> None:
    make_run(project, n_tasks=3)
    port = free_port()
    process, opened = start(project, port)
    try:
        assert listening_addresses(port) == {"0100007F"}  # 127.0.0.1 only, no wildcard
        for _ in range(100):
            if opened.exists() and opened.read_text().endswith("\n"):  # the echo has written
                break
            time.sleep(0.1)
        assert opened.read_text().split() == [f"http://127.0.0.1:{port}/"]
    finally:
        code, servers = stopped_cleanly(process, signal.SIGTERM)
    assert code == 0
    assert not any(alive(pid) for pid in servers), "the Streamlit server outlived SIGTERM"
    assert not listening_addresses(port)


def test_ctrl_c_stops_the_server_and_address_is_honoured(project: Path) -> None:
    make_run(project, n_tasks=3)
    port = free_port()
    process, opened = start(project, port, "--no-browser", "--address", "0.0.0.0")
    try:
        assert listening_addresses(port) == {"00000000"}
        assert not opened.exists()
    finally:
        code, servers = stopped_cleanly(process, signal.SIGINT)
    assert code == 130
    assert not any(alive(pid) for pid in servers), "the Streamlit server outlived Ctrl-C"


def test_ctrl_c_at_a_terminal_reaches_both_and_the_command_still_ends_cleanly(
    project: Path,
) -> None:
    """A terminal's Ctrl-C goes to the server too: both stop, and the command says 130."""
    make_run(project, n_tasks=3)
    port = free_port()
    process, _ = start(project, port, "--no-browser", own_group=True)
    try:
        assert listening_addresses(port) == {"0100007F"}
    finally:
        code, servers = stopped_cleanly(process, signal.SIGINT, whole_group=True)
    assert code == 130
    assert process.stderr is not None and b"Traceback" not in process.stderr.read()
    assert not any(alive(pid) for pid in servers), "the Streamlit server outlived Ctrl-C"
    assert not listening_addresses(port)


def test_sighup_as_from_a_closed_terminal_stops_the_server_with_status_0(project: Path) -> None:
    make_run(project, n_tasks=3)
    port = free_port()
    process, _ = start(project, port, "--no-browser")
    code, servers = stopped_cleanly(process, signal.SIGHUP)
    assert code == 0
    assert not any(alive(pid) for pid in servers), "the Streamlit server outlived SIGHUP"
    assert not listening_addresses(port)


def test_kill_9_of_the_command_takes_the_server_with_it(project: Path) -> None:
    """No handler runs on SIGKILL: Linux itself tells the server (PR_SET_PDEATHSIG)."""
    make_run(project, n_tasks=3)
    port = free_port()
    process, _ = start(project, port, "--no-browser")
    servers = children(process.pid)
    assert servers, "konkord label has no server child"
    process.kill()
    process.wait()
    try:
        assert all_gone(servers, 30), "the server outlived kill -9 of its parent"
    finally:
        for pid in servers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
