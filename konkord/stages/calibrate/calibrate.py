"""The calibrate stage: what the human labels say about each judge, stored in the results file.

Each human label is joined to the judge's combined verdict for the same (task, model pair), in
model terms, so a person who saw the answers in the other order is still compared fairly. One
comparison is one (judge verdict, label) pair: an item labelled by three people counts three
times, which is how published tables (MT-Bench) count. Agreement is split by whether the judge's
two orders agreed, so a judge that follows the position is told apart from one that chooses
wrongly. Without labels a judge is "uncalibrated", never 0% or 100%.

Labeller ids: `name#2`, `name#3`... are a second and third vote of the same person on the same
item (the evidence key holds one label per labeller and item, and imported data can hold more);
they count as separate comparisons but as one person in `labellers` and `per_labeller`.
"""

from __future__ import annotations

from collections.abc import Iterable

from konkord.configuration.runspec import RunSpec
from konkord.evidence.log import EvidenceLog, Record
from konkord.evidence.verdicts import CombinedVerdict, VerdictRecord
from konkord.results import schema as R
from konkord.stages.calibrate.calibrate_agreement import (
    Comparison,
    as_proportion,
    from_agreement,
    grouped,
    human_human_of,
    kappa_of,
    keyed,
    labeller_person,
    length_quartile_rates,
    standing_labels,
    task_turn,
    turn_rates,
    winner_code,
)
from konkord.stages.calibrate.calibrate_print import format_calibration
from konkord.stats.agreement import (
    CATEGORIES,
    agreement_without_ties,
    confusion_matrix,
    exact_agreement,
)

__all__ = [
    "calibration_block",
    "format_calibration",
    "labeller_person",
    "task_turn",
]


def _answer_length(
    answers: dict[tuple[str, str], Record], task_id: str, model_a: str, model_b: str
) -> float | None:
    texts = [answers.get((task_id, m), {}).get("text") for m in (model_a, model_b)]
    if any(not isinstance(t, str) for t in texts):
        return None
    return (len(str(texts[0])) + len(str(texts[1]))) / 2


def _verdict_text(record: VerdictRecord | None) -> str | None:
    if record is None:
        return None
    if record.get("kind") != "verdict":
        return f"failure: {record.get('reason')}"
    return None if record.get("winner") is None else str(record.get("winner"))


def _rationale(record: VerdictRecord | None) -> str | None:
    return None if record is None or record.get("rationale") is None else str(record["rationale"])


def _disagreement(c: Comparison) -> R.Disagreement:
    names = (c.model_a, c.model_b, "tie")
    ab, ba = c.verdict.orders.get("ab"), c.verdict.orders.get("ba")
    return R.Disagreement(
        task_id=c.task_id,
        model_a=c.model_a,
        model_b=c.model_b,
        labeller=c.labeller,
        human=names[c.human],
        judge_combined=names[c.judge],
        flipped=c.verdict.flipped,
        judge_ab=_verdict_text(ab),
        judge_ba=_verdict_text(ba),
        rationale_ab=_rationale(ab),
        rationale_ba=_rationale(ba),
    )


def judge_calibration(
    spec: RunSpec,
    log: EvidenceLog,
    judge: str,
    combined: list[CombinedVerdict],
    answers: dict[tuple[str, str], Record],
    labels: list[Record],
) -> R.Calibration:
    """The calibration block for one judge (uncalibrated, never 0% or 100%, without labels)."""
    if not labels:
        return R.Calibration(status="uncalibrated")
    return calibration_block(spec, log, judge, combined, answers, labels)


def calibration_block(
    spec: RunSpec,
    log: EvidenceLog,
    judge: str,
    combined: list[CombinedVerdict],
    answers: dict[tuple[str, str], Record],
    labels: Iterable[Record],
) -> R.Calibration:
    """The calibration block of one judge: every standing label against the judge's verdict."""
    standing = standing_labels(labels)
    persons = sorted({labeller_person(label.labeller) for label in standing})
    verdicts = {
        (c.task_id, c.model_a, c.model_b): c
        for c in combined
        if c.complete and c.judge == judge and c.winner is not None
    }
    comparisons: list[Comparison] = []
    for label in standing:
        verdict = verdicts.get((label.task_id, label.model_a, label.model_b))
        if verdict is None:
            continue
        judge_code = winner_code(verdict.winner, label.model_a, label.model_b)
        if judge_code is None:
            continue
        comparisons.append(
            Comparison(
                label.task_id,
                label.model_a,
                label.model_b,
                label.labeller,
                label.code,
                judge_code,
                verdict,
                _answer_length(answers, label.task_id, label.model_a, label.model_b),
            )
        )
    unmatched = len(standing) - len(comparisons)
    if not comparisons:
        return R.Calibration(
            status="uncalibrated",
            labels=len(standing),
            labellers=persons,
            unmatched_labels=unmatched,
            human_human=human_human_of(standing),
        )
    human = [c.human for c in comparisons]
    judged = [c.judge for c in comparisons]
    tasks = [c.conversation for c in comparisons]  # a conversation's turns are one cluster
    consistent = [c for c in comparisons if not c.verdict.flipped]
    flipped = [c for c in comparisons if c.verdict.flipped]
    items = {(c.task_id, c.model_a, c.model_b): c.verdict.flipped for c in comparisons}
    task_order = {t.id: k for k, t in enumerate(spec.suite.tasks)}

    def agree(group: list[Comparison]) -> R.Proportion:
        return from_agreement(
            exact_agreement(
                [c.human for c in group],
                [c.judge for c in group],
                [c.conversation for c in group],
            )
        )

    by_task = keyed(
        dict(
            sorted(
                grouped(comparisons, lambda c: c.task_id).items(),
                key=lambda kv: (task_order.get(kv[0], len(task_order)), kv[0]),
            )
        )
    )
    by_pair = keyed(
        dict(sorted(grouped(comparisons, lambda c: f"{c.model_a} vs {c.model_b}").items()))
    )
    per_labeller = keyed(
        dict(sorted(grouped(comparisons, lambda c: labeller_person(c.labeller)).items()))
    )
    return R.Calibration(
        status="calibrated",
        labels=len(standing),
        labellers=persons,
        unmatched_labels=unmatched,
        agreement=from_agreement(exact_agreement(human, judged, tasks)),
        kappa=kappa_of(human, judged, tasks),
        confusion=R.Confusion(
            categories=list(CATEGORIES),
            matrix=confusion_matrix(human, judged).tolist(),
        ),
        agreement_no_ties=from_agreement(agreement_without_ties(human, judged, tasks)),
        agreement_consistent=agree(consistent),
        agreement_flipped=agree(flipped),
        flip_rate=as_proportion(sum(items.values()), len(items)),
        by_task=by_task,
        by_pair=by_pair,
        by_length_quartile=length_quartile_rates(comparisons),
        per_labeller=per_labeller,
        by_turn=turn_rates(comparisons, standing),
        human_human=human_human_of(standing),
        disagreements=[_disagreement(c) for c in comparisons if c.human != c.judge],
    )
