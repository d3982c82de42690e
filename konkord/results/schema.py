"""The results file (results/<run>.json): everything the site needs, in one versioned schema.

`report` writes it, `calibrate` fills its calibration blocks, `build` renders it. Templates
compute nothing the file does not already hold. Reading a file of another schema version is a
clear error, never a silent misreading.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from konkord.errors import KonkordError
from konkord.evidence.atomic import write_atomic
from konkord.results.base import Claim, Interval, Proportion, Strict
from konkord.results.files import StagedTasks, TaskData, dump_results, load_tasks
from konkord.results.judging import (
    AnchoredHoldout,
    AnchoredRanking,
    AnchoredRating,
    Calibration,
    CascadeBlock,
    CascadePair,
    CascadeSide,
    Confusion,
    Coverage,
    Cycles,
    Diagnostics,
    Disagreement,
    FitInfo,
    GroupCalibration,
    HoldoutRow,
    HumanHuman,
    Kappa,
    KeyedRate,
    Positional,
    RouteRow,
    SelectiveRow,
)
from konkord.results.ranking import (
    BootstrapInfo,
    DesignInfo,
    JudgeBlock,
    ModelRating,
    PairComparison,
    SelfFamilyNote,
)
from konkord.results.style import StyleCoefficient, StyleControl, StyleFitSide, StyleRating
from konkord.results.tasks import (
    AnswerView,
    CheckView,
    ComparisonView,
    LabelView,
    OrderVerdict,
    PassRate,
    TaskFiles,
    TaskView,
    TurnLine,
    TurnRating,
)

# The schema is split by what it describes (base, judging, ranking, style, tasks);
# every model is importable from here, as before.
__all__ = [
    "SCHEMA_VERSION",
    "AnchoredHoldout",
    "AnchoredRanking",
    "AnchoredRating",
    "AnswerView",
    "BootstrapInfo",
    "Calibration",
    "CascadeBlock",
    "CascadePair",
    "CascadeSide",
    "CheckView",
    "Claim",
    "ComparisonView",
    "Confusion",
    "CostLine",
    "Coverage",
    "Cycles",
    "DesignInfo",
    "Diagnostics",
    "Disagreement",
    "FitInfo",
    "GroupCalibration",
    "HoldoutRow",
    "HumanHuman",
    "Interval",
    "JudgeBlock",
    "JudgePanel",
    "JudgeStanding",
    "Kappa",
    "KeyedRate",
    "LabelView",
    "ModelRating",
    "OrderVerdict",
    "PairComparison",
    "PassRate",
    "Positional",
    "Proportion",
    "Results",
    "RouteRow",
    "SelectiveRow",
    "SelfFamilyNote",
    "Strict",
    "StyleCoefficient",
    "StyleControl",
    "StyleFitSide",
    "StyleRating",
    "SuiteInfo",
    "TaskData",
    "TaskFiles",
    "TaskMean",
    "TaskView",
    "TurnLine",
    "TurnRating",
    "json_schema",
    "read_results",
    "write_results",
]

SCHEMA_VERSION = 1


class CostLine(Strict):
    """Tokens, dollars and latency for one model's answers or one judge's verdicts."""

    who: str
    role: Literal["generation", "judge"]
    calls: int
    tokens_in: int
    tokens_out: int
    cost_usd: float | None = Field(description="None when any call had an unknown price.")
    known_cost_usd: float = 0.0
    unknown_price_calls: int = 0
    median_latency_s: float | None


class SuiteInfo(Strict):
    """The suite as it was when the report was made."""

    name: str
    path: str
    rubric: str
    answer_language: str | None
    context: str | None
    task_count: int


class TaskMean(Strict):
    """A per-task figure averaged over tasks, with a task-bootstrap 95% interval."""

    estimate: float | None
    low: float | None = None
    high: float | None = None
    tasks: int = Field(description="Tasks on which the figure is defined.")


class JudgeStanding(Strict):
    """One judge measured against the other judges (see konkord/stats/judges.py)."""

    judge: str
    consensus_match: TaskMean | None = Field(
        default=None,
        description="Pair-order agreement of the judge's per-task ranking with the "
        "Bradley-Terry consensus of the other judges on the task; None with fewer than three.",
    )
    consistency: TaskMean = Field(
        description="Per task, mean fitted P(model beats the one its ranking puts just below)."
    )
    length_preference: Proportion = Field(
        description="Of decided pairs whose answers differ in length, how many the longer won."
    )


class JudgePanel(Strict):
    """The judges compared with each other, and the ranking of all their verdicts pooled."""

    consensus_measure: str = "pair-order agreement"
    judges_needed: int = Field(default=3, description="Judges needed for a consensus match.")
    standings: list[JudgeStanding]
    people_length_preference: Proportion | None = Field(
        default=None, description="The same length figure for the people's labels."
    )
    panel_ratings: list[ModelRating] = Field(
        default=[], description="Bradley-Terry over every judge's verdicts pooled."
    )
    panel_rank_groups: list[list[str]] = []
    bootstrap: BootstrapInfo | None = None


class Results(Strict):
    """The whole results file."""

    schema_version: int = SCHEMA_VERSION
    konkord_version: str
    run: str
    evidence_date: str | None = Field(description="Date of the newest evidence record.")
    inputs_digest: str | None = Field(
        default=None,
        description="Hash of the evidence, suite and settings this file was computed from; "
        "`konkord build` recomputes the file when it no longer matches.",
    )
    simulated: bool = Field(description="True when every model and judge is simulated.")
    suite: SuiteInfo
    models: list[str]
    judges: list[str]
    judge_blocks: list[JudgeBlock]
    cost: list[CostLine]
    pass_rates: list[PassRate] = []
    tasks: list[TaskView] = Field(
        description="Every task; empty when `task_files` holds them in files of their own."
    )
    task_files: TaskFiles | None = Field(
        default=None, description="Set when the tasks are in one file each (large runs)."
    )
    judge_panel: JudgePanel | None = Field(
        default=None, description="The judges compared (the Judges page); None in older files."
    )
    routes: list[RouteRow] = Field(
        default=[],
        description="A cascade's judges on their own (strong judge alone, first pass); the "
        "cascade itself is the strong judge's place in judge_blocks, under its route name.",
    )

    def block(self, judge: str) -> JudgeBlock:
        """The block of one judge."""
        for block in self.judge_blocks:
            if block.judge == judge:
                return block
        raise KeyError(judge)


def read_results(path: Path | str, tasks: bool = True, lazy: bool = False) -> Results:
    """Read and validate a results file; another schema version is a clear error. With
    tasks=False, a file whose tasks are in files of their own comes back without them, the
    task files checked against their hash but not parsed; with lazy=True, with them as a
    `files.TaskShelf` that parses each when asked."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise KonkordError(f"{path}: results file not found (run `konkord report`)") from None
    try:  # the common case in one pass of pydantic's own JSON parser
        results = Results.model_validate_json(raw)
        if results.schema_version == SCHEMA_VERSION:
            return load_tasks(path, results, parse=tasks, lazy=lazy)
    except ValidationError:
        pass  # below, the same checks in steps, for a message that says what is wrong
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        problem = "the file is empty" if not raw.strip() else f"not valid JSON ({exc.msg})"
        raise KonkordError(
            f"{path}:{exc.lineno}: {problem}; if a crash cut it short, make it again from the "
            "evidence with `konkord report --run NAME` (or `konkord build`)"
        ) from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise KonkordError(
            f"{path}: schema version {version!r}, but this konkord reads version "
            f"{SCHEMA_VERSION}; regenerate it with `konkord report --run {data.get('run', 'NAME')}`"
            if isinstance(data, dict)
            else f"{path}: not a results file"
        )
    try:
        results = Results.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise KonkordError(f"{path}: invalid results file at {where}: {first['msg']}") from None
    return load_tasks(path, results, parse=tasks, lazy=lazy)


def write_results(
    results: Results,
    path: Path | str,
    tasks: Iterable[TaskView | TaskData] | StagedTasks | None = None,
) -> None:
    """Write a results file atomically (a crash never leaves half a file); a large run's tasks
    go to a file each beside it (konkord/results/files.py). Serialised by pydantic straight to
    bytes, one task at a time, never as a second copy of the whole file in Python objects;
    `tasks`, when given, stands for `results.tasks` and is consumed as it is written (or is
    being written in the background, and is waited for)."""
    path = Path(path)
    write_atomic(path, dump_results(results, path, tasks))


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the results file, for `konkord schema`."""
    return Results.model_json_schema()
