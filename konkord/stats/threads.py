"""How many threads the batched fits use (`newton.newton_bt`, `style_boot.style_bootstrap`)
where a caller does not say: the machine's cores, at most four, or fewer while a caller
holds `threads_at_most` (`konkord report` while its task files are made by a worker process
on the other core: a second thread of the fits there only slows that process, which the
report waits for). Threads never change a bit of the results: each fit is computed alone.

May import: the standard library only (it is read before the statistics are imported).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_LIMIT: ContextVar[int | None] = ContextVar("konkord_stats_threads", default=None)


def default_threads() -> int:
    """The threads a batched fit uses where it is not told how many."""
    cores = max(1, min(4, os.cpu_count() or 1))
    limit = _LIMIT.get()
    return cores if limit is None else max(1, min(cores, limit))


@contextmanager
def threads_at_most(limit: int) -> Iterator[None]:
    """Within this block (in this thread), batched fits use at most `limit` threads."""
    token = _LIMIT.set(limit)
    try:
        yield
    finally:
        _LIMIT.reset(token)
