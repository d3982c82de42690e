"""The provider's batch format: request lines out, output and error lines back as CallResults.

A request line is OpenAI's batch JSONL (`custom_id`, `method`, `url`, `body`); a reply line is
read into exactly the fields a live completion gives (text, finish reason, tokens), and a failed
line is split into transient (429, 5xx, expiry: asked again in a next batch) and permanent
(400, 401, 404: recorded at once), as live errors are.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from konkord.configuration.call_settings import CallSettings, Message
from konkord.configuration.credentials import redact
from konkord.errors import KonkordError
from konkord.evidence.log import Record
from konkord.providers.calls import CallResult, mark_unusable
from konkord.providers.loading import MalformedResponse, is_offline_model, load_litellm

# OpenAI's limits per batch (50,000 requests, a 200 MB input file), with room to spare.
MAX_REQUESTS = 50_000
MAX_BYTES = 190 * 1024 * 1024
BATCH_PROVIDERS = ("openai", "azure", "litellm_proxy")
BATCH_DISCOUNT = 0.5  # runs.json prices are live prices; batch APIs charge about half
TERMINAL = ("completed", "failed", "expired", "cancelled")
TRANSIENT_STATUS = {408, 409, 425, 429}
STREAM = "batches"


class BatchError(KonkordError):
    """The batch machinery itself failed (upload, submit, poll): nothing was recorded wrongly."""


def safe_base(api_base: str | None) -> str | None:
    """A server address fit for the evidence: no user:password, no query string."""
    if not api_base:
        return api_base
    parts = urlsplit(api_base)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass(frozen=True)
class Route:
    """Where one model's batches go: the provider, its model name there, and the server."""

    provider: str
    provider_model: str
    api_base: str | None

    def credentials(self) -> dict[str, Any]:
        """Keyword arguments for litellm's file and batch functions (the key stays in memory)."""
        kwargs: dict[str, Any] = {"custom_llm_provider": self.provider}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.provider in ("openai", "litellm_proxy"):
            key = os.environ.get("OPENAI_API_KEY") or None  # set but empty is not a key
            if key is None and self.api_base:
                key = "not-needed"  # local OpenAI-compatible servers often take no key
            if key is not None:
                kwargs["api_key"] = key
        return kwargs


def route_for(model: str, api_base: str | None) -> Route:
    """The provider that runs `model`'s batches, or a KonkordError naming what is supported."""
    if is_offline_model(model):
        raise KonkordError(
            f"--batch: {model} is a simulated model (no batch API); run it without --batch"
        )
    litellm = load_litellm()
    try:
        name, provider, _, _ = litellm.get_llm_provider(model=model, api_base=api_base)
    except Exception as exc:
        raise KonkordError(f"--batch: litellm does not know model {model} ({exc})") from None
    if provider not in BATCH_PROVIDERS:
        raise KonkordError(
            f"--batch: {model} is served by {provider}, whose batch API Konkord does not drive "
            f"(supported: {', '.join(BATCH_PROVIDERS)}); run it without --batch"
        )
    return Route(provider, name, api_base)


def request_line(
    custom_id: str, route: Route, messages: list[Message], settings: CallSettings
) -> bytes:
    """One request of a batch input file, as the provider reads it."""
    body: dict[str, Any] = {
        "model": route.provider_model,
        "messages": messages,
        "max_tokens": settings.max_tokens,
    }
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.seed is not None:
        body["seed"] = settings.seed
    line = {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}
    return json.dumps(line, ensure_ascii=False).encode() + b"\n"


def status_error(status: int | None, body: Any, code: str | None = None) -> tuple[str, str]:
    """(error text, kind) for one failed line of a batch."""
    message = ""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            message = str(error.get("message") or error.get("code") or "")
            code = code or error.get("code")
    label = f"status {status}" if status else str(code or "error")
    text = redact(f"batch line failed ({label}): {message or code or 'no detail'}")
    transient = status is None or status in TRANSIENT_STATUS or status >= 500
    return text[:500], "transient" if transient else "permanent"


def result_of_line(entry: Record, secrets: list[tuple[str, str]]) -> CallResult:
    """A batch output or error line as the CallResult a live call gives (cost left to price)."""
    response = entry.get("response")
    status = response.get("status_code") if isinstance(response, dict) else None
    body = response.get("body") if isinstance(response, dict) else None
    if status != 200 or not isinstance(body, dict):
        error = entry.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        detail = body if body is not None else {"error": error}
        text, kind = status_error(status, detail, code)
        return CallResult(text=None, error=text, error_kind=kind)
    try:
        return _parse_body(body, secrets)
    except MalformedResponse as exc:
        return CallResult(text=None, error=f"MalformedResponse: {exc}"[:500], error_kind="transient")


def _parse_body(body: Record, secrets: list[tuple[str, str]]) -> CallResult:
    """The fields the live path reads from a completion, read from its JSON body."""
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedResponse("the response has no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise MalformedResponse("the response's first choice has no message")
    usage = body.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    content = message.get("content")
    result = CallResult(
        text=redact(content if isinstance(content, str) else "", False, secrets),
        finish_reason=choices[0].get("finish_reason"),
        tokens_in=int(usage.get("prompt_tokens") or 0),
        tokens_out=int(usage.get("completion_tokens") or 0),
        latency_s=None,  # a batch has a turnaround, not a per-call latency
        attempts=1,
    )
    mark_unusable(result)  # read as a live reply is: no text, or filtered, is a failure
    return result


async def json_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[Record]:
    """JSON records from a byte stream cut anywhere (never the whole file in memory)."""
    rest = b""
    async for chunk in chunks:
        rest += chunk
        *whole, rest = rest.split(b"\n")
        for line in whole:
            if line.strip():
                yield json.loads(line)
    if rest.strip():
        yield json.loads(rest)
