"""The task pages' contexts: the task index and one page per task."""

from __future__ import annotations

from typing import Any

from konkord.results.schema import ComparisonView, Results, TaskView
from konkord.site.contexts import judge_sections
from konkord.site.folding import is_folded, notable
from konkord.site.formatting import anchor
from konkord.site.markdown import summary_line


def task_index_row(task: TaskView) -> dict[str, Any]:
    """A task's row in the task index: counts only, so the index never holds the tasks."""
    flips = sum(1 for c in task.comparisons if c.flipped)
    # A label is of a pair, and each judge's verdict on the pair carries it: count it once.
    labels = len(
        {
            (frozenset((c.model_a, c.model_b)), label.labeller, label.winner)
            for c in task.comparisons
            for label in c.labels
        }
    )
    return {
        "task": {"id": task.id},
        "summary": summary_line(task.prompt),
        "flips": flips,
        "labels": labels,
        "comparisons": len(task.comparisons),
    }


class Fields(dict[str, Any]):
    """A dict whose keys are also its attributes. Jinja reads `p.model_a` by trying the
    attribute first and the key only after an AttributeError, which costs ten times the read:
    at 190 pairs a task page, a tenth of rendering. Keys must not be names of dict methods.
    Each is its own `__dict__`, a cycle: freed by the collector, which is on wherever pages
    render."""

    def __init__(self, **fields: Any) -> None:
        super().__init__(**fields)
        self.__dict__ = self


def _by_pair(task: TaskView) -> dict[frozenset[str], list[ComparisonView]]:
    verdicts: dict[frozenset[str], list[ComparisonView]] = {}
    for comparison in task.comparisons:
        verdicts.setdefault(frozenset((comparison.model_a, comparison.model_b)), []).append(
            comparison
        )
    return verdicts


def _groups(results: Results, comparisons: list[ComparisonView]) -> list[dict[str, Any]]:
    judge_ids = {s["block"].judge: s["id"] for s in judge_sections(results)}
    by_judge: dict[str, list[Any]] = {}
    for comparison in comparisons:
        by_judge.setdefault(comparison.judge, []).append(comparison)
    groups: list[dict[str, Any]] = [
        Fields(judge=judge, id=judge_ids.get(judge, anchor("judge", judge)), comparisons=items)
        for judge, items in by_judge.items()
    ]
    for number, group in enumerate(groups):
        group["open"] = number == 0
    return groups


def task_context(results: Results, index: int) -> dict[str, Any]:
    task = results.tasks[index]
    folded = is_folded(task)
    by_pair = _by_pair(task)
    shown = [
        c
        for c in task.comparisons
        if not folded or notable(by_pair[frozenset((c.model_a, c.model_b))])
    ]
    previous_task = results.tasks[index - 1].id if index > 0 else None
    next_task = results.tasks[index + 1].id if index + 1 < len(results.tasks) else None
    return {
        "task": task,
        "groups": _groups(results, shown),
        "pairs": answer_pairs(task, folded),
        "folded": folded,
        "others": len(task.comparisons) - len(shown),
        "previous_task": previous_task,
        "next_task": next_task,
    }


def other_verdicts_context(results: Results, index: int) -> dict[str, Any]:
    """The second page of a folded task: the verdicts on the pairs its page does not show."""
    task = results.tasks[index]
    by_pair = _by_pair(task)
    rest = [c for c in task.comparisons if not notable(by_pair[frozenset((c.model_a, c.model_b))])]
    groups = _groups(results, rest)
    for group in groups:
        group["open"] = True
    return {"task": task, "groups": groups}


# A pair view repeats its two answers; longer ones are linked instead, so a page of n answers
# never carries a huge one n times over.
PAIR_TEXT_LIMIT = 20_000


def answer_pairs(task: TaskView, folded: bool = False) -> list[dict[str, Any]]:
    """Every pair of answers, to read side by side with every judge's verdict on it (one pair
    at a time: the page shows the pair its address names, `#pair-...`, with no script). On a
    folded page only the notable pairs repeat their answers; the others link to them."""
    answers = {answer.model: answer for answer in task.answers}
    verdicts = _by_pair(task)
    pairs: list[dict[str, Any]] = []
    for i, first in enumerate(task.answers):
        for second in task.answers[i + 1 :]:
            key = frozenset((first.model, second.model))
            judged = verdicts.get(key, [])
            left, right = (
                (judged[0].model_a, judged[0].model_b) if judged else (first.model, second.model)
            )
            # People label the pair, not a judge's verdict on it: say each label once.
            labels = list(
                {(lab.labeller, lab.winner): lab for c in judged for lab in c.labels}.values()
            )
            shown = not folded or notable(judged)
            pairs.append(
                Fields(
                    id=pair_anchor(left, right),
                    notable=shown and folded,
                    # where each verdict's card is: on this page, or on the other verdicts'
                    # page (named as a file, as `file_links` would: nothing left to rewrite)
                    cards="" if shown else "verdicts/index.html",
                    model_a=left,
                    model_b=right,
                    answer_a=answers[left],
                    answer_b=answers[right],
                    verdicts=judged,
                    labels=labels,
                    inline=shown
                    and all(len(answers[m].text or "") <= PAIR_TEXT_LIMIT for m in (left, right)),
                )
            )
    return pairs


def pair_anchor(model_a: str, model_b: str) -> str:
    """The id of a pair's side-by-side view on its task page."""
    return anchor("pair", model_a, model_b)
