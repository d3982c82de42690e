"""The calibration page's context: the headline figures first, then what a reader drills into.

The page leads with how often each judge agrees with people and picks the answer that passes
the tests, then a compact table by model pair, and folds the long lists (disagreements with
people, and with the tests) by task. Everything here regroups the results file; nothing is
recomputed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from konkord.results.files import task_ids
from konkord.results.schema import Calibration, Disagreement, Results
from konkord.site.folding import is_folded, notable
from konkord.site.formatting import anchor

AGREEMENT_KEYS = ("n", "picks_passing", "ties", "picks_failing", "rate", "low", "high")


def _agreement(data: Any) -> dict[str, Any] | None:
    """One side's agreement with the tests, every key present (None where the free-form block
    lacks it), or None when it counts nothing."""
    if not isinstance(data, Mapping) or not data.get("n"):
        return None
    return {key: data.get(key) for key in AGREEMENT_KEYS}


def _by_task(items: Sequence[Any], task_order: Mapping[str, int], task_of: Any) -> list[Any]:
    groups: dict[str, list[Any]] = {}
    for item in items:
        groups.setdefault(task_of(item), []).append(item)
    ordered = sorted(groups.items(), key=lambda kv: (task_order.get(kv[0], len(task_order)), kv[0]))
    return [{"task_id": task_id, "items": members} for task_id, members in ordered]


def tests_view(objective: Mapping[str, Any] | None, task_order: Mapping[str, int]) -> Any:
    """The "against executed tests" figures in reading order, or None without objective pairs."""
    if not objective or not objective.get("objective_pairs"):
        return None
    judge = objective.get("judge") or {}
    human = objective.get("human") or {}
    people_by_pair = {
        (row.get("model_a"), row.get("model_b")): _agreement(row.get("agreement", row))
        for row in human.get("by_model_pair", [])
    }
    pairs = [
        {
            "model_a": row.get("model_a"),
            "model_b": row.get("model_b"),
            "judge": _agreement(row.get("agreement", row)),
            "people": people_by_pair.get((row.get("model_a"), row.get("model_b"))),
        }
        for row in judge.get("by_model_pair", [])
    ]
    misses = [p for p in judge.get("pairs", []) if p.get("outcome") == "failing"]
    return {
        "pairs_total": objective.get("objective_pairs", 0),
        "both_passed": objective.get("both_passed", 0),
        "both_failed": objective.get("both_failed", 0),
        "judge": _agreement(judge.get("overall")),
        "calls": _agreement((objective.get("calls") or {}).get("overall")),
        "people": _agreement(human.get("overall")),
        "by_pair": pairs,
        "misses": len(misses),
        "misses_by_task": _by_task(misses, task_order, lambda p: p["task_id"]),
    }


def disagreements_by_task(
    calibration: Calibration, task_order: Mapping[str, int]
) -> list[dict[str, Any]]:
    """Judge-vs-people disagreements grouped by task, tasks in suite order."""
    items: list[Disagreement] = list(calibration.disagreements)
    return list(_by_task(items, task_order, lambda d: d.task_id))


def verdict_ids(
    results: Results, judge: str, items: Sequence[tuple[str, str, str]]
) -> dict[tuple[str, str, str], str]:
    """Where the verdict card each (task, model a, model b) item points to is on its task page
    (`#card`, or `verdicts/#card` when a folded page keeps it on its second page),
    under either order of the two models: a label or a tests result may name a pair the other
    way round from the judge's verdict, and the card's id follows the verdict. An item with no
    card has no entry (its link opens the task page at the top)."""
    wanted = {(task_id, frozenset((a, b))) for task_id, a, b in items}
    wanted_tasks = {task_id for task_id, _ in wanted}
    ids: dict[tuple[str, str, str], str] = {}
    for index, task_id in enumerate(task_ids(results.tasks)):
        if task_id not in wanted_tasks:
            continue  # a large run's tasks are read from their files: only those wanted
        task = results.tasks[index]
        folded = is_folded(task)
        for c in task.comparisons:
            pair = frozenset((c.model_a, c.model_b))
            if c.judge == judge and (task.id, pair) in wanted:
                card = anchor(judge, c.model_a, c.model_b)
                # a folded task page shows this card only if the pair is notable
                page = (
                    "verdicts/"
                    if folded
                    and not notable(
                        [d for d in task.comparisons if frozenset((d.model_a, d.model_b)) == pair]
                    )
                    else ""
                )
                ids[(task.id, c.model_a, c.model_b)] = ids[(task.id, c.model_b, c.model_a)] = (
                    f"{page}#{card}"
                )
    return ids


def calibration_sections(results: Results, sections: list[dict[str, Any]]) -> dict[str, Any]:
    """Fill each judge section and return the page-wide headline."""
    task_order = {task_id: index for index, task_id in enumerate(task_ids(results.tasks))}
    people_vs_people = None
    people_vs_tests = None
    for section in sections:
        calibration: Calibration = section["block"].calibration
        section["calibration"] = calibration
        section["objective"] = calibration.objective
        section["tests"] = tests_view(calibration.objective, task_order)
        section["disagreements_by_task"] = disagreements_by_task(calibration, task_order)
        misses = section["tests"]["misses_by_task"] if section["tests"] else []
        section["verdict_ids"] = verdict_ids(
            results,
            section["block"].judge,
            [(d.task_id, d.model_a, d.model_b) for d in calibration.disagreements]
            + [(p["task_id"], p["model_a"], p["model_b"]) for g in misses for p in g["items"]],
        )
        if people_vs_people is None and calibration.human_human is not None:
            people_vs_people = calibration.human_human
        if people_vs_tests is None and section["tests"] and section["tests"]["people"]:
            people_vs_tests = section["tests"]["people"]
    return {
        "people_vs_people": people_vs_people,
        "people_vs_tests": people_vs_tests,
        "any_tests": any(s["tests"] for s in sections),
        "any_labels": any(s["calibration"].status == "calibrated" for s in sections),
    }
