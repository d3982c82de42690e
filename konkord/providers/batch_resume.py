"""Resuming batch mode: what an earlier process left open in the evidence, found and collected.

A batch's life in the run's `batches` stream, keyed by its input file: `uploaded` (written before
the batch is created), `submitted` (with the provider's batch id), then `collected` or, for an
upload whose batch never came to exist, `abandoned`. A rerun collects every `submitted` batch and
looks up every `uploaded` one among the provider's batches by its input file, so a kill at any
moment neither loses a paid batch nor submits one twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from konkord.configuration.call_settings import CallSettings
from konkord.evidence.log import EvidenceLog, Record
from konkord.providers.batch_format import STREAM

if TYPE_CHECKING:
    from konkord.providers.batch_format import Route
    from konkord.providers.batch_spool import PendingRequest

OPEN = ("uploaded", "submitted")

# A batch-API call retried on transient errors: (what it does, for the message; the call).
Retrying = Callable[[str, Callable[[], Any]], Awaitable[Any]]


def open_batches(log: EvidenceLog | None) -> list[Record]:
    """Batches of this run neither collected nor abandoned (a crash, a closed laptop)."""
    if log is None:
        return []
    return [r for r in log.latest(STREAM).values() if r.get("status") in OPEN]


async def find_batch(retrying: Retrying, route: Route, input_file_id: str) -> str | None:
    """The provider's batch made from `input_file_id`, if one was created; None otherwise.

    `retrying` is the batch client's retried call, so a flaky listing is retried like any
    other batch-API call.
    """
    from konkord.providers.loading import load_litellm

    litellm = load_litellm()
    creds = route.credentials()
    after: str | None = None
    while True:
        kwargs: dict[str, Any] = {"limit": 100, **creds}
        if after is not None:
            kwargs["after"] = after
        page = await retrying(
            f"look for the batch of file {input_file_id}",
            lambda kw=kwargs: litellm.alist_batches(**kw),  # type: ignore[misc]
        )
        data = page.get("data") if isinstance(page, dict) else getattr(page, "data", None)
        for batch in data or []:
            found = batch.get("input_file_id") if isinstance(batch, dict) else getattr(
                batch, "input_file_id", None
            )
            if found == input_file_id:
                return str(batch["id"] if isinstance(batch, dict) else batch.id)
        more = page.get("has_more") if isinstance(page, dict) else getattr(page, "has_more", False)
        if not more or not data:
            return None
        last = data[-1]
        after = str(last["id"] if isinstance(last, dict) else last.id)


class ResumedRequests(dict[str, "PendingRequest"]):
    """The requests of a batch submitted by an earlier process: every custom_id in its files
    belongs to it, and is made up on first sight (its callers have not asked yet)."""

    def __init__(self, model: str) -> None:
        super().__init__()
        self.model = model

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str)

    def __missing__(self, key: str) -> PendingRequest:
        from konkord.providers.batch_spool import PendingRequest

        request = PendingRequest(key, self.model, CallSettings(), [], Path(), 0, 0)
        self[key] = request
        return request
