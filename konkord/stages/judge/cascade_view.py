"""Who decided each pair of a cascade, derived from the evidence and the threshold.

Nothing here is stored as the only truth: the first pass's records carry its probabilities for
both orders, the strong judge's records its verdicts, and a pair's decider follows from those and
`accept_at`. A new threshold therefore re-decides every pair without a call; a pair it newly
escalates is "pending" until the strong judge has judged it in both orders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from konkord.configuration.runs_config import Cascade
from konkord.configuration.runspec import RunSpec
from konkord.evidence.log import EvidenceLog, Record
from konkord.evidence.verdicts import (
    CombinedVerdict,
    VerdictRecord,
    combine_verdicts,
    load_verdicts,
)
from konkord.providers.confidence import to_models

PairKey = tuple[str, str, str]  # task_id, model_a, model_b
_CODES = ("a", "b", "tie")


@dataclass(frozen=True)
class CascadePlan:
    """A run's cascade, resolved: which judges, what threshold, where confidence comes from."""

    first_pass: str
    strong: str
    accept_at: float
    confidence: str = "logprobs"
    audit: int | None = None  # accepted pairs the strong judge also judges; None: label plan n

    @property
    def samples(self) -> int | None:
        """N for `samples:N`, None for log-probabilities."""
        from konkord.configuration.runs_config import parse_confidence

        return parse_confidence(self.confidence)


def plan_of(spec: RunSpec, accept_at: float | None = None) -> CascadePlan | None:
    """The run's cascade from runs.json or its manifest, or None when it has none."""
    cascade: Cascade | None = spec.cascade
    if cascade is None:
        return None
    strong = cascade.strong_judge(spec.judges)
    if strong is None:
        return None
    threshold = cascade.accept_at if accept_at is None else accept_at
    return CascadePlan(cascade.first_pass, strong, threshold, cascade.confidence, cascade.audit)


def cascade_of(
    spec: RunSpec, log: EvidenceLog, judge: str, shas: Mapping[tuple[str, str], str] | None
) -> CascadePairs | None:
    """The run's cascade read from the evidence if `judge` is its strong judge, else None."""
    plan = plan_of(spec)
    if plan is None or plan.strong != judge:
        return None
    return cascade_pairs(spec, log, plan, shas)


def outcome_code(winner: object, model_a: str, model_b: str) -> int:
    """0 = model_a, 1 = model_b, 2 = tie, -1 = none."""
    if winner == model_a:
        return 0
    if winner == model_b:
        return 1
    return 2 if winner == "tie" else -1


def winner_of(code: int, model_a: str, model_b: str) -> str:
    """The inverse of `outcome_code` for a decided outcome."""
    return (model_a, model_b, "tie")[code]


@dataclass
class CascadePairs:
    """The first pass's complete pairs, as arrays, with the strong judge's verdicts beside them."""

    plan: CascadePlan
    keys: list[PairKey]
    probs_ab: np.ndarray  # (pairs, 3) model terms: a, b, tie
    probs_ba: np.ndarray
    verdict_ab: np.ndarray  # outcome codes
    verdict_ba: np.ndarray
    accepted: np.ndarray  # bool, at plan.accept_at
    strong: dict[PairKey, CombinedVerdict] = field(default_factory=dict)
    first: dict[PairKey, CombinedVerdict] = field(default_factory=dict)
    first_records: list[VerdictRecord] = field(default_factory=list)

    def decided_by(self, index: int) -> str:
        """ "first_pass", "strong", or "pending" (escalated, strong verdicts not all in)."""
        if self.accepted[index]:
            return "first_pass"
        verdict = self.strong.get(self.keys[index])
        return "strong" if verdict is not None and verdict.complete else "pending"

    def escalated(self) -> set[PairKey]:
        """Pairs the strong judge must judge at this threshold."""
        return {k for k, ok in zip(self.keys, self.accepted, strict=True) if not ok}


def probability_records(
    log: EvidenceLog, plan: CascadePlan, shas: Mapping[tuple[str, str], str] | None
) -> list[VerdictRecord]:
    """The first pass's current verdicts that carry probabilities from the planned source."""
    return [
        r
        for r in load_verdicts(log, plan.first_pass, answer_shas=shas)
        if r.get("kind") == "verdict"
        and isinstance(r.get("probs"), dict)
        and r.get("confidence") == plan.confidence
    ]


def cascade_pairs(
    spec: RunSpec,
    log: EvidenceLog,
    plan: CascadePlan,
    shas: Mapping[tuple[str, str], str] | None = None,
) -> CascadePairs:
    """Every pair the first pass judged in both orders (with probabilities), decided at the
    plan's threshold, and the strong judge's combined verdicts on the same answers."""
    return pairs_from_records(
        spec.models,
        plan,
        probability_records(log, plan, shas),
        load_verdicts(log, plan.strong, answer_shas=shas),
    )


def pairs_from_records(
    models: Sequence[str],
    plan: CascadePlan,
    first_records: list[VerdictRecord],
    strong_records: list[VerdictRecord],
) -> CascadePairs:
    """`cascade_pairs` over records already read: the first pass's (those with probabilities
    from the planned source) and the strong judge's current ones."""
    from konkord.stats.selective import accepted

    records = [
        r
        for r in first_records
        if r.get("kind") == "verdict"
        and isinstance(r.get("probs"), dict)
        and r.get("confidence") == plan.confidence
    ]
    first = {(c.task_id, c.model_a, c.model_b): c for c in combine_verdicts(records) if c.complete}
    keys = sorted(k for k in first if k[1] in models and k[2] in models)
    probs = {o: np.zeros((len(keys), 3)) for o in ("ab", "ba")}
    codes = {o: np.zeros(len(keys), np.int64) for o in ("ab", "ba")}
    for row, key in enumerate(keys):
        for order in ("ab", "ba"):
            record = first[key].orders[order]
            terms = to_models(record["probs"], order)
            probs[order][row] = [terms[c] for c in _CODES]
            codes[order][row] = outcome_code(record["winner"], key[1], key[2])
    ok = accepted(probs["ab"], probs["ba"], codes["ab"], codes["ba"], plan.accept_at)
    strong = {(c.task_id, c.model_a, c.model_b): c for c in combine_verdicts(strong_records)}
    return CascadePairs(
        plan,
        keys,
        probs["ab"],
        probs["ba"],
        codes["ab"],
        codes["ba"],
        ok,
        strong,
        first,
        records,
    )


def final_records(pairs: CascadePairs) -> list[Record]:
    """The records behind each pair's final verdict, under the strong judge's name, each marked
    with the judge that decided it: the first pass's two orders where it was accepted, the
    strong judge's otherwise (pending pairs are left out: they have no verdict yet)."""
    out: list[Record] = []
    for index, key in enumerate(pairs.keys):
        decider = pairs.decided_by(index)
        if decider == "first_pass":
            orders = pairs.first[key].orders
            judge = pairs.plan.first_pass
        elif decider == "strong":
            orders = pairs.strong[key].orders
            judge = pairs.plan.strong
        else:
            continue
        for record in orders.values():
            out.append({**record, "judge": pairs.plan.strong, "decided_by": judge})
    read = set(pairs.keys)
    for key, verdict in pairs.strong.items():
        if key not in read:  # the first pass could not read it: the strong judge decides
            out += [{**r, "decided_by": pairs.plan.strong} for r in verdict.orders.values()]
    return out
