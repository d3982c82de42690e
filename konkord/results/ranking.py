"""The results file's ranking of one judge (`JudgeBlock`): ratings with their intervals, pairwise
comparisons, the bootstrap and design behind them, and the blocks the judge's ranking carries
(diagnostics, calibration, cascade, anchored and style-controlled rankings). Importable from
`konkord.results.schema`, with the rest of the file's models.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from konkord.results.base import Claim, Interval, Strict
from konkord.results.judging import (
    AnchoredRanking,
    Calibration,
    CascadeBlock,
    Diagnostics,
)
from konkord.results.style import StyleControl
from konkord.results.tasks import TurnLine


class ModelRating(Strict):
    """One model's standing under one judge."""

    model: str
    rank: int = Field(description="Best rank the data allows; N with no comparisons.")
    rank_group: int = Field(description="Run of neighbours with equal rank ranges (shading).")
    rank_best: int | None = Field(
        default=None, description="1 + the number of models supported above this one."
    )
    rank_worst: int | None = Field(
        default=None, description="N - the number of models supported below this one."
    )
    log_strength: Interval
    rating: Interval
    win_rate_vs_field: Interval
    raw_win_rate: Interval
    comparisons: int


class PairComparison(Strict):
    """The bootstrap difference in log-strength between two models, and who is above how often."""

    model_i: str
    model_j: str
    diff: Interval
    p_above: float = Field(description="Share of resamples in which model_i is above model_j.")
    separated: bool = Field(
        description="The ordering is supported (family-wise interval and sign test)."
    )
    interval_excludes_zero: bool | None = Field(
        default=None, description="The pair's own 95% interval (`diff`) excludes 0."
    )
    family_excludes_zero: bool | None = Field(
        default=None,
        description=(
            "The interval widened to the family-wise bar excludes 0 (None in files written "
            "before claims were held to it)."
        ),
    )
    sign_test_p: float | None = Field(
        default=None, description="Exact two-sided sign test over tasks of per-task scores."
    )


class BootstrapInfo(Strict):
    """How the intervals were made."""

    unit: Literal["task", "judgments"]
    resamples: int
    seed: int
    method: str
    fits: int | None = Field(default=None, description="Resample and jackknife fits made.")
    converged: int | None = Field(default=None, description="Fits that reached the tolerance.")
    disconnected_resamples: int | None = Field(
        default=None, description="Resamples whose comparison graph fell apart."
    )
    disconnected_handling: str | None = None
    family_factors: list[float] = Field(
        default=[],
        description=(
            "The family-wise step-down's widening of each pair's interval, step by step: the "
            "last is the bar the unclaimed pairs are held to (empty in older files: claims "
            "were per pair)."
        ),
    )


class DesignInfo(Strict):
    """Which comparisons were judged: the run's pair design and its share of all possible."""

    label: str = Field(description='The design in words, e.g. "random: 5 pairs per task".')
    judged: int = Field(description="Task pairs judged in both orders.")
    possible: int = Field(description="Every pair of models on every task.")
    rounds: int = Field(default=0, description="Adaptive rounds after the start.")
    stopped: str | None = Field(default=None, description="Why an adaptive design stopped.")


class SelfFamilyNote(Strict):
    """A judge of this ranking shares a provider family with ranked models (any source)."""

    judge: str
    family: str
    models: list[str]
    comparisons: int = Field(description="Decided comparisons involving those models.")
    total: int
    text: str
    ratings_without: list[ModelRating] = Field(
        default=[], description="The ranking fitted without those comparisons."
    )
    without_note: str = ""


class JudgeBlock(Strict):
    """Everything about the ranking one judge produced; several judges give several blocks."""

    judge: str
    frame_hash: str | None
    system_prompt: str | None = Field(description="The judge prompt read back from the evidence.")
    ratings: list[ModelRating]
    pairwise: list[PairComparison]
    p_above_matrix: list[list[float | None]] = Field(
        description="P(row model above column model), rows and columns in rating order."
    )
    rank_groups: list[list[str]]
    claims: list[Claim]
    diagnostics: Diagnostics
    bootstrap: BootstrapInfo
    methods: list[str] = Field(
        default=[], description="How every figure of this block was made, from what ran."
    )
    captions: dict[str, str] = Field(
        default={}, description="Figure captions (rank, forest, heatmap), from what ran."
    )
    calibration: Calibration = Calibration(status="uncalibrated")
    self_family: list[SelfFamilyNote] = Field(
        default=[], description="Judges in the same family as ranked models, and what it does."
    )
    anchored: AnchoredRanking | None = None
    cascade: CascadeBlock | None = None
    style: StyleControl | None = Field(
        default=None,
        description="The style-controlled ranking and coefficients; None when switched off.",
    )
    by_turn: list[TurnLine] = Field(
        default=[], description="Win rates per turn of the suite's conversations (if any)."
    )
    design: DesignInfo | None = Field(
        default=None, description="The pair design and how many of all comparisons it judged."
    )

    @property
    def route_name(self) -> str:
        """What the block ranks by, as shown: a cascade's own name, else the judge's."""
        return self.cascade.route if self.cascade is not None and self.cascade.route else self.judge
