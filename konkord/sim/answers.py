"""Writing answers whose quality shows: a simulated model's latent quality as visible defects."""

from __future__ import annotations

import difflib
import functools
import random
import re
from typing import Any

from konkord.sim.latent import answer_quality, defects_for
from konkord.sim.params import model_params, seeded_rng
from konkord.sim.tasks import (
    CURT_CLOSING,
    EXCEPTION_PHRASES,
    NUMBER,
    TaskView,
    code_of,
    known_numbers,
    parses_as_python,
    policy_facts,
    prompt_key,
    view_from_messages,
)


@functools.lru_cache(maxsize=512)
def _bug_candidates(code: str) -> tuple[str, ...]:
    """Every single-bug copy of `code` (cached: planting bugs is the simulator's costly part)."""
    from konkord.sim.mutate import plausible_bugs

    try:
        return tuple(plausible_bugs(code))
    except ValueError:
        return ()


Edit = tuple[int, int, list[str]]  # reference lines [i1, i2) replaced by these lines


def _edits(reference: list[str], mutant: str) -> list[Edit]:
    got = mutant.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(a=reference, b=got, autojunk=False)
    return [(i1, i2, got[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _bugged(code: str, defects: int, rng: random.Random) -> str:
    """`code` with `defects` plausible bugs in different places (fewer if it has no room).

    Single-bug copies are found once per reference and merged line by line where they touch
    different lines, so a model's third bug costs no more than its first."""
    if defects == 0:
        return code
    reference = code.splitlines(keepends=True)
    candidates = [_edits(reference, mutant) for mutant in _bug_candidates(code)]
    picked: list[Edit] = []
    used: set[int] = set()
    planted = 0
    start = int(rng.random() * 3)  # the first few candidates are the most typical bugs
    for offset in range(len(candidates)):
        edits = candidates[(start + offset) % len(candidates)]
        lines = {k for i1, i2, _ in edits for k in range(i1, max(i2, i1 + 1))}
        if not edits or lines & used:
            continue
        trial = sorted([*picked, *edits])
        if parses_as_python(_applied(reference, trial)):
            picked, used, planted = trial, used | lines, planted + 1
        if planted >= defects:
            break
    return _applied(reference, picked)


def _applied(reference: list[str], edits: list[Edit]) -> str:
    out: list[str] = []
    position = 0
    for i1, i2, lines in sorted(edits, key=lambda e: (e[0], e[1])):
        out += reference[position:i1] + lines
        position = i2
    return "".join(out + reference[position:])


_CODE_NOTES = (
    "The function keeps to the standard library and does not modify its inputs.",
    "I kept the structure close to how this is usually written, so it is easy to review.",
    "Names follow the task's wording, and the edge cases are handled inside the function.",
)


def _code_answer(view: TaskView, defects: int, verbose: bool, rng: random.Random) -> str:
    assert view.reference is not None
    reference = code_of(view.reference) or view.reference
    code = _bugged(reference, defects, rng)
    text = f"```{view.language or 'python'}\n{code}\n```"
    if verbose:
        text = "Here is my solution.\n\n" + text + "\n\n" + rng.choice(_CODE_NOTES)
    return text


_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        "a an and are as at be by can do for from has have i if in is it its my of on or our "
        "please that the their this to was we what when will with you your",
    )
)


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOPWORDS}


def relevant_fact(facts: list[str], prompt: str) -> str:
    """The policy fact sharing most words with the customer's message."""
    asked = _words(prompt)
    return max(facts, key=lambda fact: (len(_words(fact) & asked), -facts.index(fact)))


def _misstated(fact: str, known: set[str]) -> str | None:
    """The fact with its first number changed (to one the policy never states), as a careless
    agent would misquote it."""
    found = NUMBER.search(fact)
    if found is None:
        return None
    value = float(found.group(0))
    for wrong in (value * 2, value * 3, value + 7, value + 11, value + 101):
        shown = f"{wrong:g}"
        if shown not in known:
            return fact[: found.start()] + shown + fact[found.end() :]
    return None


