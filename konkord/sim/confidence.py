"""The simulated judge's confidence: the probabilities its verdict token would carry.

A judge that read the pair puts most of its weight on its verdict (around `sure_confidence`);
one that could not tell the answers apart spreads it, a little more sure when it went by length.
The failure a cascade must survive: unsure, it takes Answer 1 and reports near-certainty
(`slot_overconfidence`), so in the swapped order it is as sure of the other answer. Each order
alone looks trustworthy; only their disagreement shows it is not.
"""

from __future__ import annotations

import random

from konkord.sim.params import SimJudgeParams

_OUTCOME = {"1": "1", "2": "2", "TIE": "tie"}


def verdict_probabilities(
    params: SimJudgeParams, verdict: str, basis: str, rng: random.Random
) -> dict[str, float]:
    """P("1"), P("2"), P("tie"), with the verdict the most likely of the three."""
    if basis == "read":
        sure = params.sure_confidence
        top = rng.uniform(max(0.4, sure - 0.2), min(0.995, sure + 0.09))
    elif basis == "position" and verdict == "1" and rng.random() < params.slot_overconfidence:
        top = rng.uniform(0.95, 0.995)
    elif basis == "length":
        top = rng.uniform(0.5, 0.85)
    else:
        top = rng.uniform(0.4, 0.62)
    chosen = _OUTCOME[verdict]
    others = [k for k in ("1", "2", "tie") if k != chosen]
    share = rng.uniform(0.35, 0.65)  # keeps each other outcome below the verdict's weight
    rest = 1.0 - top
    return {chosen: top, others[0]: rest * share, others[1]: rest * (1.0 - share)}
