"""A stop signal always stops `konkord label`, wherever in the code it lands.

`serve` runs in a child interpreter with a stand-in server (a Python process that sleeps, or a
small HTTP server that answers the health check), and the signal is made to land at the moments
where a handler that raised went wrong: inside an at-fork hook, which swallows the exception
(the signal was lost and the command ran on), and just after the standard library took a lock,
before its `try` (the lock stayed taken and stopping the server waited on it for ever). Each
child must end with the status for its signal and no server left behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from label_fixtures import free_port

# The child: run serve() on a stand-in server, then say its status and which children it left.
SERVE = """
import os, signal, subprocess, sys
from pathlib import Path
from konkord.stages.label.launch import serve
{prepare}
sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
command = {command}
code = serve(command, "http://127.0.0.1:{port}/", {open_browser})
me = os.getpid()
print(code, Path(f"/proc/{{me}}/task/{{me}}/children").read_text().split(), flush=True)
"""

# A signal that lands inside an at-fork hook (the logging module registers one) while the
# server is being started.
SIGNAL_IN_AT_FORK_HOOK = """
os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.{signal}))
"""

# A signal that lands the moment the server's wait takes its lock, before the `try` that would
# give it back: the only way to put it exactly there is to send it from the lock itself.
SIGNAL_AS_THE_WAIT_TAKES_ITS_LOCK = """
class SignalsOnceTaken:
    def __init__(self, lock):
        self.lock, self.signalled = lock, False
    def acquire(self, blocking=True, timeout=-1):
        taken = self.lock.acquire(blocking, timeout)
        if taken and not self.signalled:
            self.signalled = True
            os.kill(os.getpid(), signal.{signal})
        return taken
    def release(self):
        self.lock.release()
    def __enter__(self):
        return self.acquire()
    def __exit__(self, *exc):
        self.release()

class Server(subprocess.Popen):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._waitpid_lock = SignalsOnceTaken(self._waitpid_lock)

subprocess.Popen = Server
"""

# Answers every GET with 200, as Streamlit's health check does once the app is up.
HEALTHY_SERVER = """
import http.server, sys
class Healthy(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Healthy).serve_forever()
"""

# serve() started and stopped again and again, each time by a SIGTERM that another process sends
# 0-10 ms after it starts the server (while it forks, then in the first waits); the statuses.
MANY_MOMENTS = """
import os, random, subprocess, sys
from konkord.stages.label.launch import serve
sender = subprocess.Popen(
    [sys.executable, "-c", "import os, sys, time\\n"
     "for delay in sys.stdin: time.sleep(float(delay)); os.kill(int(sys.argv[1]), 15)",
     str(os.getpid())],
    stdin=subprocess.PIPE, text=True,
)
sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
moments = random.Random(0)
start_server = subprocess.Popen

def start_and_send(*args, **kwargs):  # serve's handlers are in place by now
    sender.stdin.write(f"{{moments.uniform(0, 0.01)}}\\n")
    sender.stdin.flush()
    return start_server(*args, **kwargs)

subprocess.Popen = start_and_send
for _ in range({times}):
    print(serve(sleeper, "http://127.0.0.1:9/", False), flush=True)
sender.stdin.close()
sender.wait()
"""

STATUS = {"SIGTERM": 0, "SIGHUP": 0, "SIGINT": 130}


def serve_in_child(
    prepare: str = "", command: str = "sleeper", port: int = 9, open_browser: bool = False,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    script = SERVE.format(prepare=prepare, command=command, port=port, open_browser=open_browser)
    return subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def ended(child: subprocess.Popen[str]) -> tuple[str, str]:
    """The child's output once it ends; a child still running after 30 s is a hang, killed."""
    try:
        return child.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        err = child.communicate()[1]
        raise AssertionError(f"serve did not end 30 s after the signal:\n{err}") from None


@pytest.mark.parametrize("name", sorted(STATUS))
def test_a_signal_inside_an_at_fork_hook_still_stops_it(name: str) -> None:
    out, err = ended(serve_in_child(SIGNAL_IN_AT_FORK_HOOK.format(signal=name)))
    assert out.split() == [str(STATUS[name]), "[]"], err
    assert "Exception ignored" not in err


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="CPython's Popen lock")
@pytest.mark.parametrize("name", sorted(STATUS))
def test_a_signal_as_the_server_wait_takes_its_lock_does_not_deadlock(name: str) -> None:
    out, err = ended(serve_in_child(SIGNAL_AS_THE_WAIT_TAKES_ITS_LOCK.format(signal=name)))
    assert out.split() == [str(STATUS[name]), "[]"], err


def test_a_signal_while_the_browser_command_still_runs_stops_it(tmp_path: Path) -> None:
    """A BROWSER command that stays in the foreground (a browser's first window) must not
    hold up the stop."""
    port = free_port()
    started = tmp_path / "browser-started"
    browser = tmp_path / "browser-in-foreground"
    browser.write_text(f"#!/bin/sh\necho $$ > {started}.part\nmv {started}.part {started}\n"
                       "exec sleep 120 >/dev/null 2>&1\n")
    browser.chmod(0o755)
    command = f"[sys.executable, '-c', {HEALTHY_SERVER!r}, '{port}']"
    env = {**os.environ, "BROWSER": str(browser)}
    child = serve_in_child(command=command, port=port, open_browser=True, env=env)
    for _ in range(300):
        if started.exists() or child.poll() is not None:
            break
        time.sleep(0.1)
    assert started.exists(), "the browser command was never run"
    try:
        child.send_signal(signal.SIGTERM)
        out, err = ended(child)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(started.read_text()), signal.SIGKILL)
    assert out.split()[0] == "0", err


@pytest.mark.slow
def test_sigterm_from_another_process_at_many_moments_always_stops_it() -> None:
    """The old handler, which raised, hung here within a few hundred starts (the lock)."""
    times = 500
    child = subprocess.Popen(
        [sys.executable, "-c", MANY_MOMENTS.format(times=times)], stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        out, err = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
    assert out.split() == ["0"] * times, f"{len(out.split())} stops ended, then:\n{err}"
