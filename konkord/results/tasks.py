"""The results file per task: every answer with its checks, every comparison with both orders
and the labels, for the task pages; and the pass rates of the checks. Part of the schema in
konkord/results/schema.py, which re-exports every name."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from konkord.results.base import Claim, Interval, Strict
from konkord.results.judging import CascadePair


class PassRate(Strict):
    """Share of a model's answers that pass one check, with a task-bootstrap interval."""

    model: str
    check: str
    passed: int
    total: int
    rate: Interval


class CheckView(Strict):
    """One check's result on one answer."""

    check: str
    passed: bool
    reason: str | None = None
    sandbox: str | None = None


class AnswerView(Strict):
    """One model's answer to one task, as shown in the task browser."""

    model: str
    text: str | None
    finish_reason: str | None = None
    truncated: bool = Field(
        default=False, description="Cut off at the output token cap (finish_reason length)."
    )
    error: str | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    latency_s: float | None = None
    checks: list[CheckView] = []
    style: dict[str, int] | None = Field(
        default=None, description="Style features counted once per answer (style control)."
    )


class OrderVerdict(Strict):
    """One presentation order's verdict (or failure) for a pair."""

    order: Literal["ab", "ba"]
    shown_first: str
    position_winner: str | None
    winner: str | None
    rationale: str | None = None
    failure: str | None = None


class LabelView(Strict):
    """A person's label on a comparison."""

    labeller: str
    winner: str


class ComparisonView(Strict):
    """A model pair on a task, under one judge: both orders, the combined verdict, labels."""

    judge: str
    model_a: str
    model_b: str
    winner: str | None
    flipped: bool
    complete: bool
    orders: list[OrderVerdict]
    labels: list[LabelView] = []
    cascade: CascadePair | None = None


class TurnRating(Strict):
    """One model in one turn's own ranking: the same fit, task bootstrap, floors and sign test
    as the whole ranking, on that turn's verdicts alone."""

    model: str
    rank_best: int | None = Field(description="1 + models supported above it in this turn")
    rank_worst: int | None = Field(description="N - models supported below it in this turn")
    win_rate_vs_field: Interval
    comparisons: int


class TurnLine(Strict):
    """One turn of a suite's conversations: each model's share of its comparisons won (a tie
    half), both orders combined, under the one judge; and the turn's own ranking with
    intervals (tasks resampled whole) and the claims that pass the gate."""

    turn: int
    pairs: int
    win_rate: dict[str, float | None]
    tasks: int = Field(default=0, description="Tasks with a verdict in this turn (the clusters).")
    single_turn_tasks: int = Field(
        default=0,
        description="Single-turn tasks counted as turn 1 (a suite mixing conversations and "
        "single-turn tasks).",
    )
    ratings: list[TurnRating] = Field(
        default=[], description="The turn's ranking, best first; empty where it cannot be fitted."
    )
    claims: list[Claim] = Field(
        default=[],
        description="Orderings this turn's data supports, and why each unordered neighbour is not.",
    )
    note: str | None = Field(
        default=None, description="Why the turn has no ranking (its comparisons are disconnected)."
    )


class EarlierTurn(Strict):
    """A turn of a conversation before the one a task page shows: the user's message and
    each model's own reply to it."""

    turn: int
    prompt: str
    replies: dict[str, str | None] = Field(description="model -> its reply to this turn")


class TaskView(Strict):
    """One task with every answer and every comparison, for the per-task page; a
    conversation's turn ("poem-t2") carries the turns before it."""

    id: str
    prompt: str
    reference: str | None = None
    tests: str | None = Field(
        default=None, description="The task's tests, as the suite gives them (code suites)."
    )
    answers: list[AnswerView]
    comparisons: list[ComparisonView]
    turn: int | None = Field(default=None, description="The turn judged, for a conversation.")
    earlier: list[EarlierTurn] = []


class TaskFiles(Strict):
    """Where a large results file keeps its tasks: one file per task, so that every file stays
    small enough for a browser to fetch and a static host to serve (Cloudflare takes at most
    25 MiB per file). Each task file is one `TaskView` (`konkord schema --task`)."""

    folder: str = Field(
        description="The folder of task files, next to the results file: <run>.tasks."
    )
    ids: list[str] = Field(description="The tasks in order; task X is in <folder>/X.json.")
    sha256: str = Field(description="Hash of the task files' bytes, in this order.")
