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
from typing import TYPE_CHECKING, Any

from konkord.configuration.call_settings import CallSettings as CallSettings
from konkord.configuration.call_settings import Message as Message
from konkord.configuration.credentials import SECRET_ENV as SECRET_ENV
from konkord.configuration.credentials import SECRET_SHAPE as SECRET_SHAPE
from konkord.configuration.credentials import empty_credentials_unset, strip_url_credentials
from konkord.configuration.credentials import load_dotenv_file as load_dotenv_file
from konkord.configuration.credentials import redact as redact
from konkord.configuration.credentials import secret_values as secret_values
from konkord.configuration.runs_config import Price
from konkord.evidence.stopping import STOP, StopRequested
from konkord.providers.call_pool import CallPool, PoolBroken

# Re-exported: callers import these from here, the one door to model calls.
from konkord.providers.calls import CallResult as CallResult
from konkord.providers.calls import ResponseCache as ResponseCache
from konkord.providers.calls import mark_unusable
from konkord.providers.deployments import answered_by, failed_deployment
from konkord.providers.loading import (
    MalformedResponse,
    classify_error,
    env_float,
    is_offline_model,
    keep_litellm_warnings_quiet,
    load_litellm,
    retry_after_s,
    short_error,
)

if TYPE_CHECKING:
    from konkord.providers.budget import Budget
    from konkord.providers.deployments import Deployments

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_CACHE_DIR = Path(".konkord/cache")


def missing_credentials(models: tuple[str, ...], api_base: str | None) -> dict[str, list[str]]:
    """For each model that cannot be called, the environment variables it still needs.

    Asked before anything is sent, so a run without a key stops with one message instead of
    recording a failure per task. A model served from an explicit api_base is not checked:
    local servers often need no key.
    """
    if api_base:
        return {}
    litellm = load_litellm()
    out: dict[str, list[str]] = {}
    for model in models:
        if is_offline_model(model):
            continue
        try:
            # litellm asks only whether the variable exists; an empty one is no key.
            with empty_credentials_unset():
                found = litellm.validate_environment(model=model)
        except Exception:
            continue
        if not found.get("keys_in_environment") and found.get("missing_keys"):
            out[model] = list(found["missing_keys"])
    return out


def _default_backoff() -> float:
    return env_float("KONKORD_BACKOFF_BASE", 1.0)


def _default_timeout() -> float:
    return env_float("KONKORD_TIMEOUT", DEFAULT_TIMEOUT_S)


