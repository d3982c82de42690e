"""`--dry-run`: what run and judge would call, with token and cost estimates; calls nothing."""

from __future__ import annotations

from konkord.configuration.call_settings import CallSettings
from konkord.configuration.runspec import RunSpec
from konkord.evidence.log import EvidenceLog
from konkord.providers.budget import Estimate, estimate_calls
from konkord.providers.deployments import Deployments


def run_estimates(
    spec: RunSpec, settings: CallSettings, force: bool, batch: bool
) -> list[Estimate]:
    """Per model: the answers still to make, their prompt tokens, and max_tokens per reply."""
    from konkord.stages.run import answer_messages, answers_to_make

    todo = answers_to_make(EvidenceLog(spec.run_dir), spec.suite, spec.models, settings, force)
    calls = (
        (model, answer_messages(spec.suite, task), settings.max_tokens) for task, model in todo
    )
    return estimate_calls(calls, "model", spec.prices, batch, Deployments(spec.deployments))


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
