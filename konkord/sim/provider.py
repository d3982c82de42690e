"""The litellm provider: `sim/` and `sim-judge/` registered as custom providers."""

from __future__ import annotations

import threading
from typing import Any

from konkord.errors import KonkordError
from konkord.sim.answers import sim_answer
from konkord.sim.judge import sim_judge_reply


def _text_of(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


def verdict_logprobs(text: str, probs: dict[str, float]) -> dict[str, Any]:
    """OpenAI-style `logprobs` for a response: the text before the verdict value as one token,
    the value as a token whose alternatives carry `probs`, then the rest."""
    import math

    at = text.rfind("VERDICT: ") + len("VERDICT: ")
    value = text[at:].split("\n", 1)[0]
    names = {"1": "1", "2": "2", "tie": "TIE"}
    top = [
        {"token": names[k], "logprob": math.log(p), "bytes": None}
        for k, p in sorted(probs.items(), key=lambda kv: -kv[1])
        if p > 0
    ]
    chosen = next((t["logprob"] for t in top if t["token"] == value), -20.0)
    tokens = [
        {"token": text[:at], "logprob": -0.01, "bytes": None, "top_logprobs": []},
        {"token": value, "logprob": chosen, "bytes": None, "top_logprobs": top},
    ]
    if text[at + len(value) :]:
        tokens.append(
            {"token": text[at + len(value) :], "logprob": -0.01, "bytes": None, "top_logprobs": []}
        )
    return {"content": tokens}


def _make_response(
    litellm: Any,
    model: str,
    text: str,
    messages: list[dict[str, Any]],
    logprobs: dict[str, Any] | None = None,
) -> Any:
    prompt_tokens = max(1, len(_text_of(messages)) // 4)
    completion_tokens = max(1, len(text) // 4)
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": text},
    }
    if logprobs is not None:
        choice["logprobs"] = logprobs
    response = litellm.ModelResponse(
        model=model,
        choices=[choice],
        usage={
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    )
    # A simulated call is free, and says so as a priced reply would: litellm otherwise looks
    # the unknown model up in its map, generalisations and all, for every reply (about a
    # third of a simulated judge call's time).
    response._hidden_params["response_cost"] = 0.0
    return response


_PRICED: set[str] = set()
_PRICING = threading.Lock()


def price_as_free(litellm: Any, model: str, provider: str) -> None:
    """Put a simulated model in litellm's price map at zero (`litellm.register_model`, once per
    model). A reply that costs 0.0 has litellm diagnose why it is free: for a model absent from
    the map that is a search of the map and its generalisations, twice a call (about a third of
    litellm's work for a simulated judge call). Known and free, it is a dictionary lookup."""
    if model in _PRICED:
        return
    with _PRICING:  # replies are made in litellm's worker threads
        if model in _PRICED:
            return
        litellm.register_model(
            {
                model: {
                    "input_cost_per_token": 0.0,
                    "output_cost_per_token": 0.0,
                    "cache_creation_input_token_cost": 0.0,
                    "cache_read_input_token_cost": 0.0,
                    "litellm_provider": provider,
                    "mode": "chat",
                }
            }
        )
        _PRICED.add(model)


def register(litellm: Any) -> None:
    """Register the `sim` and `sim-judge` providers with litellm (idempotent)."""
    from litellm.llms.custom_llm import CustomLLM

    class SimProvider(CustomLLM):  # type: ignore[misc]
        def __init__(self, provider: str, answer: Any) -> None:
            super().__init__()
            self._provider = provider
            self._answer = answer

        def completion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            params = kwargs.get("optional_params") or {}
            price_as_free(litellm, model, self._provider)
            try:
                reply = self._answer(model, messages, params.get("seed"))
            except KonkordError as exc:
                # A malformed name is the caller's mistake: permanent, never retried.
                raise litellm.BadRequestError(
                    message=str(exc), model=model, llm_provider=self._provider
                ) from None
            text, probs = reply if isinstance(reply, tuple) else (reply, None)
            wanted = probs is not None and params.get("logprobs")
            logprobs = verdict_logprobs(text, probs) if wanted else None
            return _make_response(litellm, model, text, messages, logprobs)

        async def acompletion(
            self, model: str, messages: list[Any], *args: Any, **kwargs: Any
        ) -> Any:
            return self.completion(model, messages, *args, **kwargs)

    existing = [
        p
        for p in (litellm.custom_provider_map or [])
        if p.get("provider") not in {"sim", "sim-judge"}
    ]
    litellm.custom_provider_map = [
        *existing,
        {"provider": "sim", "custom_handler": SimProvider("sim", sim_answer)},
        {"provider": "sim-judge", "custom_handler": SimProvider("sim-judge", sim_judge_reply)},
    ]
    # litellm reads the map into its provider list when a call is made through it.
    from litellm.utils import custom_llm_setup

    custom_llm_setup()  # type: ignore[no-untyped-call]