@dataclass
class ModelClient:
    """Calls models through litellm with per-model concurrency limits, retries and a cache.

    Backoff before retry n (n = 1, 2, ...) is backoff_base_s * 2**(n-1) with jitter, capped; the
    base comes from KONKORD_BACKOFF_BASE and the per-call timeout from KONKORD_TIMEOUT when set.
    """

    concurrency: int = 8
    max_retries: int = 4
    backoff_base_s: float = field(default_factory=_default_backoff)
    backoff_cap_s: float = 30.0
    timeout_s: float = field(default_factory=_default_timeout)
    cache_dir: Path | None = DEFAULT_CACHE_DIR
    prices: dict[str, Price] = field(default_factory=dict)
    deployments: Deployments | None = None  # models served by several deployments (Router)
    budget: Budget | None = None  # --max-cost: refuses calls that could pass the cap
    # worker processes making the litellm calls (1: this process); routed models stay here
    processes: int = 1
    _pool: CallPool | None = field(default=None, init=False)
    _semaphores: dict[str, asyncio.Semaphore] = field(default_factory=dict, init=False)
    _settings_fields: dict[CallSettings, dict[str, Any]] = field(default_factory=dict, init=False)
    _known_models: dict[str, bool] = field(default_factory=dict, init=False)
    # replies an earlier --batch run paid for and this process collected: served first, once
    collected: dict[str, CallResult] = field(default_factory=dict, init=False)
    _cache: ResponseCache | None = field(default=None, init=False)
    _secrets: list[tuple[str, str]] | None = field(default=None, init=False)

    def _semaphore(self, model: str) -> asyncio.Semaphore:
        if model not in self._semaphores:
            self._semaphores[model] = asyncio.Semaphore(self.concurrency)
        return self._semaphores[model]

    def cache_key(self, model: str, messages: list[Message], settings: CallSettings) -> str:
        """A hash of everything that changes the response: model, messages, every setting."""
        fields = self._settings_fields.get(settings)
        if fields is None:  # asdict is slow, and a run asks with one or two settings
            fields = self._settings_fields[settings] = asdict(settings)
            if fields["top_logprobs"] is None:
                del fields["top_logprobs"]  # keys made before log-probabilities existed stay valid
            if settings.api_base:  # credentials change who pays, not the reply
                fields["api_base"] = strip_url_credentials(settings.api_base)
        blob = json.dumps({"model": model, "messages": messages, "settings": fields}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _response_cache(self) -> ResponseCache | None:
        if self.cache_dir is None:
            return None
        if self._cache is None or self._cache.path.parent != self.cache_dir:
            self._cache = ResponseCache(self.cache_dir)
        return self._cache

    def _model_known(self, litellm: Any, model: str) -> bool:
        if model not in self._known_models:
            try:
                litellm.get_model_info(model)
                self._known_models[model] = True
            except Exception:
                self._known_models[model] = False
        return self._known_models[model]

    def _cost(
        self, litellm: Any, model: str, response: Any, tokens: tuple[int, int]
    ) -> float | None:
        """Dollars for one call: runs.json's price, else litellm's map; None when unknown."""
        price = self.prices.get(model)
        if price is not None:
            dollars = tokens[0] * price.input_per_million + tokens[1] * price.output_per_million
            return dollars / 1e6
        if is_offline_model(model):
            return 0.0
        # litellm prices every response as it arrives; reuse that instead of pricing it twice.
        hidden = getattr(response, "_hidden_params", None) or {}
        cost = hidden.get("response_cost")
        # A model absent from the map has no price: "unknown", never a zero that looks free.
        if not cost and not self._model_known(litellm, model):
            return None
        if cost is None:
            try:
                cost = litellm.completion_cost(completion_response=response, model=model)
            except Exception:
                return None
        return float(cost)

    async def complete(
        self, model: str, messages: list[Message], settings: CallSettings, use_cache: bool = True
    ) -> CallResult:
        """One chat completion: cached if seen before, retried on transient errors.

        With use_cache=False the cache is not read (a forced regeneration) but is still written.
        """
        key = self.cache_key(model, messages, settings)
        if key in self.collected:
            return self.collected.pop(key)
        cache = self._response_cache()
        if use_cache and cache is not None and (hit := cache.get(key)) is not None:
            return hit
        litellm = load_litellm()
        keep_litellm_warnings_quiet()
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
        if settings.top_logprobs:
            kwargs |= {"logprobs": True, "top_logprobs": settings.top_logprobs}
        attempts = 0
        routed = self.deployments is not None and self.deployments.serves(model)
        keyless = model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY")
        if settings.api_base and keyless and not routed:
            # A local server (vLLM, llama.cpp) often wants no key, but the OpenAI client
            # refuses to send a request without one: any placeholder will do.
            kwargs["api_key"] = "no-key"
        failed_on: list[str] = []
        async with self._semaphore(model):
            # Held once a slot is free, so the hold is at the model's ratio as known by then.
            hold = await self.budget.reserve(model, messages, settings) if self.budget else None
            flight = self._launch(hold)  # after the first Ctrl-C, nothing new goes out
            while True:
                attempts += 1
                STOP.attempt(flight, self.timeout_s)
                started = time.perf_counter()
                try:
                    if routed and self.deployments is not None:
                        response = await self.deployments.acompletion(kwargs)
                        latency = time.perf_counter() - started
                        result = self._result_from(litellm, model, response, latency, attempts)
                        result.deployment = answered_by(response)
                        result.fallbacks = tuple(failed_on)
                    elif self.processes > 1:
                        result = await self._call_pool().call(kwargs, attempts)
                    else:
                        result = await self.attempt(litellm, kwargs, attempts)
                    break
                except (asyncio.CancelledError, PoolBroken):
                    STOP.land(flight)
                    if self.budget and hold is not None:
                        self.budget.settle(hold, None)
                    raise
                except Exception as exc:
                    if routed:
                        failed_on.append(failed_deployment(exc))
                    kind = classify_error(exc, litellm)
                    if kind == "transient" and attempts <= self.max_retries and not STOP.requested:
                        delay = min(self.backoff_cap_s, self.backoff_base_s * 2 ** (attempts - 1))
                        delay *= 0.5 + random.random() / 2
                        wait = retry_after_s(exc)
                        if wait is not None:
                            delay = max(delay, min(wait, self.backoff_cap_s))
                        await asyncio.sleep(delay)
                        continue
                    STOP.land(flight)
                    if self.budget and hold is not None:
                        self.budget.settle(hold, 0.0)
                    return CallResult(
                        text=None, error=short_error(exc), error_kind=kind, attempts=attempts,
                        fallbacks=tuple(failed_on),
                    )
            STOP.land(flight)
            if self.budget and hold is not None:  # settled by the usage the provider reported
                self.budget.settle(hold, result.cost_usd, result.tokens_in or 0)
        if cache is not None:
            cache.put(key, result)
        return result

    async def attempt(self, litellm: Any, kwargs: dict[str, Any], attempts: int) -> CallResult:
        """One attempt of a call, in this process: litellm's reply read into a CallResult
        (what a worker process of the call pool runs for each call it is sent)."""
        started = time.perf_counter()
        response = await litellm.acompletion(**kwargs)
        latency = time.perf_counter() - started
        return self._result_from(litellm, kwargs["model"], response, latency, attempts)

    def _call_pool(self) -> CallPool:
        if self._pool is None:
            self._pool = CallPool(self.processes, self.prices)
        return self._pool

    async def close(self) -> None:
        """Stop the call pool's worker processes, if any were started (a later call starts
        them again)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def _launch(self, hold: Any) -> int:
        """Register a call going out, or refuse it after Ctrl-C (giving back its budget hold)."""
        try:
            return STOP.launch(self.timeout_s)
        except StopRequested:
            if self.budget and hold is not None:
                self.budget.settle(hold, 0.0)
            raise

    def _result_from(
        self, litellm: Any, model: str, response: Any, latency: float, attempts: int
    ) -> CallResult:
        choices = getattr(response, "choices", None)
        if not choices:
            raise MalformedResponse("the response has no choices")
        choice = choices[0]
        message = getattr(choice, "message", None)
        if message is None:
            raise MalformedResponse("the response's first choice has no message")
        usage = getattr(response, "usage", None)
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        if self._secrets is None:
            self._secrets = secret_values()  # read once: the environment is fixed for a run
        text = redact(message.content or "", key_shapes=False, secrets=self._secrets)
        result = CallResult(
            text=text,
            finish_reason=choice.finish_reason,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=self._cost(litellm, model, response, (tokens_in, tokens_out)),
            latency_s=round(latency, 4),
            attempts=attempts,
            logprobs=token_logprobs(choice),
        )
        mark_unusable(result)
        return result


def token_logprobs(choice: Any) -> list[dict[str, Any]] | None:
    """The choice's per-token log-probabilities as plain data, or None if the provider sent none.

    Each token becomes {"token", "logprob", "top": [[token, logprob], ...]}, small enough to
    cache and free of the provider's classes."""
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    out: list[dict[str, Any]] = []
    for item in content:
        top = [
            [str(getattr(alt, "token", "")), float(getattr(alt, "logprob", float("-inf")))]
            for alt in getattr(item, "top_logprobs", None) or []
        ]
        out.append(
            {
                "token": str(getattr(item, "token", "")),
                "logprob": float(getattr(item, "logprob", float("-inf"))),
                "top": top,
            }
        )
    return out
