"""A ranking in words: the supported orderings, and for each unseparated neighbour the
tasks that would likely separate it (task counts at the precision they deserve)."""

from __future__ import annotations

from collections.abc import Sequence

from .planning import planning_margin
from .ranking import Ranking, Separation


def about_tasks(tasks: int) -> str:
    """A task count at the precision it deserves: two significant figures, and past 10,000
    only "more than 10,000" (an estimate that far out says only that it is far)."""
    if tasks > 10_000:
        return "more than 10,000"
    digits = len(str(tasks))
    rounded = tasks if digits <= 2 else round(tasks, 2 - digits)
    return f"about {rounded:,}"


def _join(words: Sequence[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def describe_claims(ranking: Ranking, names: Sequence[str]) -> list[str]:
    """The supported orderings in words, one sentence per model that is above any other."""
    level = round(100 * ranking.differences.level)
    if not ranking.claims:
        diffs = ranking.differences
        if ranking.family is not None and ((diffs.lower > 0.0) | (diffs.upper < 0.0)).any():
            return [
                "The data supports no ordering: no pair's difference in log-strength clears "
                f"the bar that holds all of a ranking's claims together at {level}% (each "
                f"pair's {level}% interval widened {ranking.family.final_factor:.2f}-fold) "
                "with the exact sign test over tasks agreeing."
            ]
        return [
            f"The data supports no ordering: every pair's {level}% interval of the "
            "difference in log-strength contains 0."
        ]
    below: dict[int, list[int]] = {}
    for claim in ranking.claims:
        below.setdefault(claim.upper, []).append(claim.lower)
    sentences = []
    for model in ranking.order.tolist():
        if model in below:
            others = [names[b] for b in below[model]]
            sentences.append(f"{names[model]} ranks above {_join(others)}.")
    return sentences


def planned_tasks_text(sep: Separation) -> str:
    """What `planned_tasks` promises, with its power and the gap it plans on."""
    if sep.tasks_needed is None or sep.planning_gap is None:
        if sep.difference == 0.0:
            return "no number of tasks separates a gap of 0."
        return (
            "the gap observed is too uncertain to say how many tasks would separate them "
            f"(it is within {planning_margin(sep.power):.2f} standard errors of 0)."
        )
    percent = round(100 * sep.power)
    article = "an" if str(percent).startswith("8") or percent in (11, 18) else "a"
    return (
        f"planning on a gap of {sep.planning_gap:.2g} in log-strength (the gap observed less "
        f"{planning_margin(sep.power):.2f} standard errors: the true gap is larger with about "
        f"{round(50 + 50 * sep.power)}% probability), {about_tasks(sep.tasks_needed)} tasks would give {article} "
        f"{percent}% chance to separate them."
    )


def describe_separations(ranking: Ranking, names: Sequence[str]) -> list[str]:
    """For each unseparated adjacent pair, the tasks that would likely separate it."""
    out = []
    for sep in ranking.separations:
        pair = f"{names[sep.upper]} and {names[sep.lower]}"
        out.append(
            f"{pair} are not separated at {ranking.n_tasks} tasks; {planned_tasks_text(sep)}"
        )
    return out


def not_separated_text(
    upper: str,
    lower: str,
    sep: Separation,
    n_tasks: int,
    plan: bool = True,
    level: float = 0.95,
) -> str:
    """Why two neighbours are not ordered, in words that are literally true of this run; with
    `plan`, and an interval short of the family-wise bar, how many tasks would likely
    separate them."""
    if sep.interval_excludes_zero and not sep.family_excludes_zero:
        text = (
            f"{upper} and {lower} are not separated: the {round(100 * level)}% interval of "
            f"their difference excludes 0, but not when widened {sep.family_factor:.2f}-fold, "
            "the bar that holds every claim of this ranking together to a "
            f"{round(100 * (1 - level))}% chance of any being wrong."
        )
    elif sep.interval_excludes_zero and sep.sign_p is not None:
        text = (
            f"{upper} and {lower} are not separated: the interval of their difference excludes "
            f"0, but an exact sign test over the tasks gives p = {sep.sign_p:.3g}."
        )
    else:
        text = (
            f"{upper} and {lower} are not separated: the interval of their difference contains 0."
        )
    if plan and not sep.family_excludes_zero:
        text += f" This run has {n_tasks} tasks; {planned_tasks_text(sep)}"
    return text
