"""One judging's settings: what a judge stage was asked, carried through its passes and calls."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from konkord.configuration.runspec import RunSpec
from konkord.providers.llm import CallSettings, ModelClient
from konkord.stages.judge.judge_call import JudgeItem

ProgressCallback = Callable[[int, int], None]  # (items done, items in all)


@dataclass(frozen=True)
class Judging:
    """The same for every round and pass of one `judge_run`, and every call it sends: the run
    and its judges, the client and how many calls it keeps out at once, the calls' settings,
    the hash of the judge prompt the verdicts are made under, whom to tell of progress, and
    which items it takes (`only`: a cascade's strong judge sees the escalated pairs alone)."""

    spec: RunSpec
    judges: tuple[str, ...]
    client: ModelClient
    concurrency: int
    settings: CallSettings
    frame_hash: str
    on_progress: ProgressCallback | None = None
    only: Callable[[JudgeItem], bool] | None = None
