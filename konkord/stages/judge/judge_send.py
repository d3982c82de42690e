"""How a judge stage's calls go out and its verdicts come back, with memory bounded by design.

Live, a fixed pool of `concurrency` workers takes the calls one after another: what waits is
the list of items, never a coroutine per call. Through a batch, every call is sent at once
(the batch needs them all) under a small tag, its index in the list and its message hash, and
the replies are read as they land: what a waiting call holds is its key in the door and that
tag, not a coroutine, its task or its messages; replies landed and not yet taken are at most
`Replies.limit` (and a few hundred a batch), however many batches land together. Either way
each verdict is appended as it comes, with those landing together sharing one write and one
fsync, off the calls' path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from konkord.errors import KonkordError, NotLaunched
from konkord.evidence.log import EvidenceLog, Record
from konkord.providers.batch import BatchClient
from konkord.providers.calls import CallResult
from konkord.providers.replies import Replies
from konkord.stages.judge.judge_call import (
    JudgeItem,
    ask_judge,
    judge_messages,
    judge_record,
    message_sha,
    parse_first,
    reminder_messages,
    reminder_not_sent,
    wants_reminder,
)
from konkord.stages.judge.judging import Judging

Key = tuple[str, str, str, str, str]
Judged = tuple[JudgeItem, Record, list[CallResult]]  # an item, its record, the calls it took
# A batched call's tag: its item's index, the hash of the message sent, and the first reply
# when this is the reminder.
Tag = tuple[int, str, CallResult | None]
SEND_SLICE = 256  # calls sent between two turns of the event loop (submissions, Ctrl-C)
WRITE_SLICE = 2000  # batched replies turned into records and written at a time


class VerdictWriter:
    """Appends verdicts as they land, without holding up the calls, then counts them.

    One writer task at a time takes every verdict queued so far and appends them with one write
    and one fsync, in a thread (`EvidenceLog.append_many`); verdicts that land meanwhile go out
    together in its next write. A verdict is counted (`land`) once it is on disk. At 380,000
    calls, a task, a gather and a shielded future per verdict were a fifth of the stage's own
    work; a list append is what a verdict costs now.
    """

    def __init__(self, log: EvidenceLog, land: Callable[[list[Judged]], None]) -> None:
        log.path("verdicts")  # refuse an unknown stream now, not in the writer
        self.log = log
        self.land = land
        self.pending: list[Judged] = []
        self.writer: asyncio.Task[None] | None = None
        self.error: KonkordError | None = None

    def add(self, judged: list[Judged]) -> None:
        """Queue these verdicts for the evidence (raises an earlier write's failure)."""
        self.check()
        if judged:
            self.pending += judged
            if self.writer is None or self.writer.done():
                self.writer = asyncio.ensure_future(self._write())

    async def _write(self) -> None:
        while self.pending:
            batch, self.pending = self.pending, []
            try:
                records = [record for _, record, _ in batch]
                await asyncio.to_thread(self.log.append_many, "verdicts", records)
            except OSError as exc:
                self.error = self.error or KonkordError(
                    f"{self.log.path('verdicts')}: cannot write ({exc.strerror or exc}); the "
                    "verdicts saved so far are kept: fix this and run the same command again"
                )
                self.pending.clear()
                return
            self.land(batch)

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    async def drain(self) -> None:
        """Wait until every verdict queued is on disk (raises a write's failure)."""
        while self.writer is not None and not self.writer.done():
            await self.writer
        self.check()


async def judge_live(
    judging: Judging, todo: list[JudgeItem], fresh: set[Key], writer: VerdictWriter
) -> None:
    """Ask every item through `judging.concurrency` workers; `fresh` keys skip the cache."""
    spec, client, settings, fhash = (
        judging.spec, judging.client, judging.settings, judging.frame_hash
    )
    items = iter(todo)

    async def worker() -> None:
        for item in items:
            writer.check()
            try:
                # Its own task, so its own context: after Ctrl-C, a call already out may still
                # send its reminder (`STOP.launch`), the worker's next item may not.
                record, calls = await asyncio.ensure_future(
                    ask_judge(spec, item, client, settings, fhash, use_cache=item.key not in fresh)
                )
            except NotLaunched:
                continue  # --max-cost or Ctrl-C: not sent; a rerun asks it
            writer.add([(item, record, calls)])

    workers = [worker() for _ in range(min(max(1, judging.concurrency), len(todo)))]
    outcomes = await asyncio.gather(*workers, return_exceptions=True)
    # A failing worker (a dead call process, a write that failed) ends alone: the others finish
    # the calls they hold, so that what was paid for is written before the stage fails.
    await writer.drain()
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


async def judge_by_batch(
    judging: Judging,
    client: BatchClient,
    todo: list[JudgeItem],
    fresh: set[Key],
    writer: VerdictWriter,
) -> None:
    """Send every item to the batch client (`judging`'s) under its tag, then turn replies into
    verdicts as they land (sending the reminder where a reply has no verdict line)."""
    replies: Replies[Tag] = Replies()
    try:
        await _send_all(judging, client, todo, fresh, replies)
        await _take(judging, client, todo, fresh, writer, replies)
    finally:
        replies.close()  # a batch still being collected no longer waits for this stage


async def _send_all(
    judging: Judging,
    client: BatchClient,
    todo: list[JudgeItem],
    fresh: set[Key],
    replies: Replies[Tag],
) -> None:
    """Send every item under its tag: its index in `todo` and its message's hash."""
    for index, item in enumerate(todo):
        messages = judge_messages(judging.spec, item)
        tag: Tag = (index, message_sha(messages[1]["content"]), None)
        try:
            await client.send(
                replies, tag, item.judge, messages, judging.settings, item.key not in fresh
            )
        except NotLaunched:
            continue  # --max-cost or Ctrl-C: not sent; a rerun asks it
        del messages
        if index % SEND_SLICE == SEND_SLICE - 1:
            await asyncio.sleep(0)


async def _take(
    judging: Judging,
    client: BatchClient,
    todo: list[JudgeItem],
    fresh: set[Key],
    writer: VerdictWriter,
    replies: Replies[Tag],
) -> None:
    """Turn replies into verdicts as they land, a slice at a time (see judge_by_batch)."""
    spec, settings, fhash = judging.spec, judging.settings, judging.frame_hash
    failure: BaseException | None = None
    # After a batch fails, what has landed is still written; nothing more is waited for.
    while replies.waiting and (failure is None or replies.ready):
        judged: list[Judged] = []
        # A slice at a time, each on disk before the next is read: a batch of 50,000 replies
        # lands at once, and its records built and encoded together would take hundreds of MB.
        for (index, sha, first), outcome in await replies.take(WRITE_SLICE):
            item = todo[index]
            if isinstance(outcome, NotLaunched):  # Ctrl-C while the batch ran: asked later
                if first is not None:
                    judged.append((item, reminder_not_sent(item, fhash, sha, first, outcome), [first]))
                continue
            if isinstance(outcome, BaseException):  # the batch failed: what landed is kept
                failure = failure or outcome
                continue
            if first is not None:
                parsed = parse_first(first)
                judged.append(
                    (item, judge_record(item, settings, fhash, sha, [first, outcome], parsed),
                     [first, outcome])
                )
                continue
            parsed = parse_first(outcome)
            if not wants_reminder(outcome, parsed):
                judged.append(
                    (item, judge_record(item, settings, fhash, sha, [outcome], parsed), [outcome])
                )
                continue
            try:
                await client.send(
                    replies, (index, sha, outcome), item.judge,
                    reminder_messages(spec, item, outcome), settings, item.key not in fresh,
                )
            except NotLaunched as exc:
                judged.append((item, reminder_not_sent(item, fhash, sha, outcome, exc), [outcome]))
        writer.add(judged)
        await writer.drain()
    if failure is not None:
        raise failure
