"""Display names: runs.json may give each model and judge a short name ("Claude 3.5 Sonnet" for
`openrouter/anthropic/claude-3.5-sonnet`). Pages and the terminal show the name; the evidence
and the results file keep the full spec, which the site shows once on the methodology page and
in a tooltip.

Renaming happens on a copy of the results at the moment of showing them, so a new name never
makes a results file stale and the file offered for download is the one `konkord report` wrote.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

Names = Mapping[str, str]  # full spec -> display name
_Model = TypeVar("_Model", bound=BaseModel)

# Free text written by a model, a judge or a person: shown exactly as recorded, never renamed.
_VERBATIM = frozenset(
    {
        "rationale",
        "rationale_ab",
        "rationale_ba",
        "raw",
        "first_raw",
        "system_prompt",
        "rubric",
        "context",
        "error",
        "output",
        "detail",
        "prompt",
    }
)
# Sentences Konkord wrote about models and judges: their specs are replaced inside the text.
_PROSE = frozenset(
    {"methods", "captions", "claims", "disagreements", "summary", "method", "key", "label"}
)


def shown(spec: str, names: Names) -> str:
    """The name to show for `spec`: its display name, else the spec itself."""
    return names.get(spec, spec)


def _spec_pattern(names: Names) -> re.Pattern[str] | None:
    specs = sorted((spec for spec, name in names.items() if spec != name), key=len, reverse=True)
    if not specs:
        return None
    # A spec stands alone: not inside a longer name (`gpt-4` in `gpt-4o`), though a sentence's
    # full stop may follow it.
    return re.compile(
        r"(?<![\w/:=.-])(" + "|".join(re.escape(s) for s in specs) + r")(?![\w/:=-])(?!\.\w)"
    )


def rename_text(text: str, names: Names) -> str:
    """`text` with every full spec it names replaced by its display name."""
    pattern = _spec_pattern(names)
    return text if pattern is None else pattern.sub(lambda m: names[m.group(1)], text)


def rename_data(data: Any, names: Names) -> Any:
    """Plain JSON data with every value (and key) that is a spec replaced by its display name,
    and the specs inside Konkord's own sentences too; recorded free text is left as it was."""
    if not any(spec != name for spec, name in names.items()):
        return data
    pattern = _spec_pattern(names)

    def walk(value: Any, prose: bool) -> Any:
        if isinstance(value, str):
            if value in names:
                return names[value]
            if prose and pattern is not None:
                return pattern.sub(lambda m: names[m.group(1)], value)
            return value
        if isinstance(value, list):
            return [walk(item, prose) for item in value]
        if isinstance(value, dict):
            claim = "text" in value and "models" in value
            return {
                (names.get(key, key) if isinstance(key, str) else key): (
                    item
                    if key in _VERBATIM or (key == "text" and not claim)
                    else walk(item, prose or key in _PROSE or (claim and key == "text"))
                )
                for key, item in value.items()
            }
        return value

    return walk(data, False)


def renamed(model: _Model, names: Names) -> _Model:
    """A pydantic object (results, a block of them) as it should be shown: specs replaced by
    display names. The same object when no name differs from its spec."""
    if not any(spec != name for spec, name in names.items()):
        return model
    return type(model).model_validate(rename_data(model.model_dump(mode="json"), names))


def specs_by_name(names: Names) -> dict[str, str]:
    """Display name -> full spec, for the tooltips that say what a name stands for."""
    return {name: spec for spec, name in names.items() if spec != name}
