"""Offline simulated models (`sim/<name>`) and judges (`sim-judge/<name>`), as a litellm provider.

Registered with litellm as custom providers so that the real code path (litellm, the parser,
the evidence log) runs with no network and no key. Answers are deterministic from the model
name, the messages and the seed.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any


def _rng(*parts: Any) -> random.Random:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _text_of(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


def sim_answer(model: str, messages: list[dict[str, Any]], seed: int | None) -> str:
    """A deterministic answer for a simulated model."""
    rng = _rng(model, _text_of(messages), seed)
    return f"Simulated answer from {model.split('/', 1)[-1]} (draw {rng.randint(0, 10**6)})."


def sim_judge_answer(model: str, messages: list[dict[str, Any]], seed: int | None) -> str:
    """A deterministic verdict in the real format from a simulated judge."""
    rng = _rng(model, _text_of(messages), seed)
    choice = rng.choice(["1", "2", "TIE"])
    return f"Both answers were read against the rubric.\n\nVERDICT: {choice}"


def _make_response(litellm: Any, model: str, text: str, messages: list[dict[str, Any]]) -> Any:
    prompt_tokens = max(1, len(_text_of(messages)) // 4)
    completion_tokens = max(1, len(text) // 4)
    response = litellm.ModelResponse(
        model=model,
        choices=[
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": text},
            }
        ],
        usage={
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    )
    return response


def register(litellm: Any) -> None:
    """Register the `sim` and `sim-judge` providers with litellm (idempotent)."""
    from litellm import CustomLLM

    class SimProvider(CustomLLM):  # type: ignore[misc]
        def __init__(self, answer: Any) -> None:
            super().__init__()
            self._answer = answer

        def completion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            params = kwargs.get("optional_params") or {}
            text = self._answer(model, messages, params.get("seed"))
            return _make_response(litellm, model, text, messages)

        async def acompletion(
            self, model: str, messages: list[Any], *args: Any, **kwargs: Any
        ) -> Any:
            return self.completion(model, messages, *args, **kwargs)

    existing = [p for p in (litellm.custom_provider_map or []) if p.get("provider") not in {"sim", "sim-judge"}]
    litellm.custom_provider_map = [
        *existing,
        {"provider": "sim", "custom_handler": SimProvider(sim_answer)},
        {"provider": "sim-judge", "custom_handler": SimProvider(sim_judge_answer)},
    ]
    # litellm reads the map into its provider list when a call is made through it.
    from litellm.utils import custom_llm_setup

    custom_llm_setup()