_EMPATHY = (
    "I know how frustrating it is when something doesn't go to plan, and I want to make sure "
    "this is sorted out properly for you."
)


def _reply_answer(view: TaskView, defects: int, verbose: bool) -> str:
    """The reference reply, with `defects` visible policy breaks written into it."""
    assert view.reference is not None
    paragraphs = [p.strip() for p in view.reference.strip().split("\n\n") if p.strip()]
    signoff = None
    if len(paragraphs) > 1 and len(paragraphs[-1].split()) <= 4:
        signoff = paragraphs.pop()
    changed = -1
    if defects >= 2:
        known = known_numbers(view)
        for index, paragraph in enumerate(paragraphs[1:], start=1):
            if (misquoted := _misstated(paragraph, known)) is not None:
                paragraphs[index], changed = misquoted, index
                break
        else:
            paragraphs.append(EXCEPTION_PHRASES[1])
            changed = len(paragraphs) - 1
    if defects >= 3:
        if len(paragraphs) > 2 and changed != len(paragraphs) - 1:
            paragraphs[-1] = CURT_CLOSING
        else:
            paragraphs.append(CURT_CLOSING)
    if defects >= 1:
        paragraphs.append(EXCEPTION_PHRASES[0])
    if verbose:
        paragraphs.append(_EMPATHY)
    if signoff is not None:
        paragraphs.append(signoff)
    return "\n\n".join(paragraphs)


def _support_answer(view: TaskView, defects: int, verbose: bool, rng: random.Random) -> str:
    """No reference: a reply composed from the policy fact closest to the customer's message."""
    fact = relevant_fact(policy_facts(view.context), view.prompt).rstrip(".")
    fact_text = fact[0].lower() + fact[1:] if fact[:2] != fact[:2].upper() else fact
    statement = f"Our policy is that {fact_text}."
    misquote = _misstated(fact_text, known_numbers(view))
    lines = ["Hi, thanks for getting in touch."]
    if defects >= 2:
        # the second defect: the policy misquoted, or (with no number to get wrong) waved away
        statement = f"Our policy is that {misquote}." if misquote else EXCEPTION_PHRASES[1]
    lines.append(statement)
    if defects >= 1:
        lines.append(EXCEPTION_PHRASES[0])
    if verbose:
        lines.append(_EMPATHY)
    if defects >= 3:
        lines.append(CURT_CLOSING)
    else:
        lines.append("Reply to this message with your order number and I'll take it from there.")
    lines.append("Best regards,\nSupport")
    return "\n\n".join(lines)


_GENERIC_FACTS = ((7, 8), (12, 12), (9, 6), (15, 4), (23, 3))


def _generic_answer(view: TaskView, defects: int, verbose: bool, rng: random.Random) -> str:
    """No reference and no policy: worked checks, `defects` of them visibly wrong."""
    picks = rng.sample(_GENERIC_FACTS, 3)
    wrong = set(rng.sample(range(3), min(3, defects)))
    lines = ["Here is how I would approach this, with the figures checked as I go:"]
    for index, (x, y) in enumerate(picks):
        product = x * y + (rng.choice((-2, -1, 1, 2)) if index in wrong else 0)
        lines.append(f"- Step {index + 1}: {x} x {y} = {product}.")
    if verbose:
        lines.append("I have laid the steps out one by one so each can be checked separately.")
    return "\n".join(lines)


def sim_answer(model: str, messages: list[dict[str, Any]], seed: int | None) -> str:
    """A simulated model's answer: its latent quality shown as visible defects in the text."""
    params = model_params(model)
    view = view_from_messages(messages)
    task_key = prompt_key(view.prompt)
    defects = defects_for(answer_quality(params, task_key, seed))
    rng = seeded_rng("sim-text", params.name, task_key, seed)
    verbose = rng.random() < params.verbosity
    if view.reference is not None and code_of(view.reference) is not None:
        return _code_answer(view, defects, verbose, rng)
    if view.reference is not None:
        return _reply_answer(view, defects, verbose)
    if view.context and policy_facts(view.context):
        return _support_answer(view, defects, verbose, rng)
    return _generic_answer(view, defects, verbose, rng)
