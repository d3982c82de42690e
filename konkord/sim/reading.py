"""Reading answers: the simulated judge's (and labeller's) eye."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from konkord.sim.latent import MAX_DEFECTS
from konkord.sim.tasks import (
    CURT_CLOSING,
    EXCEPTION_PHRASES,
    NUMBER,
    TaskView,
    code_of,
    known_numbers,
    policy_facts,
)


@dataclass(frozen=True)
class Reading:
    """What a reader finds wrong with one answer: how many defects, and the first in words."""

    defects: int
    note: str


def read_answer(answer: str, view: TaskView) -> Reading:
    """Count the visible defects of an answer to a task, the way a careful reader would."""
    if view.reference is not None and (reference := code_of(view.reference)) is not None:
        code = code_of(answer)
        if code is None:
            return Reading(MAX_DEFECTS + 1, "gives no code")
        regions = _changed_regions(reference, code)
        if regions == 0:
            return Reading(0, "matches the reference behaviour")
        return Reading(regions, f"departs from the reference in {_first_change(reference, code)}")
    if view.reference is not None or (view.context and policy_facts(view.context)):
        return _read_support(answer, view)
    wrong = []
    for x, y, z in re.findall(r"(\d+) x (\d+) = (-?\d+)", answer):
        if int(x) * int(y) != int(z):
            wrong.append(f"{x} x {y} = {z}")
    if wrong:
        return Reading(len(wrong), f"gets {wrong[0]} wrong")
    return Reading(0, "has no visible mistakes")


def _first_change(reference: str, code: str) -> str:
    ref = [line.rstrip() for line in reference.splitlines() if line.strip()]
    got = [line.rstrip() for line in code.splitlines() if line.strip()]
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(a=ref, b=got, autojunk=False).get_opcodes():
        if tag in ("replace", "insert") and j1 < j2:
            return f"`{got[j1].strip()}`"
        if tag == "delete":
            return "leaving out a line of the reference"
    return "its code"


def _read_support(answer: str, view: TaskView) -> Reading:
    known = known_numbers(view)
    problems = [
        f"quotes {n}, which the policy does not say"
        for n in NUMBER.findall(answer)
        if n not in known
    ]
    problems += ["promises an exception to the policy" for p in EXCEPTION_PHRASES if p in answer]
    if CURT_CLOSING in answer:
        problems.append("offers no next step")
    if not problems:
        return Reading(0, "states the policy correctly and offers a next step")
    return Reading(len(problems), problems[0])


def _changed_regions(reference: str, code: str) -> int:
    """How many places `code` departs from `reference`: a changed line is one place, however
    many lines a deletion or insertion spans."""
    ref = [line.rstrip() for line in reference.splitlines() if line.strip()]
    got = [line.rstrip() for line in code.splitlines() if line.strip()]
    matcher = difflib.SequenceMatcher(a=ref, b=got, autojunk=False)
    places = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "replace":
            places += min(i2 - i1, j2 - j1) + (i2 - i1 != j2 - j1)
        elif tag != "equal":
            places += 1
    return places
