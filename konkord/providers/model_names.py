"""Model and judge names checked against litellm's model map before anything is called.

A typo such as `gpt-4o-mni` would otherwise cost one failed call (and one failure record) per
task. litellm ships its map as a JSON file; reading that file directly takes milliseconds,
where `import litellm` takes seconds, so the check runs before any stage imports litellm.

Only names litellm can list are checked: bare names (litellm routes those by its map) and
names under a provider whose models the map enumerates. Names served from an `api_base`, the
offline `sim/` providers and providers with user-defined deployments (azure, ollama, bedrock,
...) are accepted as they are.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
from collections.abc import Iterable, Mapping
from importlib import util as importlib_util
from pathlib import Path
from typing import Any

from konkord.errors import KonkordError

MAP_FILE = "model_prices_and_context_window_backup.json"
OFFLINE_PREFIXES = ("sim/", "sim-judge/")
# Providers whose whole catalogue is in litellm's map: a name under them that the map does not
# hold cannot be served, so it is refused before the first call.
LISTED_PROVIDERS = frozenset(
    {"openai", "anthropic", "gemini", "mistral", "deepseek", "xai", "groq", "cohere"}
)
# An `openai/...` name can also be any model of an OpenAI-compatible server set up here.
OPENAI_BASE_VARS = ("OPENAI_API_BASE", "OPENAI_BASE_URL")
CHAT_MODES = frozenset({"chat", "responses", "completion", None})


@functools.cache
def model_map() -> Mapping[str, Any]:
    """litellm's bundled model map, read from the installed package without importing it."""
    spec = importlib_util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    for folder in spec.submodule_search_locations:
        path = Path(folder) / MAP_FILE
        if path.is_file():
            data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            data.pop("sample_spec", None)
            return data
    return {}


def _provider(entry: Any) -> str | None:
    return entry.get("litellm_provider") if isinstance(entry, dict) else None


def _is_chat(entry: Any) -> bool:
    return isinstance(entry, dict) and entry.get("mode") in CHAT_MODES


def is_known(name: str, api_base: str | None = None) -> bool:
    """True when litellm can route `name`, or when it is not ours to doubt (see module doc)."""
    if api_base or name.startswith(OFFLINE_PREFIXES) or name.startswith("ft:"):
        return True
    known = model_map()
    if not known or name in known:
        return True
    if "/" not in name:
        return False
    provider, rest = name.split("/", 1)
    if provider not in LISTED_PROVIDERS:
        return True
    if provider == "openai" and any(os.environ.get(var) for var in OPENAI_BASE_VARS):
        return True
    return _provider(known.get(rest)) == provider


def nearest(name: str, count: int = 3) -> list[str]:
    """The known chat-model names closest to `name`, written the way `name` is written."""
    known = model_map()
    provider, rest = name.split("/", 1) if "/" in name else (None, name)
    candidates: dict[str, str] = {}
    for key, entry in known.items():
        if not _is_chat(entry):
            continue
        if provider is None:
            if "/" not in key:
                candidates[key] = key
        elif key.startswith(f"{provider}/"):
            candidates[key.split("/", 1)[1]] = key
        elif "/" not in key and _provider(entry) == provider:
            candidates[key] = f"{provider}/{key}"
    close = difflib.get_close_matches(rest, list(candidates), n=count, cutoff=0.6)
    return [candidates[match] for match in close]


def check_model_names(names: Iterable[str], option: str, api_base: str | None = None) -> None:
    """Refuse, in one line, the first name litellm cannot route, suggesting the nearest ones.

    Raised before any call or record, so a typo costs nothing.
    """
    for name in names:
        if is_known(name, api_base):
            continue
        close = nearest(name)
        hint = f"did you mean {' or '.join(close)}?" if close else "no similar name is known"
        raise KonkordError(
            f'{option}: "{name}" is not in litellm\'s model map; {hint} (names served by '
            "--api-base or by providers litellm does not list, such as ollama/, are taken as written)"
        )
