"""A run's pair design: which comparisons the judge is paid for.

In runs.json, `"design"` is `"all"` (every pair on every task, the default), `{"random": K}`
or `{"random": {"k": K, "seed": S}}` (K pairs per task, balanced and connected, drawn from a
recorded seed), or `{"adaptive": {"budget": CALLS}}` (optionally `"seed"` and
`"round_share"` and `"start_share"`: rounds that spend the judge calls where neighbours are still unseparated).
On the command line the same as `all`, `random:K` or `adaptive:CALLS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ALL = "all"
RANDOM = "random"
ADAPTIVE = "adaptive"
ROUND_SHARE = 0.1
START_SHARE = 0.7


@dataclass(frozen=True)
class PairDesign:
    """`kind` "all" | "random" | "adaptive"; `k` pairs per task (random); `budget` judge
    calls in all (adaptive); `seed` draws the pairs and tasks; `round_share` the share of the
    budget each adaptive round after the start spends, `start_share` the balanced start's
    (0.7: in benchmarks/bench_design.py a smaller start separated fewer neighbours)."""

    kind: str = ALL
    budget: int = 0
    k: int = 0
    seed: int = 0
    round_share: float = ROUND_SHARE
    start_share: float = START_SHARE

    @property
    def label(self) -> str:
        """The design in a reader's words, e.g. "random: 5 pairs per task (seed 0)"."""
        if self.kind == RANDOM:
            return f"random: {self.k} pairs per task (seed {self.seed})"
        if self.kind == ADAPTIVE:
            return f"adaptive: a budget of {self.budget:,} judge calls (seed {self.seed})"
        return "all: every pair on every task"

    def as_json(self) -> dict[str, Any] | str:
        """The design as runs.json writes it."""
        if self.kind == RANDOM:
            return {RANDOM: {"k": self.k, "seed": self.seed}}
        if self.kind == ADAPTIVE:
            body: dict[str, Any] = {
                "budget": self.budget,
                "seed": self.seed,
                "round_share": self.round_share,
            }
            if self.start_share != START_SHARE:  # absent at the default: recorded keys hold
                body["start_share"] = self.start_share
            return {ADAPTIVE: body}
        return ALL


def _whole(value: object, what: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{what} must be a whole number of at least {low}, got {value!r}")
    return value


def _share(body: dict[str, object], name: str, default: float) -> float:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ValueError(f"{name} must be a number above 0 and at most 1, got {value!r}")
    return float(value)


def parse_design(value: object) -> PairDesign:
    """A design from runs.json's value or the command line's text; ValueError names the
    problem in a user's words."""
    if isinstance(value, PairDesign):
        return value
    if value is None or value == ALL:
        return PairDesign()
    if isinstance(value, str):
        kind, _, number = value.strip().partition(":")
        if kind.strip() in (RANDOM, ADAPTIVE) and number.strip().isdigit():
            key = "k" if kind.strip() == RANDOM else "budget"
            return parse_design({kind.strip(): {key: int(number)}})
        raise ValueError(
            f'"{value}" is not a design (use all, random:K with K pairs per task, or '
            "adaptive:CALLS with a budget of judge calls)"
        )
    if isinstance(value, dict) and len(value) == 1:
        kind, body = next(iter(value.items()))
        if kind == RANDOM and isinstance(body, int) and not isinstance(body, bool):
            body = {"k": body}
        if kind in (RANDOM, ADAPTIVE) and isinstance(body, dict):
            allowed = (
                {"k", "seed"}
                if kind == RANDOM
                else {"budget", "seed", "round_share", "start_share"}
            )
            extra = sorted(set(body) - allowed)
            if extra:
                raise ValueError(
                    f'"{kind}" has no field "{extra[0]}" (it takes {", ".join(sorted(allowed))})'
                )
            seed = body.get("seed", 0)
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise ValueError(f"seed must be a whole number, got {seed!r}")
            if kind == RANDOM:
                return PairDesign(RANDOM, k=_whole(body.get("k"), "random's k", 1), seed=seed)
            budget = _whole(body.get("budget"), "adaptive's budget", 2)
            return PairDesign(
                ADAPTIVE, budget=budget, seed=seed,
                round_share=_share(body, "round_share", ROUND_SHARE),
                start_share=_share(body, "start_share", START_SHARE),
            )  # fmt: skip
    raise ValueError(
        'must be "all", {"random": K}, {"random": {"k": K, "seed": S}} or '
        '{"adaptive": {"budget": CALLS}}'
    )
