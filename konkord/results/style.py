"""The results file's style-control block: the ranking with the judge's taste for length and
formatting taken out, each style coefficient with its interval, and people's beside it. Part
of the schema in konkord/results/schema.py, which re-exports every name."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from konkord.results.base import Interval, Strict


class StyleRating(Strict):
    """One model in the style-controlled ranking, beside its place in the plain one."""

    model: str
    win_rate_vs_field: Interval = Field(
        description="Expected win rate against the field with every style difference at 0."
    )
    log_strength: Interval
    rank_best: int | None = None
    rank_worst: int | None = None
    position: int = Field(description="Place in the style-controlled order, 1 = first.")
    plain_position: int = Field(description="Place in the plain ranking's order.")
    movement: int = Field(description="Places gained by taking style out (plain - controlled).")


class StyleCoefficient(Strict):
    """One feature's coefficient: log-odds of winning per unit of normalised difference."""

    feature: str
    description: str
    judge: Interval | None = Field(default=None, description="None: no pair differs in it.")
    people: Interval | None = None
    difference: Interval | None = Field(
        default=None, description="Judge minus people, with its interval."
    )
    text: str = ""


class StyleFitSide(Strict):
    """A style-controlled fit on one source of outcomes: the judge's verdicts or people's labels."""

    status: Literal["fitted", "too_few_labels"]
    comparisons: int
    min_comparisons: int = 0
    ratings: list[StyleRating] = []
    claims: list[str] = []
    summary: str = ""


class StyleControl(Strict):
    """Style control for one judge: its style-controlled ranking and coefficients, people's."""

    features: list[str] = Field(description="The features fitted (those some pair differs in).")
    feature_rules: list[str] = Field(default=[], description="How each feature is counted.")
    judge: StyleFitSide
    people: StyleFitSide | None = None
    coefficients: list[StyleCoefficient]
    length_above_people: bool | None = Field(
        default=None,
        description="The judge's length coefficient exceeds people's (difference interval > 0).",
    )
    summary: str = ""
    method: str = ""
    resamples: int = 0
    converged: int = 0
