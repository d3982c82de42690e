"""Whether processes a test started are still running, read from /proc (Linux)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether `pid` runs: it exists and is neither a zombie nor dead."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def all_gone(pids: Iterable[int], seconds: float) -> bool:
    """Whether every one of `pids` has stopped running within `seconds`."""
    pids = list(pids)
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
