"""A judge's confidence in its own verdict: read from the verdict token's log-probabilities, or
from the vote share of several samples.

A cascade trusts a cheap judge only where it is sure, so the judge's certainty must come from the
model itself, not from its prose. OpenAI-compatible providers return, for each generated token,
the log-probabilities of the most likely alternatives (`logprobs` / `top_logprobs`); the token
that carries the verdict ("1", "2" or "TIE" after "VERDICT:") thus tells how much weight the model
put on each outcome. Those three are renormalised to sum to one. Probabilities are kept in screen
terms ("1", "2", "tie") as the judge saw them; `to_models` turns them into model terms.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Probs = dict[str, float]  # "1" | "2" | "tie" (screen terms) or "a" | "b" | "tie" (model terms)
TokenLogprob = Mapping[str, Any]  # {"token": str, "logprob": float, "top": [[token, logprob]]}

POSITIONS = ("1", "2", "tie")
_VERDICT_VALUE = re.compile(r"VERDICT[^A-Za-z0-9\n]*(1|2|TIE)\b", re.IGNORECASE)


def outcome_of_token(token: str) -> str | None:
    """The outcome a verdict token stands for: "1", "2", "tie" (any start of TIE), or None."""
    core = re.sub(r"[^A-Za-z0-9]", "", token).upper()
    if core in ("1", "2"):
        return core
    if core and "TIE".startswith(core):
        return "tie"
    return None


def _verdict_offset(text: str) -> int | None:
    """Where the value of the judge's last verdict line starts in `text`."""
    found = list(_VERDICT_VALUE.finditer(text))
    return found[-1].start(1) if found else None


def verdict_probs(tokens: Sequence[TokenLogprob]) -> Probs | None:
    """P("1"), P("2"), P("tie") at the verdict token, renormalised; None if it cannot be read.

    `tokens` is the response's token list as `konkord.providers.llm` stores it. The verdict token is the
    one covering the start of the value of the last `VERDICT:` line; its alternatives that name
    no outcome (a space, a quote) are left out before renormalising."""
    text = "".join(str(t.get("token", "")) for t in tokens)
    offset = _verdict_offset(text)
    if offset is None:
        return None
    position = 0
    for token in tokens:
        piece = str(token.get("token", ""))
        if position <= offset < position + len(piece):
            return _probs_at(token)
        position += len(piece)
    return None


def _probs_at(token: TokenLogprob) -> Probs | None:
    mass: Probs = dict.fromkeys(POSITIONS, 0.0)
    seen: dict[str, float] = {}
    for alternative in token.get("top") or []:
        seen[str(alternative[0])] = float(alternative[1])
    chosen = str(token.get("token", ""))
    if chosen not in seen and outcome_of_token(chosen) not in {outcome_of_token(t) for t in seen}:
        seen[chosen] = float(token.get("logprob", -math.inf))  # a list without the chosen token
    for piece, logprob in seen.items():
        outcome = outcome_of_token(piece)
        if outcome is not None and math.isfinite(logprob):
            mass[outcome] += math.exp(logprob)
    total = sum(mass.values())
    if total <= 0.0:
        return None
    return {k: v / total for k, v in mass.items()}


def vote_share(positions: Iterable[str]) -> Probs | None:
    """P("1"), P("2"), P("tie") as the share of samples that gave each verdict."""
    votes = Counter(p for p in positions if p in POSITIONS)
    n = sum(votes.values())
    if n == 0:
        return None
    return {k: votes[k] / n for k in POSITIONS}


def to_models(probs: Mapping[str, float], order: str) -> Probs:
    """Screen terms to model terms: in order "ab" Answer 1 is model_a, in "ba" it is model_b."""
    one, two = float(probs.get("1", 0.0)), float(probs.get("2", 0.0))
    tie = float(probs.get("tie", 0.0))
    if order == "ab":
        return {"a": one, "b": two, "tie": tie}
    return {"a": two, "b": one, "tie": tie}
