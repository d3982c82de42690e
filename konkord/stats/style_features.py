"""Style features of an answer, and their normalised differences for a pair.

A judge (or a person) may prefer the longer or the more formatted of two answers whatever
they say. Style control needs each answer's style measured the same way every time, without
a network and without a model: so the features are counted from the text by fixed rules.

- `tokens`: length in tokens of a fixed rule, `TOKEN_PATTERN`: a run of letters or digits
  (Unicode word characters) is one token, any other non-space character is one token. It is
  not a model's tokenizer, but it is documented, needs nothing downloaded, and orders answers
  by length as any tokenizer does (the fit only sees normalised differences).
- `headers`: Markdown ATX headers, lines starting with one to six `#` and a space.
- `list_items`: lines starting with `-`, `*` or `+` and a space, or a number and `.` or `)`.
- `bold`: `**bold**` and `__bold__` spans.
- `code_blocks`: fenced code blocks (a line of three or more backticks or tildes opens one,
  the next such line closes it; an unclosed fence counts).

Lines inside fenced code are not read for headers, list items or bold. For a pair, each
feature's normalised difference is (a - b) / (a + b), as Chatbot Arena's style control takes
it: in [-1, 1], 0 when both are 0.
"""

from __future__ import annotations

import contextlib
import operator
import re
from collections.abc import Sequence

import numpy as np

from .pairs import FloatArray

FEATURES: tuple[str, ...] = ("tokens", "headers", "list_items", "bold", "code_blocks")
FEATURE_WORDS: dict[str, str] = {
    "tokens": "length in tokens",
    "headers": "Markdown headers",
    "list_items": "list items",
    "bold": "bold spans",
    "code_blocks": "code blocks",
}
FEATURE_RULES: dict[str, str] = {
    "tokens": "length in tokens: each run of letters or digits is one token, and so is each "
    "other non-space character (a fixed rule, not a model's tokenizer)",
    "headers": "Markdown headers: lines starting with one to six # and a space",
    "list_items": "list items: lines starting with -, * or + and a space, or a number and . or )",
    "bold": "bold spans: **bold** and __bold__",
    "code_blocks": "code blocks: fenced blocks of ``` or ~~~ (lines inside them count for "
    "nothing else)",
}
TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_HEADER = re.compile(r"^\s{0,3}#{1,6}\s+\S")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+\S")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
# Each ASCII character as the token rule sees it, taken from the pattern itself: "a" where it
# is a word character, " " where it is space, "." where it is a token on its own.
_ASCII_CLASSES = bytes(
    ord("a" if re.fullmatch(r"\w", chr(c)) else " " if re.fullmatch(r"\s", chr(c)) else ".")
    for c in range(128)
) + b"." * 128


def token_count(text: str) -> int:
    """How many tokens `TOKEN_PATTERN` finds in `text`. ASCII text (most answers) is counted
    without the pattern: each character mapped to its class in one pass in C, the tokens are
    then the "." characters and the runs of "a" (a tenth of the time `findall` takes, which
    walks the pattern's two branches at every character)."""
    if not text.isascii():
        return len(TOKEN_PATTERN.findall(text))
    classes = text.encode("ascii").translate(_ASCII_CLASSES)
    return classes.count(b".") + len(classes.replace(b".", b" ").split())


def style_features(text: str) -> dict[str, int]:
    """Count every feature of `FEATURES` in one answer's text."""
    counts = dict.fromkeys(FEATURES, 0)
    counts["tokens"] = token_count(text)
    # Each rule is tried only on text holding the characters it needs (a fence three ` or ~,
    # a header a #, bold ** or __): the same counts, without three patterns on every line of
    # 20,000 answers at 20 models x 1,000 tasks.
    fences = "```" in text or "~~~" in text
    fence: str | None = None
    for line in text.splitlines():
        opened = _FENCE.match(line) if fences else None
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            counts["code_blocks"] += 1
            continue
        if "#" in line and _HEADER.match(line):
            counts["headers"] += 1
        elif _LIST_ITEM.match(line):
            counts["list_items"] += 1
        if "**" in line or "__" in line:
            counts["bold"] += len(_BOLD.findall(line))
    return counts


def normalised_difference(a: FloatArray, b: FloatArray) -> FloatArray:
    """(a - b) / (a + b) elementwise, 0 where both are 0 (features are counts, never < 0)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    total = a + b
    out: FloatArray = np.divide(a - b, total, out=np.zeros(np.broadcast(a, b).shape),
                                where=total != 0)
    return out


def feature_matrix(counts: Sequence[dict[str, int]], names: Sequence[str] = FEATURES) -> FloatArray:
    """Stack per-answer counts into (N, K) in the order of `names` (a name an answer's counts
    lack counts 0)."""
    if len(names) > 1:  # each answer's counts taken at C speed where every name is there
        with contextlib.suppress(KeyError):
            taken = list(map(operator.itemgetter(*names), counts))
            return np.array(taken, dtype=np.float64).reshape(len(counts), len(names))
    return np.array([[float(c.get(n, 0)) for n in names] for c in counts],
                    dtype=np.float64).reshape(len(counts), len(names))
