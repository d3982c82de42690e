"""`--dry-run`: what run and judge would call, with token and cost estimates; calls nothing."""

from __future__ import annotations

from konkord.configuration.call_settings import CallSettings
from konkord.configuration.runspec import RunSpec
from konkord.evidence.log import EvidenceLog
from konkord.providers.budget import Estimate, estimate_calls
from konkord.providers.deployments import Deployments
from konkord.stages.judge.cascade_view import CascadePlan


def run_estimates(
    spec: RunSpec, settings: CallSettings, force: bool, batch: bool
) -> list[Estimate]:
    """Per model: the answers still to make, their prompt tokens, and max_tokens per reply.

    A conversation counts every turn still to ask; an earlier turn not yet answered stands in
    as a reply of max_tokens tokens (an upper bound: its real text is not known yet)."""
    from konkord.stages.run import answers_to_make, conversation_messages, current_conversations

    log = EvidenceLog(spec.run_dir)
    todo = answers_to_make(log, spec.suite, spec.models, settings, force)
    existing = {} if force else current_conversations(log, spec.suite, settings)
    calls = []
    for task, model in todo:
        earlier = []
        for record in existing.get((task.id, model), []):
            if record.get("error") is not None or record.get("text") is None:
                break
            earlier.append(str(record["text"]))
        for turn in range(len(earlier) + 1, len(task.conversation()) + 1):
            messages = conversation_messages(spec.suite, task, turn, earlier)
            calls.append((model, messages, settings.max_tokens))
            earlier.append(" x" * settings.max_tokens)
    return estimate_calls(calls, "model", spec.prices, batch, Deployments(spec.deployments))


def cascade_estimates(
    spec: RunSpec, plan: CascadePlan, max_tokens: int
) -> tuple[list[Estimate], str]:
    """The cascade's calls still owed, per judge, and the strong judge's share by name:
    "escalated + audited" (before the first pass has judged, every pair counts as escalated)."""
    from konkord.stages.judge.cascade import audit_size, strong_split
    from konkord.stages.judge.judge import calls_to_make, judge_messages

    first = calls_to_make(spec, (plan.first_pass,))
    escalated, audited = strong_split(spec, plan)
    strong = [
        item
        for item in calls_to_make(spec, (plan.strong,))
        if (item.task.id, item.model_a, item.model_b) in escalated | audited
    ]
    calls = (
        (item.judge, judge_messages(spec, item), max_tokens) for item in [*first, *strong]
    )
    estimates = estimate_calls(calls, "judge", spec.prices, False, Deployments(spec.deployments))
    key = {(i.task.id, i.model_a, i.model_b) for i in strong}
    owed_escalated = len(key & escalated)
    owed_audited = len(key & (audited - escalated))
    line = (
        f"strong judge {plan.strong}: {owed_escalated} escalated + {owed_audited} audited pairs "
        f"still to judge, two calls each (audit: {audit_size(spec, plan)} pairs the first pass "
        "decided; a pair the first pass has not judged yet counts as escalated)"
    )
    return estimates, line


def judge_estimates(
    spec: RunSpec, judges: tuple[str, ...], max_tokens: int, batch: bool
) -> list[Estimate]:
    """Per judge: the verdicts still owed (pairs with both answers), on the real prompts."""
    from konkord.stages.judge.judge import calls_to_make, judge_messages

    calls = (
        (item.judge, judge_messages(spec, item), max_tokens)
        for item in calls_to_make(spec, judges)
    )
    return estimate_calls(calls, "judge", spec.prices, batch, Deployments(spec.deployments))
