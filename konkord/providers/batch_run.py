"""One batch, start to end: a sealed spool uploaded, the batch created (on record before and
after), polled until it ends, and its output and error files read back line by line, each reply
handed to whoever waits for it.

Kept apart from batch.py (the client that queues requests and hands replies back) along the
seam between what a process asks and what one provider batch does.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from konkord.evidence.log import EvidenceLog, Record, now_iso
from konkord.evidence.stopping import STOP, StopRequested
from konkord.providers.batch_api import BatchApi
from konkord.providers.batch_format import STREAM, TERMINAL, Route, safe_base
from konkord.providers.batch_spool import PendingRequest, Spool, Tally
from konkord.providers.calls import CallResult, ResponseCache

PACE_LINES = 500  # replies handed back between two waits for the stage to take them


@dataclass
class BatchRun:
    """What one batch needs from its client: the API, where to record it, how to read and hand
    back a reply line, and how often to poll."""

    api: BatchApi
    poll_s: float
    cache: ResponseCache | None
    say: Callable[[str], None]
    record_fields: Callable[[Record], None]
    read: Callable[[Record, PendingRequest], CallResult]  # a reply line as a CallResult
    deliver: Callable[[PendingRequest, CallResult], None]
    # Awaited every PACE_LINES replies handed back: waits while the stage has too many replies
    # not taken yet, so that batches landing together are not all held in memory at once.
    pace: Callable[[], Awaitable[None]] | None = None

    async def nap(self, batch_id: str) -> None:
        """Wait poll_s before the next status read; after Ctrl-C, stop waiting.

        Nothing is lost by stopping: the batch is in the evidence and the provider keeps
        running it, so the same command collects it later.
        """
        end = time.monotonic() + self.poll_s
        while True:
            if STOP.requested:
                self.say(f"batch {batch_id}: left running; the same command collects it later")
                raise StopRequested("stopped by Ctrl-C while the batch runs at the provider")
            left = end - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(left, 0.5))

    async def submit(self, spool: Spool) -> tuple[str, str]:
        """Upload a sealed spool and create its batch; (batch id, input file id)."""
        if STOP.requested:  # after Ctrl-C nothing new is submitted (nothing paid yet)
            raise StopRequested("stopped by Ctrl-C before this batch was submitted")
        creds = spool.route.credentials()
        with open(spool.path, "rb") as handle:
            uploaded = await self.api.upload(handle, creds)
        models = sorted({r.model for r in spool.requests.values()})
        about: Record = {
            "input_file_id": str(uploaded.id),
            "models": models,
            "provider": spool.route.provider,
            "provider_model": spool.route.provider_model,
            "api_base": safe_base(spool.route.api_base),
            "requests": len(spool.requests),
            "created_at": now_iso(),
        }
        # Recorded before the batch is created: should the process die between the provider
        # creating the batch and the record below, a rerun finds it by its input file.
        self.record_fields({**about, "status": "uploaded"})
        created = await self.api.create(str(uploaded.id), len(spool.requests), creds)
        batch_id = str(created.id)
        self.record_fields({**about, "status": "submitted", "batch_id": batch_id})
        self.say(f"batch {batch_id}: {len(spool.requests)} requests submitted ({models[0]})")
        return batch_id, str(uploaded.id)

    async def collect(
        self,
        batch_id: str,
        route: Route,
        requests: dict[str, PendingRequest],
        input_file_id: str,
        wait: bool = True,
    ) -> str | None:
        """Wait for the batch to end (or, without `wait`, read its status once) and collect
        it; the status of a batch left running, None once collected."""
        creds = route.credentials()
        last = ""
        while True:
            batch = await self.api.status(batch_id, creds)
            status = str(batch.status)
            if status != last:
                self.say(f"batch {batch_id}: {status}")
                last = status
            if status in TERMINAL:
                break
            if not wait:
                return status
            await self.nap(batch_id)
        started = time.perf_counter()
        tally = Tally(self.cache)
        handed = 0
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                async for entry in self.api.lines(str(file_id), creds):
                    custom_id = entry.get("custom_id")
                    if (
                        isinstance(custom_id, str)
                        and custom_id in requests
                        and custom_id not in tally.seen
                    ):
                        request = requests[custom_id]
                        self.deliver(request, tally.add(request, self.read(entry, request)))
                        handed += 1
                        if self.pace is not None and handed % PACE_LINES == 0:
                            await self.pace()
        for key, request in list(requests.items()):
            if key not in tally.seen:
                missing = CallResult(
                    text=None,
                    error=f"batch {batch_id} ended {status} without this request",
                    error_kind="transient",
                )
                self.deliver(request, tally.add(request, missing))
        tally.flush()
        failed, cost = tally.failed, tally.cost
        self.record_fields(
            {
                "input_file_id": input_file_id,
                "batch_id": batch_id,
                "status": "collected",
                "provider_status": status,
                "requests": len(requests),
                "failed": failed,
                "cost_usd": cost,
                "collected_at": now_iso(),
            }
        )
        # litellm builds a fresh OpenAI client (and connection pool) for every file and batch
        # call and never closes it; collecting them now, while their event loop still runs,
        # closes their sockets cleanly instead of after the loop is gone.
        gc.collect()
        self.say(
            f"batch {batch_id}: collected {len(requests) - failed} replies, {failed} failed "
            f"({time.perf_counter() - started:.1f} s)"
        )
        return None


def record_batch(log: EvidenceLog | None, fields: Record) -> None:
    """One line of a batch's life in the run's `batches` stream."""
    if log is not None:
        log.append(STREAM, {"kind": "batch", **fields})
