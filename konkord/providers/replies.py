"""Calls sent without a coroutine waiting on each: replies come back under a small tag.

A stage that sends 100,000 judge calls to a batch cannot keep one coroutine per call waiting
(each held its task, its frames and a future: about 3 KB a call, 340 MB in all). It sends each
call with a tag instead (an index into its own list, a hash) and reads the replies as they land
from one `Replies`; the door keeps, per waiting call, its key and a `Tagged` waiter. Budget holds
are settled as each reply lands, as `complete()` settles them.

Replies wait here only until the stage takes them, and at most `limit` at a time: a door
collecting several batches at once waits for `room()` before handing back more, so the replies
in memory do not grow with the number of batches landing together (unpaced, 30,000 calls in
batches of 5,000 had 11,300 replies waiting at once, 10,000 calls 2,500).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Generic, TypeVar

from konkord.providers.calls import CallResult

if TYPE_CHECKING:
    from konkord.providers.budget import Budget, Hold

T = TypeVar("T")
READY_LIMIT = 10_000  # replies landed and not taken, beyond which a collecting batch waits
Outcome = CallResult | BaseException  # the reply, or why there is none (Ctrl-C, a batch error)


class Replies(Generic[T]):
    """Replies to calls sent under tags, in the order they land."""

    def __init__(self, limit: int | None = None) -> None:
        self._ready: deque[tuple[T, Outcome]] = deque()
        self._landed = asyncio.Event()
        self._taken = asyncio.Event()
        self.limit = READY_LIMIT if limit is None else limit  # beyond it, `room()` waits
        self.closed = False  # the stage takes no more: `room()` no longer waits
        self.waiting = 0  # calls sent whose replies have not been taken yet
        self.budget: Budget | None = None  # the door's cap, settled as each reply lands

    def put(self, tag: T, outcome: Outcome) -> None:
        """One reply (or the exception standing for it) has landed."""
        self._ready.append((tag, outcome))
        self._landed.set()

    @property
    def ready(self) -> int:
        """Replies landed and not taken yet."""
        return len(self._ready)

    async def take(self, most: int | None = None) -> list[tuple[T, Outcome]]:
        """The replies landed so far, up to `most` (at least one: waits for it)."""
        while not self._ready:
            self._landed.clear()
            await self._landed.wait()
        count = len(self._ready) if most is None else min(most, len(self._ready))
        landed = [self._ready.popleft() for _ in range(count)]
        self.waiting -= count
        self._taken.set()
        return landed

    async def room(self) -> None:
        """Wait until fewer than `limit` replies are landed and not taken (or it is closed)."""
        while len(self._ready) >= self.limit and not self.closed:
            self._taken.clear()
            await self._taken.wait()

    def close(self) -> None:
        """The stage takes no more replies: whoever waits for room goes on."""
        self.closed = True
        self._taken.set()


class Tagged(Generic[T]):
    """The waiter a door keeps for one call sent under a tag (a future's three methods)."""

    __slots__ = ("hold", "replies", "tag")

    def __init__(self, replies: Replies[T], tag: T, hold: Hold | None) -> None:
        self.replies: Replies[T] | None = replies
        self.tag = tag
        self.hold = hold

    def done(self) -> bool:
        return self.replies is None

    def set_result(self, result: CallResult) -> None:
        replies = self._end()
        if replies is None:
            return
        settle(replies.budget, self.hold, result)
        replies.put(self.tag, result)

    def set_exception(self, exc: BaseException) -> None:
        replies = self._end()
        if replies is None:
            return
        settle(replies.budget, self.hold, None)
        replies.put(self.tag, exc)

    def _end(self) -> Replies[T] | None:
        replies, self.replies = self.replies, None
        return replies


def settle(budget: Budget | None, hold: Hold | None, result: CallResult | None) -> None:
    """A call's budget hold released as its reply lands (at what it cost; a cached or failed
    reply costs nothing), or as it is given up (None: the hold itself is counted)."""
    if budget is None or hold is None:
        return
    if result is None:
        budget.settle(hold, None)
        return
    paid = result.ok and not result.cached
    budget.settle(hold, result.cost_usd if paid else 0.0, (result.tokens_in or 0) if paid else None)
