"""Which pairs a task page shows in full once a task has many: the task pages and the
calibration page's cards (which link into them) decide it the same way.
"""

from __future__ import annotations

from konkord.results.schema import ComparisonView, TaskView

# Past this many pairs (eight models make 28) a task page shows in full only the pairs worth a
# look: those people labelled, those a judge flipped or left incomplete. The others' verdicts are
# on a second page, one link away, and their side-by-side view links the answers instead of
# repeating them: at 20 models (190 pairs) the page stays a few hundred KB, not 700.
FOLD_PAIRS_OVER = 28


def notable(comparisons: list[ComparisonView]) -> bool:
    """Whether a pair's verdicts are worth showing open: labelled, flipped or incomplete."""
    return any(c.labels or c.flipped or not c.complete for c in comparisons)


def is_folded(task: TaskView) -> bool:
    """Whether the task has too many pairs to show every one in full on its page."""
    n = len(task.answers)
    return n * (n - 1) // 2 > FOLD_PAIRS_OVER
