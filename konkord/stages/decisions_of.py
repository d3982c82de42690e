"""The run's one view of who decided what (`stages.decisions`), read from its evidence: the
current verdicts of every judge the run lists or holds, its standing labels, its cascade."""

from __future__ import annotations

from collections.abc import Mapping

from konkord.configuration.runspec import RunSpec
from konkord.evidence.log import EvidenceLog, Record
from konkord.evidence.verdicts import judges_in_log, load_verdicts
from konkord.stages.decisions import RunDecisions, decide
from konkord.stages.judge.cascade_view import plan_of


def decisions_of(
    spec: RunSpec,
    log: EvidenceLog,
    shas: Mapping[tuple[str, str], str],
    labels: list[Record],
) -> RunDecisions:
    """Every route of the run: each judge alone, its cascade if it has one, and people."""
    judges = list(dict.fromkeys([*spec.judges, *judges_in_log(log)]))
    plan = plan_of(spec)
    if plan is not None and plan.first_pass not in judges:
        judges.append(plan.first_pass)
    return decide(
        spec.models,
        {judge: load_verdicts(log, judge, answer_shas=shas) for judge in judges},
        labels,
        plan,
    )
