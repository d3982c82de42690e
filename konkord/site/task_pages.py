"""The task pages' contexts: the task index and one page per task."""

from __future__ import annotations

from typing import Any

from konkord.results import Results
from konkord.site.contexts import judge_sections
from konkord.site.formatting import anchor


def tasks_index_context(results: Results) -> dict[str, Any]:
    rows = []
    for task in results.tasks:
        flips = sum(1 for c in task.comparisons if c.flipped)
        labels = sum(len(c.labels) for c in task.comparisons)
        first_line = task.prompt.strip().splitlines()[0] if task.prompt.strip() else ""
        rows.append(
            {
                "task": task,
                "summary": first_line[:140] + ("…" if len(first_line) > 140 else ""),
                "flips": flips,
                "labels": labels,
                "comparisons": len(task.comparisons),
            }
        )
    return {"rows": rows}


def task_context(results: Results, index: int) -> dict[str, Any]:
    task = results.tasks[index]
    judge_ids = {s["block"].judge: s["id"] for s in judge_sections(results)}
    by_judge: dict[str, list[Any]] = {}
    for comparison in task.comparisons:
        by_judge.setdefault(comparison.judge, []).append(comparison)
    groups = [
        {"judge": judge, "id": judge_ids.get(judge, anchor("judge", judge)), "comparisons": items}
        for judge, items in by_judge.items()
    ]
    previous_task = results.tasks[index - 1].id if index > 0 else None
    next_task = results.tasks[index + 1].id if index + 1 < len(results.tasks) else None
    return {
        "task": task,
        "groups": groups,
        "previous_task": previous_task,
        "next_task": next_task,
    }
