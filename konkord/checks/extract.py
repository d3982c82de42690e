"""Which code of an answer the checks look at: its fenced block in the suite's language.

Models wrap code in prose and fences; the checks must see only the code. A block tagged with the
suite's answer_language wins; an untagged block is the next best guess; an answer without fences
is taken whole (some models answer with bare code). An empty answer has no code at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# An opening fence of three or more backticks or tildes, its info string, the body, and a
# closing fence of the same character at least as long (CommonMark's rule).
FENCE = re.compile(
    r"^(?P<indent>[ ]{0,3})(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)\n"
    r"(?P<body>.*?)"
    r"(?:^[ ]{0,3}(?P=fence)[`~]*[ \t]*$|\Z)",
    re.MULTILINE | re.DOTALL,
)

LANGUAGE_ALIASES: dict[str, frozenset[str]] = {
    "python": frozenset({"python", "py", "python3", "py3"}),
}


@dataclass(frozen=True)
class ExtractedCode:
    """The code the checks run on and its origin: "fenced", "untagged", "whole" or "none"."""

    code: str
    source: str

    @property
    def empty(self) -> bool:
        """True when the answer holds no code, so every check fails with that reason."""
        return not self.code.strip()


NO_CODE_REASON = "no code in the answer"


def _names(language: str) -> frozenset[str]:
    language = language.strip().lower()
    return LANGUAGE_ALIASES.get(language, frozenset({language}))


def extract_code(answer: str | None, language: str | None) -> ExtractedCode:
    """The longest fenced block in `language` (else untagged, else the whole answer)."""
    text = (answer or "").replace("\r\n", "\n")
    if not text.strip():
        return ExtractedCode("", "none")
    tagged: list[str] = []
    untagged: list[str] = []
    for match in FENCE.finditer(text):
        info = match.group("info").strip().split()
        tag = info[0].lower() if info else ""
        body = match.group("body")
        if tag and (language is None or tag in _names(language)):
            tagged.append(body)
        elif not tag:
            untagged.append(body)
    # The longest block is usually the solution; shorter ones tend to be usage examples.
    for blocks, source in ((tagged, "fenced"), (untagged, "untagged")):
        if blocks:
            return ExtractedCode(max(blocks, key=len), source)
    return ExtractedCode(text, "whole")
