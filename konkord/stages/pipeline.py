"""Bring one run up to date, like make: only the stages whose output is missing or stale run.

Order: answers, verdicts, simulated labels (demo runs only; people's labels are never made up),
checks, report. With `offline`, no model is called: anything missing is reported with the
stage, the count and how to fill it, and the build fails. Without credentials for a model,
the same message names the variable to set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from konkord.errors import KonkordError
from konkord.evidence import EvidenceLog
from konkord.llm import ModelClient, is_offline_model
from konkord.runspec import RunSpec
from konkord.stages.report import ReportOptions, build_results, inputs_digest
from konkord.stages.run import current_answers

Echo = Callable[[str], None]
DEFAULT_OPTIONS = ReportOptions()


def missing_answers(spec: RunSpec) -> int:
    """(task, model) cells without a good current answer."""
    answers = current_answers(EvidenceLog(spec.run_dir), spec.suite, spec.settings)
    return sum(
        1
        for task in spec.suite.tasks
        for model in spec.models
        if (rec := answers.get((task.id, model))) is None or rec.get("error") is not None
    )


def missing_credentials(models: list[str], api_base: str | None) -> dict[str, list[str]]:
    """Model -> the environment variables it needs and lacks (empty when it can be called)."""
    needy = [m for m in models if not is_offline_model(m)]
    if not needy or api_base:
        return {}
    from konkord.llm import load_litellm

    litellm = load_litellm()
    out: dict[str, list[str]] = {}
    for model in needy:
        try:
            check = litellm.validate_environment(model=model)
        except Exception:
            continue
        if not check.get("keys_in_environment", True):
            out[model] = list(check.get("missing_keys") or [])
    return out


def _refuse(spec: RunSpec, stage: str, count: int, why: str) -> KonkordError:
    return KonkordError(f"run {spec.name}: {stage}: {count} missing; {why}")


def _results_current(spec: RunSpec, options: ReportOptions) -> bool:
    from konkord.results import read_results

    if not spec.results_path.exists():
        return False
    try:
        results = read_results(spec.results_path)
    except KonkordError:
        return False
    return results.inputs_digest == inputs_digest(spec, options)


def ensure_run(
    spec: RunSpec, offline: bool, echo: Echo, options: ReportOptions = DEFAULT_OPTIONS
) -> list[str]:
    """Run what is missing or stale for one run; returns notes for the build summary."""
    notes: list[str] = []
    todo = missing_answers(spec)
    if todo:
        _call_or_refuse(spec, "answers", todo, spec.models, offline)
        from konkord.stages.run import generate_answers

        echo(f"  {spec.name}: generating {todo} answers")
        summary = asyncio.run(
            generate_answers(
                EvidenceLog(spec.run_dir),
                spec.suite,
                spec.models,
                spec.settings,
                ModelClient(prices=spec.prices),
            )
        )
        if summary.failed:
            raise KonkordError(
                f"run {spec.name}: {summary.failed} answers failed "
                f"(first: {summary.failures[0]}); rerun `konkord build` to retry"
            )
    for judge in spec.judges:
        from konkord.stages.judge import judge_run, missing_verdicts

        owed = missing_verdicts(spec, judge)
        if not owed:
            continue
        _call_or_refuse(spec, f"verdicts of {judge}", owed, [judge], offline)
        echo(f"  {spec.name}: judging {owed} calls with {judge}")
        judged = asyncio.run(judge_run(spec, [judge], ModelClient(prices=spec.prices)))
        if judged.failed:
            notes.append(f"run {spec.name}: judge {judge}: {judged.failed} calls failed")
    notes.extend(_simulated_labels(spec, echo))
    notes.extend(_checks(spec, offline, echo))
    if not _results_current(spec, options):
        from konkord.results import write_results

        echo(f"  {spec.name}: computing {spec.results_path}")
        write_results(build_results(spec, options), spec.results_path)
    return notes


def _call_or_refuse(
    spec: RunSpec, stage: str, count: int, models: list[str] | tuple[str, ...], offline: bool
) -> None:
    if offline:
        raise _refuse(
            spec,
            stage,
            count,
            "--offline calls no model: run `konkord build` without --offline, or commit the evidence",
        )
    lacking = missing_credentials(list(models), spec.settings.api_base)
    if lacking:
        names = "; ".join(f"{m} needs {', '.join(v) or 'an API key'}" for m, v in lacking.items())
        raise _refuse(spec, stage, count, f"no credentials: {names} (set it in the shell or .env)")


def _simulated_labels(spec: RunSpec, echo: Echo) -> list[str]:
    if not spec.label_plan.simulated_labellers:
        return []
    from konkord.label.labels import current_labels
    from konkord.simlabel import simulate_plan_labels

    have: dict[str, int] = {}
    for key in current_labels(EvidenceLog(spec.run_dir)):
        have[str(key[3])] = have.get(str(key[3]), 0) + 1
    wanted = spec.label_plan.n
    if all(have.get(p.name, 0) >= wanted for p in spec.label_plan.simulated_labellers):
        return []
    echo(f"  {spec.name}: simulated labellers at work")
    simulate_plan_labels(spec)
    return []


def _checks(spec: RunSpec, offline: bool, echo: Echo) -> list[str]:
    if not any(task.checks for task in spec.suite.tasks):
        return []
    from konkord.stages.check import check_run, missing_checks

    owed = missing_checks(spec)
    if not owed:
        return []
    try:
        echo(f"  {spec.name}: running {owed} checks")
        check_run(spec)
    except KonkordError as exc:
        return [f"run {spec.name}: checks not run: {exc}"]
    return []
