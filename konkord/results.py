"""The results file (results/<run>.json): everything the site needs, in one versioned schema.

`report` writes it, `calibrate` fills its calibration blocks, `build` renders it. Templates
compute nothing the file does not already hold. Reading a file of another schema version is a
clear error, never a silent misreading.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from konkord.atomic import write_atomic
from konkord.errors import KonkordError

SCHEMA_VERSION = 1


class Strict(BaseModel):
    """Base for every results model: unknown fields are refused so schema drift is caught."""

    model_config = ConfigDict(extra="forbid")


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
    separated: bool = Field(description="The ordering is supported (interval and sign test).")
    interval_excludes_zero: bool | None = None
    sign_test_p: float | None = Field(
        default=None, description="Exact two-sided sign test over tasks of per-task scores."
    )


class Claim(Strict):
    """A sentence the data supports, or an honest statement that it does not separate two models."""

    kind: Literal["above", "not_separated"]
    text: str
    models: list[str]
    tasks_needed: int | None = None


class FitInfo(Strict):
    """How the Bradley-Terry fit went: a convergence warning means something."""

    iterations: int
    gradient_norm: float
    converged: bool


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
        default=None, description="Judge (and human) against executed tests, where a suite has them."
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
    lam: float | None = Field(default=None, description="Power tuning: 0 = labels only, 1 = full PPI.")
    effective_labels: float | None = Field(
        default=None, description="Labels a labels-only ranking would need for the same precision."
    )
    clipped_pair_scores: int = 0
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


class CascadePair(Strict):
    """Who decided one pair of a cascade, and the first pass's probabilities as evidence."""

    decided_by: Literal["first_pass", "strong", "pending"]
    first_pass: str
    probs_ab: dict[str, float] = Field(description="Order ab, in model terms: a, b, tie.")
    probs_ba: dict[str, float]
    orders_agree: bool
    confidence: float = Field(description="Averaged probability of the order-ab verdict.")
    lean: str = Field(description="Model (or tie) the averaged probabilities favour.")


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
    anchored: AnchoredRanking | None = None
    cascade: CascadeBlock | None = None


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


class TaskView(Strict):
    """One task with every answer and every comparison, for the per-task page."""

    id: str
    prompt: str
    reference: str | None = None
    tests: str | None = Field(
        default=None, description="The task's tests, as the suite gives them (code suites)."
    )
    answers: list[AnswerView]
    comparisons: list[ComparisonView]


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
    tasks: list[TaskView]
    judge_panel: JudgePanel | None = Field(
        default=None, description="The judges compared (the Judges page); None in older files."
    )

    def block(self, judge: str) -> JudgeBlock:
        """The block of one judge."""
        for block in self.judge_blocks:
            if block.judge == judge:
                return block
        raise KeyError(judge)


def read_results(path: Path | str) -> Results:
    """Read and validate a results file; another schema version is a clear error."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise KonkordError(f"{path}: results file not found (run `konkord report`)") from None
    try:  # the common case in one pass of pydantic's own JSON parser
        results = Results.model_validate_json(raw)
        if results.schema_version == SCHEMA_VERSION:
            return results
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
        return Results.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise KonkordError(f"{path}: invalid results file at {where}: {first['msg']}") from None


def write_results(results: Results, path: Path | str) -> None:
    """Write a results file atomically (a crash never leaves half a file)."""
    text = json.dumps(results.model_dump(mode="json"), indent=1, ensure_ascii=False, sort_keys=False)
    write_atomic(path, text + "\n")


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the results file, for `konkord schema`."""
    return Results.model_json_schema()
