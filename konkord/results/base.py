"""The results file's building blocks: a strict base model, an estimate with its interval, and
a proportion with its Wilson interval, shared by every part of the schema."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Base for every results model: unknown fields are refused so schema drift is caught.
    Infinity and NaN are written as JSON's usual extension (as `json.dumps` writes them), so a
    results file reads back exactly as it was written."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")


class Interval(Strict):
    """A point estimate with its 95% interval; `None` means undefined (e.g. no data), not zero."""

    estimate: float | None
    low: float | None = None
    high: float | None = None


class Proportion(Strict):
    """k of n with a Wilson 95% interval; rate is None when n == 0 (undefined, never 0%).

    Where `clusters` is set, low/high are task-clustered (Wilson on the effective sample size)
    and plain_low/plain_high the plain Wilson interval that treats comparisons as independent.
    """

    k: int
    n: int
    rate: float | None
    low: float | None = None
    high: float | None = None
    plain_low: float | None = None
    plain_high: float | None = None
    clusters: int | None = None


class Claim(Strict):
    """A sentence the data supports, or an honest statement that it does not separate two models."""

    kind: Literal["above", "not_separated"]
    text: str
    models: list[str]
    tasks_needed: int | None = None
