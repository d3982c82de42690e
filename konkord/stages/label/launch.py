"""Start the labelling app's Streamlit server and own it: local address, no prompts, clean stop.

Streamlit asks for an e-mail address on its first run when it is not headless, and with no
terminal input it then exits 255; so the server always runs headless and `konkord label` opens
the browser itself once the server answers. It listens on 127.0.0.1 unless told otherwise, and
stops with `konkord label`: SIGTERM, SIGHUP and Ctrl-C all stop the server before the command
returns, and on Linux the server is also told to die if its parent is killed outright.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import urllib.request
import webbrowser
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

APP = Path(__file__).resolve().parent / "app.py"
STOP_GRACE_S = 5.0
PR_SET_PDEATHSIG = 1


def streamlit_command(address: str, port: int, app_args: Sequence[str]) -> list[str]:
    """The `streamlit run` command line serving the app on `address:port`, headless."""
    return [
        sys.executable, "-m", "streamlit", "run", str(APP),
        "--server.address", address,
        "--server.port", str(port),
        "--server.headless", "true",
        "--server.fileWatcherType", "none",
        "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "minimal",
        "--",
        *app_args,
    ]  # fmt: skip


def app_url(address: str, port: int) -> str:
    """The address a browser on this machine opens (the wildcard addresses mean "here")."""
    host = "127.0.0.1" if address in ("", "0.0.0.0", "::") else address
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/"


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGTERM it when `konkord label` dies (kill -9)."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}_stcore/health", timeout=1):
            return True
    except OSError:
        return False


def stop(server: subprocess.Popen[bytes]) -> int:
    """SIGTERM the server, give it a few seconds to close, then SIGKILL; its exit status."""
    if server.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            server.terminate()
        try:
            server.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            server.kill()
    return server.wait()


STOP_STATUS = {signal.SIGTERM: 0, signal.SIGHUP: 0, signal.SIGINT: 130}
POLL_S = 0.2


class _StopSignals:
    """SIGTERM, SIGHUP and Ctrl-C, noted by handlers that do nothing else, for serve's loop to
    act on. A handler that raised could land anywhere: in an at-fork hook, which swallowed the
    exception, so the command ran on; or just after subprocess took its wait lock, before the
    `try` that gives it back, so stopping the server then waited for that lock for ever. The
    signal also writes to a pipe (`signal.set_wakeup_fd`), so `wait` ends the moment one comes.
    """

    def __init__(self) -> None:
        self.received: list[int] = []

    def __enter__(self) -> _StopSignals:
        self._wakeup_read, self._wakeup_write = os.pipe()
        os.set_blocking(self._wakeup_write, False)
        self._previous_wakeup = signal.set_wakeup_fd(self._wakeup_write, warn_on_full_buffer=False)
        self._previous = {s: signal.signal(s, self._note) for s in STOP_STATUS}
        return self

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)

    def wait(self, seconds: float) -> None:
        """Sleep until a stop signal comes or `seconds` pass."""
        if select.select([self._wakeup_read], [], [], seconds)[0]:
            os.read(self._wakeup_read, 512)

    def status(self) -> int:
        """The command's exit status for the first signal received."""
        return STOP_STATUS[signal.Signals(self.received[0])]

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(self._previous_wakeup)
        os.close(self._wakeup_read)
        os.close(self._wakeup_write)


def _open_browser_in_background(url: str) -> None:
    """Open `url` from a daemon thread: a BROWSER command may stay in the foreground until its
    window closes (webbrowser waits for it), and that must not hold up a stop."""
    threading.Thread(target=webbrowser.open, args=(url,), name="open-browser", daemon=True).start()


def serve(command: Sequence[str], url: str, open_browser: bool) -> int:
    """Run the server until it exits or `konkord label` is told to stop; the exit status.

    Stopping by a signal is a normal end (0 for SIGTERM/SIGHUP, 130 for Ctrl-C); the server
    is never left running behind the command, and is stopped outside any signal handler."""
    with _StopSignals() as signals:
        server: subprocess.Popen[bytes] | None = None
        try:
            server = subprocess.Popen(
                list(command), stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )  # fmt: skip
            opened = not open_browser
            while not signals.received and server.poll() is None:
                signals.wait(POLL_S)
                if not opened and not signals.received and server.poll() is None and _answers(url):
                    opened = True
                    _open_browser_in_background(url)
            return signals.status() if signals.received else server.returncode
        finally:
            if server is not None:
                stop(server)
