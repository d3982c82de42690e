"""The results file on how far one judge can be trusted: its diagnostics (flips, position,
cycles, coverage, the fit), its calibration against people, the human-anchored ranking, and a
cascade's first pass. Part of the schema in konkord/results/schema.py, which re-exports every name."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from konkord.results.base import Interval, Proportion, Strict


class KeyedRate(Strict):
    """A rate for one group (a model pair, a task, a length quartile...)."""

    key: str
    label: str | None = None
    proportion: Proportion


class Positional(Strict):
    """Of the decided single-order calls, how many went to the answer shown first."""

    first: int
    second: int
    ties: int
    share_first: Proportion
    measurable: bool = True
    not_measurable_why: str | None = None


class Cycles(Strict):
    """Per-task intransitive triples among decided triples."""

    cyclic: int
    decided_triples: int
    undecided_triples: int
    rate: float | None


class Coverage(Strict):
    """What is present against what is expected; gaps are shown, never hidden."""

    answers_present: int
    answers_expected: int
    verdicts_present: int
    verdicts_expected: int
    incomplete_pairs: int
    failed_answers: int = 0
    truncated_answers: int = Field(
        default=0, description="Answers kept but cut off at the output token cap."
    )


class FitInfo(Strict):
    """How the Bradley-Terry fit went: a convergence warning means something."""

    iterations: int
    gradient_norm: float
    converged: bool


class Diagnostics(Strict):
    """How far the judge's verdicts can be taken at face value."""

    flip_rate: Proportion
    flips_by_pair: list[KeyedRate]
    flips_by_task: list[KeyedRate]
    positional: Positional
    cycles: Cycles
    connected: bool
    components: list[list[str]]
    consistency: float | None
    failures_by_reason: dict[str, int]
    coverage: Coverage
    fit: FitInfo


class Kappa(Strict):
    """Cohen's kappa with a bootstrap 95% interval."""

    value: float | None
    low: float | None = None
    high: float | None = None


class Confusion(Strict):
    """Rows: human label; columns: judge verdict; over the categories named in `categories`."""

    categories: list[str]
    matrix: list[list[int]]


class Disagreement(Strict):
    """A comparison where the person and the judge differ, with everything needed to read it."""

    task_id: str
    model_a: str
    model_b: str
    labeller: str
    human: str
    judge_combined: str
    flipped: bool
    judge_ab: str | None
    judge_ba: str | None
    rationale_ab: str | None
    rationale_ba: str | None


class HumanHuman(Strict):
    """Agreement between people on the items they share."""

    agreement: Proportion
    agreement_no_ties: Proportion
    kappa: Kappa
    shared_items: int


class GroupCalibration(Strict):
    """Agreement on one subset of tasks (e.g. one turn of multi-turn tasks), with and without
    ties and against people, so figures can be set beside published per-subset tables."""

    key: str
    label: str | None = None
    agreement: Proportion
    agreement_no_ties: Proportion
    human_human: HumanHuman | None = None
    single_turn_tasks: int = Field(
        default=0,
        description="Single-turn tasks counted in this group as turn 1 (a suite mixing "
        "conversations and single-turn tasks).",
    )


class Calibration(Strict):
    """What the human labels say about one judge; `status` is "uncalibrated" without labels."""

    status: Literal["calibrated", "uncalibrated"]
    labels: int = 0
    labellers: list[str] = []
    unmatched_labels: int = Field(
        default=0, description="Labels with no complete verdict of this judge to compare with."
    )
    agreement: Proportion | None = None
    kappa: Kappa | None = None
    confusion: Confusion | None = None
    agreement_no_ties: Proportion | None = None
    agreement_consistent: Proportion | None = None
    agreement_flipped: Proportion | None = None
    flip_rate: Proportion | None = None
    by_task: list[KeyedRate] = []
    by_pair: list[KeyedRate] = []
    by_length_quartile: list[KeyedRate] = []
    per_labeller: list[KeyedRate] = []
    by_turn: list[GroupCalibration] = []
    human_human: HumanHuman | None = None
    disagreements: list[Disagreement] = []
    objective: dict[str, Any] | None = Field(
        default=None,
        description="Judge (and human) against executed tests, where a suite has them.",
    )


class AnchoredRating(Strict):
    """One model in a human-anchored (or labels-only) ranking."""

    model: str
    win_rate_vs_field: Interval
    log_strength: Interval
    rank_best: int = Field(description="1 + the number of models significantly above it.")
    rank_worst: int = Field(description="N - the number of models significantly below it.")


class HoldoutRow(Strict):
    """One model: the win rate from all labels against the intervals that should hold it."""

    model: str
    all_labels: Interval
    anchored_half: Interval
    judge_only: Interval
    anchored_covers: bool
    judge_covers: bool


class AnchoredHoldout(Strict):
    """For public label sets: the anchored ranking from half the labels against all of them."""

    labels_used: int
    labels_all: int
    seed: int
    rows: list[HoldoutRow]
    summary: str


