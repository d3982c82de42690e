"""The one door to litellm: async calls with a concurrency limit, retries, cost, and a cache.

litellm is imported lazily (about 5 s here), only by stages that call models. Errors are split
into transient ones (429, 5xx, timeouts, broken responses: retried with exponential backoff, then
recorded) and permanent ones (auth, bad request, context window: recorded at once).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from konkord.runs_config import Price

Message = dict[str, str]
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_CACHE_DIR = Path(".konkord/cache")


@dataclass(frozen=True)
class CallSettings:
    """Everything besides the messages that changes a response; all of it is in the cache key."""

    temperature: float | None = 0.0
    max_tokens: int = 4096
    seed: int | None = 0
    api_base: str | None = None

    def digest(self) -> str:
        """A short stable hash of these settings, used in evidence keys."""
        blob = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


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
    error_kind: str | None = None  # "transient" (retries exhausted) or "permanent"
    attempts: int = 0
    cached: bool = False

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
        }


_litellm: Any = None


def load_litellm() -> Any:
    """Import litellm once, with the bundled cost map and the offline sim provider registered."""
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        load_dotenv_file()
        import litellm

        litellm.suppress_debug_info = True
        litellm.telemetry = False
        litellm.drop_params = True
        from konkord import sim

        sim.register(litellm)
        _litellm = litellm
    return _litellm


def load_dotenv_file(path: Path | str = ".env") -> None:
    """Read credentials from .env in the working directory; a variable set in the shell wins."""
    if Path(path).is_file():
        from dotenv import load_dotenv

        load_dotenv(path, override=False)


def is_offline_model(model: str) -> bool:
    """Whether a model is answered by Konkord's own simulated provider (no network, no key)."""
    return model.startswith(("sim/", "sim-judge/"))


def _classify(exc: BaseException, litellm: Any) -> str:
    permanent = (
        litellm.AuthenticationError,
        litellm.BadRequestError,
        litellm.ContextWindowExceededError,
        litellm.NotFoundError,
        litellm.PermissionDeniedError,
        litellm.ContentPolicyViolationError,
        litellm.UnsupportedParamsError,
    )
    if isinstance(exc, permanent):
        return "permanent"
    return "transient"


def _short_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 500 else text[:497] + "..."


@dataclass
class ModelClient:
    """Calls models through litellm with per-model concurrency limits, retries and a cache."""

    concurrency: int = 8
    max_retries: int = 4
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 30.0
    timeout_s: float = DEFAULT_TIMEOUT_S
    cache_dir: Path | None = DEFAULT_CACHE_DIR
    prices: dict[str, Price] = field(default_factory=dict)
    _semaphores: dict[str, asyncio.Semaphore] = field(default_factory=dict, init=False)

    def _semaphore(self, model: str) -> asyncio.Semaphore:
        if model not in self._semaphores:
            self._semaphores[model] = asyncio.Semaphore(self.concurrency)
        return self._semaphores[model]

    def cache_key(self, model: str, messages: list[Message], settings: CallSettings) -> str:
        """A hash of everything that changes the response."""
        blob = json.dumps(
            {"model": model, "messages": messages, "settings": asdict(settings)}, sort_keys=True
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    def _cache_path(self, key: str) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / key[:2] / f"{key}.json"

    def _cache_get(self, key: str) -> CallResult | None:
        path = self._cache_path(key)
        if path is None or not path.exists():
            return None
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        result = CallResult(**{k: data.get(k) for k in CallResult.__dataclass_fields__})
        result.cached = True
        return result

    def _cache_put(self, key: str, result: CallResult) -> None:
        path = self._cache_path(key)
        if path is None or not result.ok:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(asdict(result) | {"cached": False}))
        os.replace(tmp, path)

    def _cost(self, litellm: Any, model: str, response: Any, tokens: tuple[int, int]) -> float | None:
        price = self.prices.get(model)
        if price is not None:
            return (tokens[0] * price.input_per_million + tokens[1] * price.output_per_million) / 1e6
        if is_offline_model(model):
            return 0.0
        try:
            cost = litellm.completion_cost(completion_response=response, model=model)
        except Exception:
            return None
        # litellm answers 0.0 for some models it does not know; only trust a known map entry.
        if not cost:
            try:
                litellm.get_model_info(model)
            except Exception:
                return None
        return float(cost)

    async def complete(
        self, model: str, messages: list[Message], settings: CallSettings, use_cache: bool = True
    ) -> CallResult:
        """One chat completion: cached if seen before, retried on transient errors."""
        key = self.cache_key(model, messages, settings)
        if use_cache and (hit := self._cache_get(key)) is not None:
            return hit
        litellm = load_litellm()
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "max_tokens": settings.max_tokens,
            "timeout": self.timeout_s,
            "num_retries": 0,
            "max_retries": 0,
        }
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        if settings.seed is not None:
            kwargs["seed"] = settings.seed
        if settings.api_base:
            kwargs["api_base"] = settings.api_base
        attempts = 0
        async with self._semaphore(model):
            while True:
                attempts += 1
                started = time.perf_counter()
                try:
                    response = await litellm.acompletion(**kwargs)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    kind = _classify(exc, litellm)
                    if kind == "transient" and attempts <= self.max_retries:
                        delay = min(self.backoff_cap_s, self.backoff_base_s * 2 ** (attempts - 1))
                        await asyncio.sleep(delay * (0.5 + random.random() / 2))
                        continue
                    return CallResult(
                        text=None, error=_short_error(exc), error_kind=kind, attempts=attempts
                    )
                latency = time.perf_counter() - started
                break
        result = self._result_from(litellm, model, response, latency, attempts)
        if use_cache:
            self._cache_put(key, result)
        return result

    def _result_from(
        self, litellm: Any, model: str, response: Any, latency: float, attempts: int
    ) -> CallResult:
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        text = choice.message.content
        if text is None:
            text = ""
        return CallResult(
            text=text,
            finish_reason=choice.finish_reason,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=self._cost(litellm, model, response, (tokens_in, tokens_out)),
            latency_s=round(latency, 4),
            attempts=attempts,
        )
