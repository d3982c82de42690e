"""A ranking whose judge shares a provider family with ranked models, from any source: the
note at its top, the ranking fitted without those comparisons beside it, and the caveat on
every claim about those models."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from konkord.configuration.runspec import RunSpec
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog, Record
from konkord.evidence.verdicts import CombinedVerdict, VerdictRecord
from konkord.results import schema as R
from konkord.stages.decisions import PairKey, self_family
from konkord.stages.report.freshness import ReportOptions
from konkord.stages.report.report_ranking import judge_block

CAVEAT = " (caveat: judged by a judge of the same provider family)"


def mark_self_family(
    spec: RunSpec,
    log: EvidenceLog,
    block: R.JudgeBlock,
    judges: list[str],
    combined: list[CombinedVerdict],
    records: Sequence[VerdictRecord],
    answers: dict[tuple[str, str], Record],
    options: ReportOptions,
) -> None:
    """Fill `block.self_family` where one of `judges` (the block's judge, or a cascade's two)
    shares a family with ranked models; leave the block as it is otherwise."""

    def decided() -> Iterator[PairKey]:  # read only where a judge has a family member
        for c in combined:
            if c.complete and c.winner is not None:
                yield c.task_id, c.model_a, c.model_b

    found = self_family(judges, spec.models, decided())
    if not found:
        return
    own = {m for note in found for m in note.models}
    kept = [c for c in combined if c.model_a not in own and c.model_b not in own]
    kept_records = [r for r in records if r["model_a"] not in own and r["model_b"] not in own]
    ratings: list[R.ModelRating] = []
    why = ""
    try:
        without = judge_block(spec, log, block.judge, kept, kept_records, answers, options)
        ratings = [r for r in without.ratings if r.model not in own]
        why = (
            f"The ranking without every comparison involving {', '.join(sorted(own))}: "
            "the other models on the judge's verdicts alone."
        )
    except KonkordError as exc:
        why = f"No ranking without those comparisons: {exc}"
    block.self_family = [
        R.SelfFamilyNote(
            judge=note.judge,
            family=note.family,
            models=list(note.models),
            comparisons=note.involved,
            total=note.total,
            text=note.text(),
            ratings_without=ratings,
            without_note=why,
        )
        for note in found
    ]
    turn_claims = [claim for line in block.by_turn for claim in line.claims]
    for claim in [*block.claims, *turn_claims]:
        if own & set(claim.models) and not claim.text.endswith(CAVEAT):
            claim.text = claim.text.rstrip(".") + CAVEAT + "."
