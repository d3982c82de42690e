"""Several deployments of one model (keys, regions, local servers) behind litellm's Router.

runs.json names them per model (konkord.configuration.deployments); a key is never written in
the file: a deployment names the environment variable that holds it. The Router balances calls
over the deployments within each one's rpm/tpm; a deployment that answers 429, 5xx or times out
is cooled down and the call falls back to another. The evidence records which deployment
answered and which ones failed first, by name.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from typing import Any

from konkord.configuration.deployments import Deployment

DEFAULT_COOLDOWN_S = 10.0


class RatePacer:
    """Spaces calls to one model so that all its deployments together stay within their rpm.

    The Router keeps each deployment within its own limit and refuses when all are full; pacing
    the sum here means a run waits for capacity instead of spending its retries on refusals.
    """

    def __init__(self, rpm: float) -> None:
        self.interval = 60.0 / rpm
        self._next = 0.0
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        async with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            await asyncio.sleep(start - now)


class Deployments:
    """The Router for the models that have deployments; other models are called directly."""

    def __init__(
        self, by_model: Mapping[str, tuple[Deployment, ...]], cooldown_s: float = DEFAULT_COOLDOWN_S
    ) -> None:
        self.by_model = dict(by_model)
        self.cooldown_s = cooldown_s
        self._router: Any = None
        self._pacers: dict[str, RatePacer | None] = {}

    def serves(self, model: str) -> bool:
        """Whether calls to `model` go through the Router."""
        return model in self.by_model

    def missing_keys(self) -> list[str]:
        """Environment variables named by api_key_env that are not set."""
        return sorted(
            {
                d.api_key_env
                for deployments in self.by_model.values()
                for d in deployments
                if d.api_key_env and not os.environ.get(d.api_key_env)
            }
        )

    def rpm(self, model: str) -> int | None:
        """Requests per minute over all of a model's deployments; None if any is unlimited."""
        limits = [d.rpm for d in self.by_model.get(model, ())]
        return None if not limits or None in limits else sum(x for x in limits if x)

    def tpm(self, model: str) -> int | None:
        """Tokens per minute over all of a model's deployments; None if any is unlimited."""
        limits = [d.tpm for d in self.by_model.get(model, ())]
        return None if not limits or None in limits else sum(x for x in limits if x)

    def model_list(self) -> list[dict[str, Any]]:
        """The Router's model_list; keys are read from the environment here, kept in memory."""
        out = []
        for group, deployments in self.by_model.items():
            for d in deployments:
                params: dict[str, Any] = {"model": d.model or group}
                if d.api_base:
                    params["api_base"] = d.api_base
                if d.api_key_env:
                    params["api_key"] = os.environ.get(d.api_key_env, "")
                elif d.api_base:
                    # a local server takes no key; an empty variable is no key either
                    params["api_key"] = os.environ.get("OPENAI_API_KEY") or "not-needed"
                if d.rpm:
                    params["rpm"] = d.rpm
                if d.tpm:
                    params["tpm"] = d.tpm
                out.append({"model_name": group, "litellm_params": params,
                            "model_info": {"id": d.name}})
        return out

    def router(self) -> Any:
        """litellm's Router over every deployment (built on first use: litellm is slow to load)."""
        if self._router is None:
            from konkord.providers.loading import load_litellm

            litellm = load_litellm()
            limited = any(d.rpm or d.tpm for ds in self.by_model.values() for d in ds)
            self._router = litellm.Router(
                model_list=self.model_list(),
                # Konkord's own loop retries (with backoff, Retry-After and a record of who
                # failed); each retry asks the Router again, which skips cooled-down deployments.
                num_retries=0,
                allowed_fails=0,
                cooldown_time=self.cooldown_s,
                routing_strategy="usage-based-routing-v2" if limited else "simple-shuffle",
            )
        return self._router

    async def acompletion(self, kwargs: dict[str, Any]) -> Any:
        """One call through the Router; raises what the chosen deployment raised."""
        model = str(kwargs["model"])
        if model not in self._pacers:
            rpm = self.rpm(model)
            self._pacers[model] = RatePacer(rpm) if rpm else None
        pacer = self._pacers[model]
        if pacer is not None:
            await pacer.wait()
        routed = {k: v for k, v in kwargs.items() if k not in ("api_base", "max_retries")}
        return await self.router().acompletion(**routed)


def answered_by(response: Any) -> str | None:
    """The name of the deployment that produced a Router response."""
    hidden = getattr(response, "_hidden_params", None) or {}
    found = hidden.get("model_id")
    return str(found) if found else None


def failed_deployment(exc: BaseException) -> str:
    """The name of the deployment a Router error came from ("none free" when none was tried)."""
    found = getattr(exc, "failed_deployment_id", None)
    return str(found) if found else "none free"
