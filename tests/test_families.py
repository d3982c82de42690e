"""Provider-family resolution on a table of (judge, model) pairs, and the refusal messages."""

from __future__ import annotations

import pytest

from konkord.errors import KonkordError
from konkord.providers.families import check_judge_independence, family_of

REFUSED, ALLOWED = "refused", "allowed"

# (judge, ranked model, expected outcome, the family both share when refused)
PAIRS: list[tuple[str, str, str, str | None]] = [
    ("openrouter/anthropic/claude-x", "claude-y", REFUSED, "anthropic"),
    ("vertex_ai/gemini-x", "openrouter/google/gemma-y", REFUSED, "google"),
    ("openrouter/mistralai/mistral-small", "gpt-5", ALLOWED, None),
    ("gpt-5", "o3-mini", REFUSED, "openai"),
    ("openrouter/openai/gpt-4o", "azure/gpt-4o-mini", REFUSED, "openai"),
    # "openai" after a route names the vendor, even for a name no family prefix knows
    ("openrouter/openai/custom-model", "o3-mini", REFUSED, "openai"),
    ("openrouter/openai/custom-model", "openai/custom-model-2", ALLOWED, None),
    ("chatgpt-4o-latest", "o1", REFUSED, "openai"),
    ("o4-mini", "claude-sonnet-4", ALLOWED, None),
    ("bedrock/us.anthropic.claude-3-5-sonnet", "anthropic/claude-opus-4", REFUSED, "anthropic"),
    ("bedrock/anthropic.claude-3-haiku", "bedrock/meta.llama3-70b", ALLOWED, None),
    ("together_ai/meta-llama/Llama-3-70b", "groq/llama3-8b-8192", REFUSED, "meta"),
    ("fireworks_ai/accounts/fireworks/models/llama-v3p1-405b", "meta-llama-3", REFUSED, "meta"),
    ("codestral-latest", "mistral/mistral-large", REFUSED, "mistral"),
    ("mixtral-8x7b", "openrouter/mistralai/ministral-8b", REFUSED, "mistral"),
    ("openrouter/x-ai/grok-4", "xai/grok-3-mini", REFUSED, "xai"),
    ("openrouter/qwen/qwen3-235b", "dashscope/qwen-max", REFUSED, "alibaba"),
    ("qwq-32b", "deepseek/deepseek-chat", ALLOWED, None),
    ("deepseek-reasoner", "openrouter/deepseek/deepseek-r1", REFUSED, "deepseek"),
    ("command-r-plus", "cohere/command-a", REFUSED, "cohere"),
    ("gemini/gemini-2.5-pro", "vertex_ai/gemini-2.0-flash", REFUSED, "google"),
    ("vertex_ai/claude-3-7-sonnet", "gemini-2.5-flash", ALLOWED, None),
    ("litellm_proxy/gpt-4.1", "azure_ai/gpt-4.1-nano", REFUSED, "openai"),
    ("openrouter/moonshotai/kimi-k2", "kimi-latest", REFUSED, "moonshot"),
    ("openrouter/google/gemini-2.5-pro", "sim/alpha", ALLOWED, None),
    ("openai/test-judge", "openai/test-model", ALLOWED, None),
    ("acme/judge-1", "acme/model-2", REFUSED, "acme"),
    ("acme/judge-1", "openrouter/other-vendor/model-2", ALLOWED, None),
    ("yi-large", "yield-model", ALLOWED, None),
    ("phi-4", "azure/phi-3-mini", REFUSED, "microsoft"),
    ("gpt-oss-120b", "groq/openai/gpt-oss-20b", REFUSED, "openai"),
    ("ollama/gemma3", "ollama/llama3.2", ALLOWED, None),
]


def test_table_is_large_enough() -> None:
    assert len(PAIRS) >= 25


@pytest.mark.parametrize(("judge", "model", "outcome", "family"), PAIRS)
def test_judge_model_pairs(judge: str, model: str, outcome: str, family: str | None) -> None:
    if outcome == ALLOWED:
        check_judge_independence(judge, [model])
        assert family_of(judge).name != family_of(model).name
        return
    with pytest.raises(KonkordError) as refused:
        check_judge_independence(judge, [model])
    message = str(refused.value)
    assert f'"{judge}"' in message and f'"{model}"' in message
    assert f'"{family}" family' in message


def test_every_model_of_the_run_counts_not_only_the_first() -> None:
    with pytest.raises(KonkordError, match='"claude-haiku-4"'):
        check_judge_independence(
            "anthropic/claude-opus-4", ["gpt-5", "gemini-2.5-pro", "claude-haiku-4"]
        )


def test_a_judge_that_is_a_ranked_model_is_refused() -> None:
    with pytest.raises(KonkordError, match='judge "sim/alpha" is also a ranked model'):
        check_judge_independence("sim/alpha", ["sim/alpha", "sim/beta"])


def test_unknown_vendor_is_its_own_family_and_the_message_says_so() -> None:
    family = family_of("openrouter/acme/thinker-9")
    assert (family.name, family.known) == ("acme", False)
    with pytest.raises(KonkordError, match="an unknown vendor is its own family"):
        check_judge_independence("openrouter/acme/thinker-9", ["acme/writer-2"])
    notes = check_judge_independence("openrouter/acme/thinker-9", ["gpt-5"])
    assert notes == [
        'judge "openrouter/acme/thinker-9": vendor not known to Konkord, treated as its own '
        'family "acme"'
    ]


def test_known_families_give_no_note() -> None:
    assert check_judge_independence("claude-sonnet-4", ["gpt-5", "sim/beta"]) == []


def test_empty_name_is_an_error() -> None:
    with pytest.raises(KonkordError, match="empty model name"):
        family_of(" ")
