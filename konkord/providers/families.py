"""Provider families: which company made a model, whatever route it is called through.

A judge tends to prefer answers in its own family's style, so a judge must not share a family
with any model it ranks. A litellm model name may carry routing prefixes (openrouter/,
bedrock/, vertex_ai/, ...), a vendor segment under one of many spellings (mistralai, meta-llama,
x-ai), or only a bare name (gpt-5, claude-x). Routes are peeled off, vendor spellings resolved,
and bare names matched by family prefix. A vendor Konkord does not know is its own family.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from konkord.errors import KonkordError

# Hosts and gateways, not makers of models. "openai" is here because litellm uses openai/ for any
# OpenAI-compatible endpoint; OpenAI's own models are recognised by their names (gpt-, o3, ...).
_ROUTES = """
    openrouter litellm_proxy bedrock bedrock_converse sagemaker sagemaker_chat vertex_ai
    vertex_ai_beta azure azure_ai azure_text together_ai together fireworks_ai fireworks groq
    deepinfra anyscale replicate huggingface hf ollama ollama_chat openai text-completion-openai
    text-completion-codestral openai_like custom_openai hosted_vllm vllm lm_studio llamafile
    cloudflare workers_ai nvidia_nim cerebras sambanova novita nebius nscale hyperbolic lambda_ai
    databricks snowflake friendliai baseten github github_copilot predibase featherless_ai
    nlp_cloud aleph_alpha petals clarifai cloudrift watsonx watsonx_text oci volcengine galadriel
    infinity vercel_ai_gateway chutes heroku ovhcloud gradient_ai datarobot sim sim-judge
"""
ROUTING_PREFIXES = frozenset(_ROUTES.split())

# Vendor segment spellings -> family.
VENDOR_ALIASES: dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google": "google",
    "gemini": "google",
    "palm": "google",
    "google-deepmind": "google",
    "mistral": "mistral",
    "mistralai": "mistral",
    "codestral": "mistral",
    "meta": "meta",
    "meta-llama": "meta",
    "facebook": "meta",
    "xai": "xai",
    "x-ai": "xai",
    "qwen": "alibaba",
    "alibaba": "alibaba",
    "alibaba-nlp": "alibaba",
    "dashscope": "alibaba",
    "deepseek": "deepseek",
    "deepseek-ai": "deepseek",
    "cohere": "cohere",
    "cohere_chat": "cohere",
    "cohereforai": "cohere",
    "coherelabs": "cohere",
    "microsoft": "microsoft",
    "amazon": "amazon",
    "nvidia": "nvidia",
    "01-ai": "01-ai",
    "moonshot": "moonshot",
    "moonshotai": "moonshot",
    "zhipuai": "zhipu",
    "z-ai": "zhipu",
    "zai": "zhipu",
    "thudm": "zhipu",
    "ai21": "ai21",
    "ai21labs": "ai21",
    "ibm": "ibm",
    "ibm-granite": "ibm",
    "perplexity": "perplexity",
    "nousresearch": "nous",
    "allenai": "allenai",
    "minimax": "minimax",
    "minimaxai": "minimax",
    "baidu": "baidu",
    "tencent": "tencent",
    "bytedance": "bytedance",
    "bytedance-seed": "bytedance",
    "inflection": "inflection",
    "liquid": "liquid",
    "stepfun": "stepfun",
    "stepfun-ai": "stepfun",
    "reka": "reka",
}

# Bare-name prefixes -> family; checked longest first so "codestral" beats nothing shorter.
NAME_PREFIXES: dict[str, str] = {
    "gpt": "openai",
    "chatgpt": "openai",
    "davinci": "openai",
    "babbage": "openai",
    "text-davinci": "openai",
    "codex": "openai",
    "ft:gpt": "openai",
    "claude": "anthropic",
    "gemini": "google",
    "gemma": "google",
    "palm": "google",
    "chat-bison": "google",
    "text-bison": "google",
    "learnlm": "google",
    "mistral": "mistral",
    "open-mistral": "mistral",
    "mixtral": "mistral",
    "open-mixtral": "mistral",
    "codestral": "mistral",
    "ministral": "mistral",
    "pixtral": "mistral",
    "magistral": "mistral",
    "devstral": "mistral",
    "voxtral": "mistral",
    "llama": "meta",
    "meta-llama": "meta",
    "codellama": "meta",
    "code-llama": "meta",
    "qwen": "alibaba",
    "qwq": "alibaba",
    "qvq": "alibaba",
    "deepseek": "deepseek",
    "grok": "xai",
    "command": "cohere",
    "c4ai": "cohere",
    "aya": "cohere",
    "nova": "amazon",
    "titan": "amazon",
    "phi": "microsoft",
    "wizardlm": "microsoft",
    "jamba": "ai21",
    "j2": "ai21",
    "kimi": "moonshot",
    "moonshot": "moonshot",
    "glm": "zhipu",
    "chatglm": "zhipu",
    "yi": "01-ai",
    "granite": "ibm",
    "nemotron": "nvidia",
    "minimax": "minimax",
    "abab": "minimax",
    "sonar": "perplexity",
    "pplx": "perplexity",
    "ernie": "baidu",
    "hunyuan": "tencent",
    "doubao": "bytedance",
    "hermes": "nous",
    "nous-hermes": "nous",
    "olmo": "allenai",
    "tulu": "allenai",
    "dbrx": "databricks",
    "arctic": "snowflake",
    "lfm": "liquid",
    "reka": "reka",
}

_OPENAI_REASONING = re.compile(r"^o[1-9](?:$|[-_.])")
_BEDROCK_REGION = re.compile(r"^(?:us|eu|apac|ap|ca|global|us-gov)\.")
_PREFIX_ORDER = sorted(NAME_PREFIXES, key=len, reverse=True)


@dataclass(frozen=True)
class Family:
    """A model's provider family and how it was recognised."""

    name: str
    known: bool
    via: str  # e.g. 'vendor "mistralai"', 'name prefix "claude"', 'unknown vendor "acme"'

    def describe(self) -> str:
        """The family as a person reads it in a message."""
        if self.known:
            return f'the "{self.name}" family ({self.via})'
        return f'the "{self.name}" family ({self.via}: an unknown vendor is its own family)'


