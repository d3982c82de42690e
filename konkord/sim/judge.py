"""The simulated judge: reads both framed answers and decides, the truth when sure."""

from __future__ import annotations

import hashlib
import random
from typing import Any

from konkord.sim.params import SimJudgeParams, _rng, judge_params
from konkord.sim.reading import Reading, read_answer
from konkord.sim.tasks import TaskView, view_from_judge_message


def _judge_view(messages: list[dict[str, Any]]) -> tuple[TaskView, str, str] | None:
    from konkord.judge_frame import split_framed_answers

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
    params = judge_params(model)
    found = _judge_view(messages)
    if found is None:
        return "I could not find two framed answers to compare.\n\nVERDICT: TIE"
    view, first, second = found
    readings = (read_answer(first, view), read_answer(second, view))
    rng = _rng("sim-judge", params.name, messages[-1].get("content"), seed)
    verdict, rationale = judge_decision(
        params, readings, (len(first), len(second)), rng, fixed=_fixed_order(first, second)
    )
    return f"{rationale}\n\nVERDICT: {verdict}"


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
    one, two = readings
    if rng.random() < params.accuracy:
        if one.defects == two.defects:
            if one.defects == 0:
                return "TIE", "Both answers are correct and neither is clearly better."
            return "TIE", f"Both answers have problems: Answer 1 {one.note}; Answer 2 {two.note}."
        better, worse = ("1", two) if one.defects < two.defects else ("2", one)
        good = one if better == "1" else two
        other = "2" if better == "1" else "1"
        return better, f"Answer {better} {good.note}, while Answer {other} {worse.note}."
    unsure = "Both answers address the task and I cannot tell them apart with confidence."
    if rng.random() < params.tie_rate:
        return "TIE", unsure
    if rng.random() < params.length_bias and lengths[0] != lengths[1]:
        longer = "1" if lengths[0] > lengths[1] else "2"
        return longer, f"{unsure} Answer {longer} is more thorough."
    # Drawn only for a judge that has this habit, so other judges' verdicts stay as they were.
    if params.fixed_order > 0 and rng.random() < params.fixed_order:
        return fixed, f"{unsure} I prefer Answer {fixed}." if fixed != "TIE" else unsure
    if rng.random() < params.position_bias:
        return "1", f"{unsure} On balance Answer 1 reads slightly better."
    return "2", f"{unsure} On balance Answer 2 reads slightly better."
