"""The results file's tasks: each task's answers, every comparison with both orders, and the
labels, made one task at a time as the file is written.

At 20 models x 1,000 tasks they are 190,000 comparisons and 380,000 order verdicts. Each task
is made as plain data in `TaskView`'s shape (`konkord.results.schema.TaskData`) and written as
it is: building and validating a model per comparison and per order cost more than the rest of
writing the tasks, and the data is typed by construction (every field comes from a record whose
types the log checked on reading, or from the suite); a test holds it to the bytes the
validated model writes.
The tasks are made from a `TaskSource` (`task_source`), which a worker process can be sent.
"""

from __future__ import annotations

from collections.abc import Iterator

from konkord.configuration.runspec import RunSpec
from konkord.evidence.log import Record
from konkord.evidence.verdicts import CombinedVerdict
from konkord.results import schema as R
from konkord.stages.report.task_source import TaskSource, task_source, tasks_of

__all__ = ["TaskSource", "source_of", "task_data", "tasks_of"]


def source_of(
    spec: RunSpec,
    answers: dict[tuple[str, str], Record],
    combined_by_judge: dict[str, list[CombinedVerdict]],
    labels: list[Record],
    checks: dict[tuple[str, str, str], Record],
    features: dict[tuple[str, str], dict[str, int]] | None = None,
) -> TaskSource:
    """What the run's tasks are made from."""
    return task_source(
        spec.suite, spec.models, answers, combined_by_judge, labels, checks, features
    )


def task_data(
    spec: RunSpec,
    answers: dict[tuple[str, str], Record],
    combined_by_judge: dict[str, list[CombinedVerdict]],
    labels: list[Record],
    checks: dict[tuple[str, str, str], Record],
    features: dict[tuple[str, str], dict[str, int]] | None = None,
) -> Iterator[R.TaskData]:
    """Each task's view as plain data, made one at a time as the results file is written."""
    return tasks_of(source_of(spec, answers, combined_by_judge, labels, checks, features))
