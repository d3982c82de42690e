"""Bring one run up to date, like make: only the stages whose output is missing or stale run.

Order: answers, verdicts, simulated labels (demo runs only; people's labels are never made up),
checks, report. With `offline`, no model is called: anything missing is reported with the
stage, the count and how to fill it, and the build fails. Without credentials for a model,
the same message names the variable to set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from konkord.configuration.runspec import RunSpec
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog
from konkord.providers.door import check_options, make_client
from konkord.providers.loading import is_offline_model
from konkord.stages.report.freshness import ReportOptions, inputs_digest
from konkord.stages.run import answers_to_make

Echo = Callable[[str], None]
DEFAULT_OPTIONS = ReportOptions()


def missing_answers(spec: RunSpec) -> int:
    """(task, model) cells without a good current answer."""
    return len(
        answers_to_make(EvidenceLog(spec.run_dir), spec.suite, spec.models, spec.settings)
    )


def imported(spec: RunSpec) -> bool:
    """True for a run made by `konkord import` (it keeps its sources in runs/<run>/import/)."""
    return (spec.run_dir / "import" / "source.json").is_file()


def _refuse(spec: RunSpec, stage: str, count: int, why: str) -> KonkordError:
    return KonkordError(f"run {spec.name}: {stage}: {count} missing; {why}")


def _results_current(spec: RunSpec, digest: str | None) -> bool:
    """Whether the results file was computed from the inputs of this `digest` and reads whole.
    Its digest is compared first, from the file's head; then the file is validated, its task
    files checked against their hash but not parsed (the site's render parses them, once)."""
    from konkord.results.schema import read_results
    from konkord.stages.report.freshness import stored_digest

    if digest is None or stored_digest(spec.results_path) != digest:
        return False
    try:
        read_results(spec.results_path, tasks=False)
    except KonkordError:
        return False
    return True


def owed_work(spec: RunSpec) -> tuple[int, dict[str, int]]:
    """What the run owes: answers, and calls of each of its judges (missing, failed or stale).
    An imported run's answers were written by others long ago: missing ones cannot be made,
    and are not counted."""
    answers = 0 if imported(spec) else missing_answers(spec)
    return answers, {judge: _missing_verdicts(spec, judge) for judge in spec.judges}


def owed_checked(spec: RunSpec, before: str | None = None) -> tuple[int, dict[str, int]]:
    """`owed_work`, and the run stamped where it owes nothing (`owed_stamp`): the stamp is
    kept only if no input changed while it was checked (since `before`, the fingerprint of
    its inputs where the caller has just taken it, else taken here)."""
    from konkord.stages.owed_stamp import fingerprint_now, record_owing_nothing

    before = fingerprint_now(spec) if before is None else before
    answers, verdicts = owed_work(spec)
    if not answers and not any(verdicts.values()):
        record_owing_nothing(spec, before)
    return answers, verdicts


def stamp_if_owing_nothing(spec: RunSpec) -> bool:
    """Check the run in full and stamp it if it owes nothing; whether it does."""
    answers, verdicts = owed_checked(spec)
    return not answers and not any(verdicts.values())


def ensure_run(
    spec: RunSpec, offline: bool, echo: Echo, options: ReportOptions = DEFAULT_OPTIONS
) -> list[str]:
    """Run what is missing or stale for one run; returns notes for the build summary.

    Offline, nothing is called: missing answers or verdicts become a note naming them, and the
    results file is recomputed only from complete evidence.
    """
    from konkord.stages.owed_stamp import stamp_holds

    # Found to owe nothing (by `konkord judge`, or the last build) with exactly these inputs?
    holds, before = stamp_holds(spec)
    owed_answers, owed_verdicts = (
        (0, dict.fromkeys(spec.judges, 0)) if holds else owed_checked(spec, before)
    )
    if offline and (owed_answers or any(owed_verdicts.values())):
        return [_offline_note(spec, owed_answers, owed_verdicts)]
    if owed_answers:
        owing = answers_to_make(EvidenceLog(spec.run_dir), spec.suite, spec.models, spec.settings)
        _require_credentials(
            spec, "answers", owed_answers, tuple(dict.fromkeys(m for _, m in owing))
        )
        from konkord.stages.run import generate_answers

        echo(f"  {spec.name}: generating {owed_answers} answers")
        summary = asyncio.run(
            generate_answers(
                EvidenceLog(spec.run_dir),
                spec.suite,
                spec.models,
                spec.settings,
                make_client(spec),
            )
        )
        if summary.failed:
            raise KonkordError(
                f"run {spec.name}: {summary.failed} answers failed "
                f"(first: {summary.failures[0]}); rerun `konkord build` to retry"
            )
    notes: list[str] = []
    for judge in spec.judges:
        from konkord.stages.judge.cascade import cascade_for, cascade_run
        from konkord.stages.judge.judge import judge_run

        # counted above, unless answers were made since (each one is owed a judge's verdicts)
        owed = _missing_verdicts(spec, judge) if owed_answers else owed_verdicts[judge]
        if not owed:
            continue
        cascade = cascade_for(spec, judge)
        if cascade is not None:
            from konkord.stages.judge.cascade import no_logprobs_error, no_logprobs_replies

            # A first pass without log-probabilities is a configuration error: build does not
            # pay to hear it again.
            refused = no_logprobs_replies(spec, cascade)
            if refused:
                raise no_logprobs_error(spec, cascade, refused)
        who = (judge,) if cascade is None else (cascade.first_pass, judge)
        _require_credentials(spec, f"verdicts of {judge}", owed, who)
        echo(f"  {spec.name}: judging {owed} calls with {' then '.join(who)}")
        judged = asyncio.run(
            judge_run(spec, [judge], make_client(spec))
            if cascade is None
            else cascade_run(spec, cascade, make_client(spec))
        )
        if judged.failed:
            notes.append(f"run {spec.name}: judge {judge}: {judged.failed} calls failed")
    notes.extend(_simulated_labels(spec, echo))
    notes.extend(_checks(spec, echo))
    # Taken once: it tells whether the results are stale, and is written into new ones.
    digest = inputs_digest(spec, options) if spec.results_path.exists() else None
    if not _results_current(spec, digest):
        # Imported only here: the statistics (scipy, about 0.6 s) are not loaded by a build
        # whose results files are current.
        from konkord.stages.report.report import write_report

        echo(f"  {spec.name}: computing {spec.results_path}")
        write_report(spec, spec.results_path, options, digest)
    return notes


def _missing_verdicts(spec: RunSpec, judge: str) -> int:
    from konkord.stages.judge.cascade import cascade_for, missing_calls
    from konkord.stages.judge.judge import missing_verdicts

    cascade = cascade_for(spec, judge)
    return missing_verdicts(spec, judge) if cascade is None else missing_calls(spec, cascade)


def _offline_note(spec: RunSpec, owed_answers: int, owed_verdicts: dict[str, int]) -> str:
    expected = len(spec.suite.tasks) * len(spec.models)
    state = "is missing" if not spec.results_path.exists() else "cannot be refreshed"
    verdicts = ", ".join(f"{n} verdicts of {j}" for j, n in owed_verdicts.items() if n)
    return (
        f"offline, no model called: run {spec.name}: {spec.results_path} {state}; answers "
        f"{expected - owed_answers} of {expected} present"
        + (f", {verdicts} missing" if verdicts else "")
        + " (run `konkord build` without --offline to make them, or commit the evidence)"
    )


def _require_credentials(spec: RunSpec, stage: str, count: int, models: tuple[str, ...]) -> None:
    from konkord.providers.llm import missing_credentials
    from konkord.providers.model_names import check_model_names

    try:
        routed = [m for m in models if m not in spec.deployments]
        check_model_names(routed, "runs.json", spec.settings.api_base)
        check_options(spec, models, batch=False)  # deployment keys named in runs.json are set
    except KonkordError as exc:
        raise _refuse(spec, stage, count, str(exc)) from None
    callable_offline = all(is_offline_model(m) for m in models)
    lacking = (
        {} if callable_offline else missing_credentials(tuple(routed), spec.settings.api_base)
    )
    if lacking:
        names = "; ".join(f"{m} needs {', '.join(v)}" for m, v in lacking.items())
        raise _refuse(spec, stage, count, f"no credentials: {names} (set it in the shell or .env)")


def _simulated_labels(spec: RunSpec, echo: Echo) -> list[str]:
    if not spec.label_plan.simulated_labellers:
        return []
    from konkord.stages.label.labels import current_labels
    from konkord.stages.label.simulated import simulate_plan_labels

    have: dict[str, int] = {}
    for key in current_labels(EvidenceLog(spec.run_dir)):
        have[str(key[3])] = have.get(str(key[3]), 0) + 1
    wanted = spec.label_plan.n
    if all(have.get(p.name, 0) >= wanted for p in spec.label_plan.simulated_labellers):
        return []
    echo(f"  {spec.name}: simulated labellers at work")
    simulate_plan_labels(spec)
    return []


def _checks(spec: RunSpec, echo: Echo) -> list[str]:
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
