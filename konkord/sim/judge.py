"""The simulated judge: reads both framed answers and decides, the truth when sure."""

from __future__ import annotations

import hashlib
import random
from typing import Any

from konkord.sim.confidence import verdict_probabilities
from konkord.sim.params import SimJudgeParams, judge_params, seeded_rng
from konkord.sim.reading import Reading, read_answer
from konkord.sim.tasks import TaskView, view_from_judge_message


def _judge_view(messages: list[dict[str, Any]]) -> tuple[TaskView, str, str] | None:
    from konkord.configuration.judge_frame import split_framed_answers

    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        text = str(message.get("content") or "")
        try:
            first, second = split_framed_answers(text)
        except ValueError:
            continue
        return view_from_judge_message(text), first, second
    return None


def sim_judge_answer(model: str, messages: list[dict[str, Any]], seed: int | None) -> str:
    """A simulated judge's response in the real format: a short rationale, then a verdict line."""
    return sim_judge_reply(model, messages, seed)[0]


def sim_judge_reply(
    model: str, messages: list[dict[str, Any]], seed: int | None
) -> tuple[str, dict[str, float]]:
    """The response and the probabilities the judge puts on "1", "2" and "tie" (its verdict
    token's log-probabilities, as a provider that returns them would give)."""
    params = judge_params(model)
    found = _judge_view(messages)
    if found is None:
        text = "I could not find two framed answers to compare.\n\nVERDICT: TIE"
        return text, {"1": 0.02, "2": 0.02, "tie": 0.96}
    view, first, second = found
    readings = (read_answer(first, view), read_answer(second, view))
    content = messages[-1].get("content")
    rng = seeded_rng("sim-judge", params.name, content, seed)
    verdict, rationale, basis = _decide(
        params, readings, (len(first), len(second)), rng, fixed=_fixed_order(first, second)
    )
    # A stream of its own, so that adding confidence changed no verdict already drawn.
    confidence_rng = seeded_rng("sim-judge-confidence", params.name, content, seed)
    probs = verdict_probabilities(params, verdict, basis, confidence_rng)
    return f"{rationale}\n\nVERDICT: {verdict}", probs


def _fixed_order(first: str, second: str) -> str:
    """The answer ("1", "2" or "TIE") whose text hashes lower, whichever place it is shown in."""
    if first == second:
        return "TIE"
    one, two = (hashlib.sha256(text.encode()).hexdigest() for text in (first, second))
    return "1" if one < two else "2"


def judge_decision(
    params: SimJudgeParams,
    readings: tuple[Reading, Reading],
    lengths: tuple[int, int],
    rng: random.Random,
    fixed: str = "TIE",
) -> tuple[str, str]:
    """("1" | "2" | "TIE", rationale): the truth when sure, else a tie, length, the `fixed`
    arbitrary order of the texts, or position."""
    verdict, rationale, _ = _decide(params, readings, lengths, rng, fixed)
    return verdict, rationale


def _decide(
    params: SimJudgeParams,
    readings: tuple[Reading, Reading],
    lengths: tuple[int, int],
    rng: random.Random,
    fixed: str = "TIE",
) -> tuple[str, str, str]:
    """The decision, its rationale, and what it rests on: read, tie, length, fixed, position."""
    one, two = readings
    if rng.random() < params.accuracy:
        if one.defects == two.defects:
            if one.defects == 0:
                return "TIE", "Both answers are correct and neither is clearly better.", "read"
            return (
                "TIE",
                f"Both answers have problems: Answer 1 {one.note}; Answer 2 {two.note}.",
                "read",
            )
        better, worse = ("1", two) if one.defects < two.defects else ("2", one)
        good = one if better == "1" else two
        other = "2" if better == "1" else "1"
        return better, f"Answer {better} {good.note}, while Answer {other} {worse.note}.", "read"
    unsure = "Both answers address the task and I cannot tell them apart with confidence."
    if rng.random() < params.tie_rate:
        return "TIE", unsure, "tie"
    if rng.random() < params.length_bias and lengths[0] != lengths[1]:
        longer = "1" if lengths[0] > lengths[1] else "2"
        return longer, f"{unsure} Answer {longer} is more thorough.", "length"
    # Drawn only for a judge that has this habit, so other judges' verdicts stay as they were.
    if params.fixed_order > 0 and rng.random() < params.fixed_order:
        why = f"{unsure} I prefer Answer {fixed}." if fixed != "TIE" else unsure
        return fixed, why, "fixed"
    if rng.random() < params.position_bias:
        return "1", f"{unsure} On balance Answer 1 reads slightly better.", "position"
    return "2", f"{unsure} On balance Answer 2 reads slightly better.", "position"