class AnchoredRanking(Strict):
    """People's ranking estimated from the judge's verdicts on every pair and people's labels
    on a random sample (prediction-powered Bradley-Terry), beside the labels-only ranking."""

    status: Literal["anchored", "too_few_labels"]
    labels: int = Field(description="Labelled comparisons the estimate rests on.")
    min_labels: int
    judged: int = 0
    design: Literal["recorded", "label_plan", "assumed_random"] = Field(
        default="assumed_random",
        description="Where the inclusion probabilities come from: recorded with the labels, "
        "recomputed from the label plan's seeded queue, or assumed equal (a simple random sample).",
    )
    selected_not_labelled: int = Field(
        default=0, description="Comparisons the queue reached that nobody labelled (skipped)."
    )
    lam: float | None = Field(
        default=None, description="Power tuning: 0 = labels only, 1 = full PPI."
    )
    effective_labels: float | None = Field(
        default=None, description="Labels a labels-only ranking would need for the same precision."
    )
    clipped_pair_scores: int = 0
    clipped_resamples: int = Field(
        default=0,
        description="Bootstrap resamples in which a pair's corrected score fell outside what "
        "its comparisons allow and was clipped; the interval is least trustworthy when many are.",
    )
    resamples: int = 0
    ratings: list[AnchoredRating] = []
    labels_only: list[AnchoredRating] = []
    claims: list[str] = []
    disagreements: list[str] = Field(
        default=[], description="Where the judge-only and the anchored rankings disagree."
    )
    summary: str = ""
    method: str = ""
    holdout: AnchoredHoldout | None = None


class SelectiveRow(Strict):
    """One threshold of the selective-accuracy table of a cascade's first pass."""

    threshold: float
    decided: Proportion = Field(description="Pairs the first pass decides, of all it judged.")
    agreement: Proportion = Field(description="Labels agreeing with it on the decided pairs.")
    one_order_decided: Proportion = Field(
        description="The same rule on each order alone (no check that the orders agree), both "
        "orders pooled: of twice the pairs."
    )
    one_order_agreement: Proportion
    lean_right: Proportion = Field(
        description="Escalated labelled pairs where the averaged lean matched the label "
        "(not trusted: never used as a verdict)."
    )


class CascadeSide(Strict):
    """The whole cascade, or the strong judge alone: agreement with people, calls, cost."""

    agreement: Proportion
    calls: int = Field(description="Calls over all pairs, both judges.")
    strong_calls: int = Field(description="Of those, calls to the strong judge.")
    cost_usd: float | None = Field(description="None when a price is unknown.")


class CascadeBlock(Strict):
    """A cheap first pass in front of the strong judge: who decided what, and what it is worth."""

    route: str = Field(
        default="", description="The cascade's own name, e.g. `quick -> steward at 0.8`."
    )
    first_pass: str
    strong: str
    accept_at: float
    confidence: str
    pairs: int = Field(description="Pairs the first pass judged in both orders.")
    decided_first_pass: int
    decided_strong: int
    pending: int = Field(description="Escalated pairs the strong judge has not judged yet.")
    selective: list[SelectiveRow]
    labels: int = Field(description="Labels on pairs the first pass judged.")
    compared_labels: int = Field(
        description="Of those, labels on pairs the strong judge also judged in both orders."
    )
    cascade: CascadeSide | None = None
    strong_alone: CascadeSide | None = None
    saved_strong_calls: int | None = None
    saved_cost_usd: float | None = None
    audited: int = Field(
        default=0, description="Accepted pairs the strong judge also judged (the audit sample)."
    )
    too_few_why: str | None = Field(
        default=None,
        description="Why the cascade is not compared with the strong judge alone, and the fix.",
    )


class RouteRow(Strict):
    """A judge of a cascade seen on its own: the strong judge on its own verdicts only, or the
    first pass on every pair it judged and on the pairs it decided. The cascade's own row is its
    judge block (the strong judge's place in the run's list)."""

    name: str
    role: Literal["strong_alone", "first_pass"]
    judge: str
    cascade: str = Field(description="The route name of the cascade it belongs to.")
    pairs: int = Field(description="Pairs it judged in both orders.")
    decided: int = Field(description="Of those, pairs whose verdict the cascade kept.")
    calibration: Calibration = Field(description="Against people on every pair it judged.")
    calibration_decided: Calibration | None = Field(
        default=None, description="Against people on the pairs it decided (the first pass)."
    )
    flip_rate: Proportion
    positional: Positional
    failures: int


class CascadePair(Strict):
    """Who decided one pair of a cascade, and the first pass's probabilities as evidence."""

    decided_by: Literal["first_pass", "strong", "pending"]
    first_pass: str
    probs_ab: dict[str, float] = Field(description="Order ab, in model terms: a, b, tie.")
    probs_ba: dict[str, float]
    orders_agree: bool
    confidence: float = Field(description="Averaged probability of the order-ab verdict.")
    lean: str = Field(description="Model (or tie) the averaged probabilities favour.")
    orders_text: str = Field(
        default="",
        description="The first pass's two orders as shown: verdict and confidence of each.",
    )
