"""What one model call gave: its result, and the cache of paid-for responses.

Kept apart from llm.py so that reading cached results never imports litellm, and so the cache's
file format lives in one small place. The call's settings are konkord.configuration.call_settings.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class CallResult:
    """What one model call produced, or why it produced nothing."""

    text: str | None
    finish_reason: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    latency_s: float | None = None
    error: str | None = None
    # "transient" (retries exhausted), "permanent", "empty" (a reply with no text), or
    # "filtered" (text the provider's content filter cut short, kept in `raw`)
    error_kind: str | None = None
    attempts: int = 0
    cached: bool = False
    logprobs: list[dict[str, Any]] | None = None  # per token: token, logprob, top alternatives
    deployment: str | None = None  # which deployment answered, when several serve the model
    fallbacks: tuple[str, ...] = ()  # deployments that failed before it, in order
    raw: str | None = None  # the text of a reply that is a failure all the same (filtered)

    @property
    def ok(self) -> bool:
        """Whether the call returned text."""
        return self.error is None and self.text is not None

    def to_record(self) -> dict[str, Any]:
        """The fields stored in the evidence log (no secrets: keys never reach a result)."""
        return {
            "text": self.text,
            "finish_reason": self.finish_reason,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": self.cost_usd,
            "latency_s": self.latency_s,
            "error": self.error,
            "error_kind": self.error_kind,
            "attempts": self.attempts,
            **({"raw": self.raw} if self.raw is not None else {}),
            **self.route(),
        }

    def route(self) -> dict[str, Any]:
        """Where the call was answered, for the evidence (only when several deployments serve)."""
        if self.deployment is None and not self.fallbacks:
            return {}
        return {"deployment": self.deployment, "fallbacks": list(self.fallbacks)}


def mark_unusable(result: CallResult) -> None:
    """Make a reply that is not an answer a failure: no text (`mark_empty`), or text the
    provider's content filter stopped (finish_reason content_filter), which may be cut
    anywhere: its text is kept as `raw`, never as the answer, so a rerun asks again."""
    if result.text is None or not result.text.strip():
        mark_empty(result)
    elif result.finish_reason == "content_filter":
        result.raw = result.text
        result.text = None
        result.error = ("filtered reply (finish_reason content_filter): the provider's content "
                        "filter stopped it; its text is kept as raw, not as the answer")
        result.error_kind = "filtered"


def mark_empty(result: CallResult) -> None:
    """Make a reply without text a failure: content null, a content filter, or blank text is
    not an answer, and (not being ok) it is neither cached nor kept as done, so a rerun asks
    again. Its tokens and cost stay: the provider billed them."""
    why = {
        "content_filter": "the provider's content filter withheld it",
        "length": "the output token cap was spent before any text (raise --max-tokens)",
    }.get(result.finish_reason or "", "the model returned no text")
    result.error = f"empty reply (finish_reason {result.finish_reason}): {why}"
    result.error_kind = "empty"
    result.text = None


class ResponseCache:
    """Paid-for responses by cache key, in one append-only file (.konkord/cache/responses.jsonl).

    Each line is "<64 hex key> <json>", so the index (key -> place in the file) is built by
    reading keys, not parsing JSON, and a put is one small write with no fsync: the cache only
    saves money, the evidence log is what must survive. A write that completed survives a
    kill -9, so a killed run's in-flight answers are not paid for twice. A torn or damaged line
    is simply a miss. Later lines win, so --force refreshes an entry.
    """

    FILE_NAME = "responses.jsonl"

    def __init__(self, directory: Path) -> None:
        self.path = directory / self.FILE_NAME
        self._index: dict[str, tuple[int, int]] | None = None
        self._fd: int | None = None

    def __del__(self) -> None:
        if self._fd is not None:
            os.close(self._fd)

    def _load_index(self) -> dict[str, tuple[int, int]]:
        index: dict[str, tuple[int, int]] = {}
        try:
            with open(self.path, "rb") as handle:
                offset = 0
                for line in handle:
                    if len(line) > 66 and line[64:65] == b" " and line.endswith(b"\n"):
                        index[line[:64].decode("ascii", "replace")] = (offset + 65, len(line) - 66)
                    offset += len(line)
        except FileNotFoundError:
            pass
        return index

    def get(self, key: str) -> CallResult | None:
        """The cached result for a key, or None."""
        if self._index is None:
            self._index = self._load_index()
        place = self._index.get(key)
        if place is None:
            return None
        try:
            with open(self.path, "rb") as handle:
                handle.seek(place[0] - 65)
                line = handle.read(place[1] + 65)
            if line[:64].decode("ascii", "replace") != key:
                return None  # the file changed under the index: a miss, never a wrong answer
            data = json.loads(line[65:])
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("text"), str):
            return None
        fields: dict[str, Any] = {k: data.get(k) for k in CallResult.__dataclass_fields__}
        result = CallResult(**fields)
        result.attempts = int(result.attempts or 0)
        result.fallbacks = tuple(result.fallbacks or ())
        result.cached = True
        return result

    def put(self, key: str, result: CallResult) -> None:
        """Remember a good result under its key (failures are never cached)."""
        self.put_many([(key, result)])

    def put_many(self, results: list[tuple[str, CallResult]]) -> None:
        """Remember several good results with one write (a collected batch has thousands)."""
        lines = []
        for key, result in results:
            if result.ok:
                # vars(), not asdict(): a shallow copy is enough for JSON, and asdict's deep
                # copy dominated the cost of caching a collected batch.
                body = json.dumps(vars(result) | {"cached": False}, ensure_ascii=True)
                lines.append((key, f"{key} {body}\n".encode()))
        if not lines:
            return
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        fd = self._fd
        fcntl.flock(fd, fcntl.LOCK_EX)  # whole lines, and a true offset, with several writers
        try:
            offset = os.fstat(fd).st_size
            lead = b""
            if offset and os.pread(fd, 1, offset - 1) != b"\n":
                lead = b"\n"  # after a torn line, start a fresh one
            payload = lead + b"".join(line for _, line in lines)
            written = 0
            while written < len(payload):
                written += os.write(fd, payload[written:])
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        if self._index is not None:
            offset += len(lead)
            for key, line in lines:
                self._index[key] = (offset + 65, len(line) - 66)
                offset += len(line)