def _family_of_name(bare: str) -> Family | None:
    name = _BEDROCK_REGION.sub("", bare.lower())
    if "." in name:  # Bedrock style: vendor.model-name
        vendor = name.split(".", 1)[0]
        if vendor in VENDOR_ALIASES:
            return Family(VENDOR_ALIASES[vendor], True, f'vendor "{vendor}"')
    if _OPENAI_REASONING.match(name):
        return Family("openai", True, f'name prefix "{name[:2]}"')
    for prefix in _PREFIX_ORDER:
        # A prefix must end at a word boundary, so "yi-large" is 01-ai but "yield" is not.
        if name.startswith(prefix) and not name[len(prefix) : len(prefix) + 1].isalpha():
            return Family(NAME_PREFIXES[prefix], True, f'name prefix "{prefix}"')
    return None


def family_of(model: str) -> Family:
    """The provider family of a litellm model name, peeling routes and resolving vendors."""
    segments = [s for s in model.strip().lower().split("/") if s]
    if not segments:
        raise KonkordError("an empty model name has no provider family")
    first = True
    # "openai" is a route only in first place: in openrouter/openai/x it names the vendor.
    while len(segments) > 1 and segments[0] in ROUTING_PREFIXES and (
        first or segments[0] != "openai"
    ):
        segments = segments[1:]
        first = False
    # Fireworks-style paths: accounts/<account>/models/<name>
    if len(segments) >= 4 and segments[0] == "accounts" and segments[2] == "models":
        segments = [segments[1], *segments[3:]]
    *vendors, bare = segments
    for vendor in vendors:
        if vendor in VENDOR_ALIASES:
            return Family(VENDOR_ALIASES[vendor], True, f'vendor "{vendor}"')
    by_name = _family_of_name(bare)
    if by_name is not None:
        return by_name
    if vendors:
        return Family(vendors[0], False, f'unknown vendor "{vendors[0]}"')
    return Family(bare, False, f'unknown vendor for "{bare}"')


def check_judge_independence(judge: str, models: tuple[str, ...] | list[str]) -> list[str]:
    """Refuse a judge that is a ranked model or shares a family with one; return notes to show.

    `models` must be every model the run ranks, not only those judged in this call."""
    if judge in models:
        raise KonkordError(
            f'judge "{judge}" is also a ranked model in this run; a model cannot judge '
            "itself (choose a judge from another provider family)"
        )
    judge_family = family_of(judge)
    for model in models:
        model_family = family_of(model)
        if model_family.name == judge_family.name:
            raise KonkordError(
                f'judge "{judge}" and ranked model "{model}" are both in '
                f"{judge_family.describe()}; a judge from the same family tends to favour its "
                "own family's answers (choose a judge from another provider family)"
            )
    notes = []
    if not judge_family.known:
        notes.append(
            f'judge "{judge}": vendor not known to Konkord, treated as its own family '
            f'"{judge_family.name}"'
        )
    return notes
