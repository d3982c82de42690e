"""Batch mode's bookkeeping: requests waiting for replies, the spool files they are written to,
and the tally of a collected batch (failures, cost, replies cached in bulk)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from konkord.configuration.call_settings import CallSettings
from konkord.providers.batch_format import Route
from konkord.providers.calls import CallResult, ResponseCache


class Waiter(Protocol):
    """Who waits for a request's reply: a future (`complete`), or a tag (`send`)."""

    def done(self) -> bool: ...

    def set_result(self, result: CallResult, /) -> None: ...

    def set_exception(self, exc: BaseException, /) -> None: ...


@dataclass(slots=True)
class PendingRequest:
    """One distinct request waiting for its reply; callers asking the same thing share it.

    Its text is on disk (`spool`, `offset`, `length`: read back only to ask it again)."""

    key: str
    model: str
    settings: CallSettings
    waiters: list[Waiter]
    spool: Path
    offset: int
    length: int
    attempts: int = 0


@dataclass
class Spool:
    """A JSONL file of requests being written for one route; sealed when full or quiet."""

    route: Route
    path: Path
    requests: dict[str, PendingRequest] = field(default_factory=dict)
    size: int = 0
    handle: Any = None

    def write(self, line: bytes) -> int:
        if self.handle is None:
            self.handle = open(self.path, "ab")  # noqa: SIM115 (closed in seal)
        offset = self.size
        self.handle.write(line)
        self.size += len(line)
        return offset

    def seal(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


class Tally:
    """What a collected batch gave: failures, cost, and the replies to cache (in bulk)."""

    def __init__(self, cache: ResponseCache | None) -> None:
        self.cache = cache
        self.seen: set[str] = set()
        self.failed = 0
        self.cost: float | None = 0.0
        self._pending: list[tuple[str, CallResult]] = []

    def add(self, request: PendingRequest, result: CallResult) -> CallResult:
        self.seen.add(request.key)
        result.attempts = request.attempts + 1
        if not result.ok:
            self.failed += 1
            return result
        if self.cost is not None:
            self.cost = None if result.cost_usd is None else self.cost + result.cost_usd
        if self.cache is not None:
            self._pending.append((request.key, result))
            if len(self._pending) >= 2000:
                self.flush()
        return result

    def flush(self) -> None:
        if self.cache is not None and self._pending:
            self.cache.put_many(self._pending)
        self._pending = []
