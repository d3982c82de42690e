"""The provider's batch API as Konkord calls it: upload a spool, create the batch, read its
status, stream a result file. Each call is retried with backoff on transient errors (429, 5xx,
timeouts) and ends in a BatchError naming what could not be done.

Kept apart from batch.py (the client that queues requests and hands replies back) so that the
litellm calls and their retry rule live in one small place; batch_resume uses `retrying` too.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import IO, Any

from konkord.evidence.log import Record
from konkord.providers.batch_format import BatchError, json_lines
from konkord.providers.loading import classify_error, load_litellm, short_error


@dataclass(frozen=True)
class BatchApi:
    """litellm's batch calls with one client's timeout and retry settings."""

    timeout_s: float
    max_retries: int
    backoff_base_s: float
    backoff_cap_s: float

    async def retrying(self, what: str, call: Callable[[], Any]) -> Any:
        """A batch-API call, retried with backoff on transient errors; a BatchError at the end."""
        litellm = load_litellm()
        attempt = 0
        while True:
            attempt += 1
            try:
                return await call()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if classify_error(exc, litellm) == "transient" and attempt <= self.max_retries:
                    await asyncio.sleep(
                        min(self.backoff_cap_s, self.backoff_base_s * 2 ** (attempt - 1))
                    )
                    continue
                raise BatchError(f"--batch: could not {what}: {short_error(exc)}") from None

    async def upload(self, handle: IO[bytes], creds: dict[str, Any]) -> Any:
        """Upload a sealed spool file; the provider's file object."""
        litellm = load_litellm()
        return await self.retrying(
            "upload the batch file",
            lambda: litellm.acreate_file(
                file=handle, purpose="batch", timeout=self.timeout_s, **creds
            ),
        )

    async def create(self, input_file_id: str, requests: int, creds: dict[str, Any]) -> Any:
        """Create the batch from an uploaded file; the provider's batch object."""
        litellm = load_litellm()
        return await self.retrying(
            "create the batch",
            lambda: litellm.acreate_batch(
                completion_window="24h",
                endpoint="/v1/chat/completions",
                input_file_id=input_file_id,
                metadata={"konkord_requests": str(requests)},
                timeout=self.timeout_s,
                **creds,
            ),
        )

    async def status(self, batch_id: str, creds: dict[str, Any]) -> Any:
        """The batch as the provider sees it now (status, output and error file ids)."""
        litellm = load_litellm()
        return await self.retrying(
            f"read the status of batch {batch_id}",
            lambda: litellm.aretrieve_batch(
                batch_id=batch_id,
                timeout=self.timeout_s,
                # litellm's own logging would download and price the whole output file on
                # completion (seconds per 10,000 lines, all in memory); Konkord reads it once.
                litellm_metadata={"batch_ignore_default_logging": True},
                **creds,
            ),
        )

    async def lines(self, file_id: str, creds: dict[str, Any]) -> AsyncIterator[Record]:
        """The JSON lines of a provider file, streamed (never the whole file in memory)."""
        litellm = load_litellm()
        content = await self.retrying(
            f"download file {file_id}",
            lambda: litellm.afile_content(
                file_id=file_id, stream=True, timeout=self.timeout_s, **creds
            ),
        )
        chunks = getattr(content, "stream_iterator", None)
        if chunks is None:  # a provider without streaming: the whole file at once
            data = content.content if hasattr(content, "content") else bytes(content)

            async def one() -> AsyncIterator[bytes]:
                yield data

            chunks = one()
        async for entry in json_lines(chunks):
            yield entry
