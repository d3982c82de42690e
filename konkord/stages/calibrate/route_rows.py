"""A cascade's two judges seen on their own, for the judges table: the strong judge on its own
verdicts only (never the cascade's figures under its name) and the first pass, on every pair
it judged and on the pairs it decided. Both read the run's one view (`stages.decisions`)."""

from __future__ import annotations

from collections.abc import Sequence

from konkord.configuration.runspec import RunSpec
from konkord.evidence.log import EvidenceLog, Record
from konkord.evidence.verdicts import VerdictRecord, combine_verdicts
from konkord.results import schema as R
from konkord.stages.calibrate.calibrate import judge_calibration
from konkord.stages.current import positional, proportion
from konkord.stages.decisions import RunDecisions


def _row(
    spec: RunSpec,
    log: EvidenceLog,
    decisions: RunDecisions,
    answers: dict[tuple[str, str], Record],
    judge: str,
    role: str,
    records: Sequence[VerdictRecord],
) -> R.RouteRow:
    cascade = decisions.routes[str(decisions.cascade_route)]
    labels = [label for group in decisions.labels.values() for label in group]
    combined = combine_verdicts(records)
    complete = [c for c in combined if c.complete]
    decided = {k for k, d in cascade.decisions.items() if d.decided_by == judge}
    mine = [c for c in complete if (c.task_id, c.model_a, c.model_b) in decided]
    return R.RouteRow(
        name=judge,
        role=role,  # type: ignore[arg-type]
        judge=judge,
        cascade=cascade.name,
        pairs=len(complete),
        decided=len(mine),
        calibration=judge_calibration(spec, log, judge, combined, answers, labels),
        calibration_decided=(
            judge_calibration(spec, log, judge, mine, answers, labels) if role == "first_pass" else None
        ),
        flip_rate=proportion(sum(c.flipped for c in complete), len(complete)),
        positional=positional(records),
        failures=sum(1 for r in records if r.get("kind") == "failure"),
    )


def route_rows(
    spec: RunSpec,
    log: EvidenceLog,
    decisions: RunDecisions,
    answers: dict[tuple[str, str], Record],
) -> list[R.RouteRow]:
    """The strong judge alone and the first pass, each from its own records only."""
    pairs = decisions.cascade
    if pairs is None:
        return []
    plan = pairs.plan
    strong = decisions.judge_records.get(plan.strong, [])
    first = decisions.judge_records.get(plan.first_pass, [])
    return [
        _row(spec, log, decisions, answers, plan.strong, "strong_alone", strong),
        _row(spec, log, decisions, answers, plan.first_pass, "first_pass", first),
    ]
