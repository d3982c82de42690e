"""The report stage: evidence in, one versioned results file out (results/<run>.json).

Everything the site shows is computed here, once: ratings with task-bootstrap intervals, rank
groups and claims from pairwise differences, diagnostics, cost, the calibration block, and
every answer and verdict per task. The judge prompt is read back from the evidence, never
recomposed from the suite, so the site prints what actually ran.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from konkord import __version__
from konkord.configuration.runspec import RunSpec
from konkord.configuration.turns import conversation_count
from konkord.configuration.yamlpos import no_gc
from konkord.errors import KonkordError
from konkord.evidence.combined_columns import complete_only
from konkord.evidence.log import EvidenceLog, Record
from konkord.evidence.verdict_table import reading_early
from konkord.evidence.verdicts import (
    CombinedVerdict,
    VerdictRecord,
    answer_shas,
    combine_verdicts,
    judges_in_log,
)
from konkord.providers.loading import is_offline_model
from konkord.results import schema as R
from konkord.results.files import StagedTasks, TasksInBackground
from konkord.results.schema import write_results
from konkord.stages.calibrate.methods import describe
from konkord.stages.current import (
    current_labels,
    evidence_date,
    good_answers,
    proportion,
    system_prompt_for,
)
from konkord.stages.decisions_of import decisions_of
from konkord.stages.judge.cascade_view import final_records, plan_of
from konkord.stages.report.freshness import DEFAULT_RESAMPLES, ReportOptions, inputs_digest
from konkord.stages.report.report_family import mark_self_family
from konkord.stages.report.report_ranking import judge_block
from konkord.stages.report.report_style import style_block
from konkord.stages.report.report_views import cost_line, pass_rates_block
from konkord.stages.report.task_source import (
    TaskSource,
    answer_features,
    task_source,
    tasks_of,
)
from konkord.stages.report.task_spawn import waiting
from konkord.stages.report.task_worker import EarlyAnswers, TasksInProcess, pays
from konkord.stats.threads import threads_at_most

__all__ = [
    "DEFAULT_RESAMPLES",
    "ReportOptions",
    "answer_shas",
    "build_results",
    "evidence_date",
    "good_answers",
    "inputs_digest",
    "proportion",
    "system_prompt_for",
    "write_report",
]


DEFAULT_OPTIONS = ReportOptions()
T = TypeVar("T")
# Where style features counted elsewhere are had (`task_worker.EarlyAnswers.features`).
Features = Callable[[], dict[tuple[str, str], dict[str, int]] | None]


def _current_checks(spec: RunSpec) -> dict[tuple[str, str, str], Record]:
    """Check results made on the answers the run holds now (stale ones are left out)."""
    from konkord.stages.check import current_check_results

    return current_check_results(spec)


def _objective(
    spec: RunSpec,
    checks: dict[tuple[str, str, str], Record],
    combined: list[CombinedVerdict],
    records: Sequence[VerdictRecord],
    labels: list[Record],
) -> dict[str, Any] | None:
    """The judge (and people) against executed tests, where the suite's tasks declare tests."""
    import dataclasses

    passed = {(t, m): bool(r.get("passed")) for (t, m, c), r in checks.items() if c == "tests"}
    if not passed:
        return None
    from konkord.stats.objective import objective_block

    block = objective_block(
        combined,
        passed,
        labels=[(r["task_id"], r["model_a"], r["model_b"], r["winner"]) for r in labels] or None,
        calls=[r for r in records if r.get("kind") == "verdict"],
    )
    out: dict[str, Any] = dataclasses.asdict(block)
    return out


def _anchored(
    spec: RunSpec,
    block: R.JudgeBlock,
    combined: list[CombinedVerdict],
    answers: dict[tuple[str, str], Record],
    labels: list[Record],
    options: ReportOptions,
) -> R.AnchoredRanking | None:
    """People's ranking from this judge's verdicts and the labels (None without labels)."""
    if not labels:
        return None
    from konkord.stages.label.sample import comparison_pool
    from konkord.stages.report.report_anchored import anchored_block

    pool = comparison_pool(answers, spec.suite.judged_ids(), spec.models)
    done = [c for c in combined if c.complete]
    return anchored_block(
        spec, block, done, labels, pool, options.resamples, options.seed
    )


def build_results(spec: RunSpec, options: ReportOptions = DEFAULT_OPTIONS) -> R.Results:
    """Compute everything the site needs for one run, its tasks held in memory."""
    with no_gc():  # see write_report
        summary, tasks = report_parts(spec, options)
        summary.tasks = [task if isinstance(task, R.TaskView) else task.view() for task in tasks]
    return summary


def write_report(
    spec: RunSpec,
    path: Path,
    options: ReportOptions = DEFAULT_OPTIONS,
    digest: str | None = None,
) -> R.Results:
    """Compute the run's results and write them to `path`, each task made, written and let go
    in turn (a leaderboard's 190,000 comparisons are never held at once); returns the results
    without their tasks, which is all the terminal prints. `digest` is the inputs' digest
    where the caller has taken it (to find the results file stale), not taken again.

    The cyclic garbage collector is paused meanwhile: the report holds millions of objects it
    keeps to the end (the log's columns, a verdict per pair), and each full collection walked
    all of them, about 1.5-2 s of a 9 s report at 20 models x 1,000 tasks, to free a few
    hundred cycles. Memory is let go by reference counting as before.

    The tasks are made and written on a thread of their own from the moment the verdicts are
    combined, while the figures are computed: in a worker process of their own where that
    pays (`task_worker`), else on a thread (`TasksInBackground`). While a worker process
    makes them, the figures' fits run on one thread (`stats.threads`): the report waits for
    the worker, and a second thread of the fits took its core."""
    pending: list[StagedTasks] = []
    early: list[EarlyAnswers] = []
    limits = contextlib.ExitStack()

    def answers_read(answers: dict[tuple[str, str], Record], count: bool) -> Features | None:
        if not waiting():  # no worker started early (`task_spawn`): the tasks wait their turn
            return None
        try:
            early.append(EarlyAnswers(answers, count))
        except OSError:
            return None
        return early[0].features

    def start(tasks: Iterator[R.TaskView | R.TaskData], source: TaskSource | None) -> None:
        sent = early.pop() if early else None
        if sent is not None and source is None:  # a cascade's tasks are made here
            sent.stop()
            sent = None
        if source is not None and (sent is not None or pays(source)):
            try:
                pending.append(TasksInProcess(path, spec.name, source, sent))
                limits.enter_context(threads_at_most(1))
                return
            except OSError:  # no process to be had (a limit on processes or files): a thread
                if sent is not None:
                    sent.stop()
        pending.append(TasksInBackground(path, spec.name, tasks))

    with no_gc(), limits:
        try:
            summary, tasks = report_parts(spec, options, start, digest, answers_read)
            write_results(summary, path, pending[0] if pending else tasks)
        except BaseException:  # the figures failed, or Ctrl-C: the previous results stand
            for background in pending:
                background.stop()
            for sent in early:
                sent.stop()
            raise
    return summary


def _load_figures() -> None:
    """Import what computes the figures (the statistics and what they load on first use:
    about a quarter of a second at 20 models x 1,000 tasks): once the tasks are handed to a
    worker process, or meanwhile where the verdict log's columns are still being read, not
    before (`report_parts`)."""
    import numpy.ma  # (numpy loads it at the first np.unique)
    import numpy.random  # noqa: F401

    import konkord.stages.calibrate.calibrate
    import konkord.stages.calibrate.route_rows
    import konkord.stages.judge.cascade_report
    import konkord.stages.judge.design
    import konkord.stages.report.judges
    import konkord.stats.gate
    import konkord.stats.ranking_text
    import konkord.stats.style_boot  # noqa: F401


def _in_background(work: Callable[..., T], *args: Any) -> Future[T]:
    """`work(*args)` started on a thread of its own; its result (or error) is the future's."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="konkord-report")
    try:
        return pool.submit(work, *args)
    finally:
        pool.shutdown(wait=False)  # the thread ends when the work is done


def report_parts(
    spec: RunSpec,
    options: ReportOptions = DEFAULT_OPTIONS,
    tasks_ready: Callable[[Iterator[R.TaskView | R.TaskData], TaskSource | None], None]
    | None = None,
    digest: str | None = None,
    answers_read: Callable[[dict[tuple[str, str], Record], bool], Features | None]
    | None = None,
) -> tuple[R.Results, Iterator[R.TaskView | R.TaskData]]:
    """The results without their tasks, and the tasks to be made one at a time (as plain data,
    or as models where a cascade marks its comparisons on them). `tasks_ready`, if given, is
    handed the tasks as soon as they can be made, before the figures are computed, with what
    they are made from (None where a cascade marks them: they are made here); `digest`, the
    inputs' digest if the caller has it. `answers_read`, if given, is handed the answers as
    soon as they are read (where no cascade marks the tasks), and whether their style
    features are wanted; it may return where to get them counted elsewhere (None: not
    counted there; they are counted here)."""
    log = EvidenceLog(spec.run_dir)
    if not log.exists():
        raise KonkordError(
            f'run "{spec.name}" has no evidence in {spec.run_dir}; '
            f"run `konkord run --run {spec.name}`"
        )
    # The digest reads every stream again (300 MB of verdicts at 20 models x 1,000 tasks):
    # hashing lets go of the interpreter, so it runs on another core while the log is parsed.
    hashing = None if digest is not None else _in_background(inputs_digest, spec, options)
    answers = good_answers(spec, log)
    plan = plan_of(spec)
    counted = None
    if answers_read is not None and plan is None:
        counted = answers_read(answers, spec.style_control)
    shas = answer_shas(answers)
    if reading_early(log.path("verdicts")):  # waiting for the log's columns: import meanwhile
        _load_figures()
    judges = list(dict.fromkeys([*spec.judges, *judges_in_log(log)]))
    if not judges:
        raise KonkordError(
            f'run "{spec.name}" has no verdicts; '
            f"run `konkord judge --run {spec.name} --judge MODEL`"
        )
    labels = current_labels(log)
    checks = _current_checks(spec)
    decisions = decisions_of(spec, log, shas, labels)
    cascade = decisions.cascade
    if plan is not None:  # the first pass is evidence for the cascade, not a judge of its own
        judges = [j for j in judges if j != plan.first_pass]
    features: dict[tuple[str, str], dict[str, int]] = {}
    if spec.style_control:
        from_worker = counted() if counted is not None else None
        features = answer_features(answers) if from_worker is None else from_worker
    records_by_judge: dict[str, Sequence[VerdictRecord]] = {}
    combined_by_judge: dict[str, list[CombinedVerdict]] = {}
    for judge in judges:
        records_by_judge[judge] = decisions.judge_records[judge]
        combined_by_judge[judge] = decisions.combined[judge]  # combined once, by the decisions
        if cascade is not None and judge == cascade.plan.strong:
            records_by_judge[judge] = final_records(cascade)
            combined_by_judge[judge] = combine_verdicts(records_by_judge[judge])
    source = task_source(spec, answers, combined_by_judge, labels, checks, features)
    data = tasks_of(source)
    tasks: Iterator[R.TaskView | R.TaskData] = data
    if cascade is not None:
        from konkord.stages.judge.cascade_report import mark_comparisons

        tasks = mark_comparisons((task.view() for task in data), cascade)
    if tasks_ready is not None:
        tasks_ready(tasks, source if cascade is None else None)
    _load_figures()
    from konkord.stages.calibrate.calibrate import judge_calibration
    from konkord.stages.calibrate.route_rows import route_rows
    from konkord.stages.judge.cascade_report import cascade_block
    from konkord.stages.report.judges import judge_panel

    blocks = []
    by_model: dict[str, list[Record]] = {m: [] for m in spec.models}
    for (_, model), answer in answers.items():  # grouped once, not scanned once per model
        if model in by_model:
            by_model[model].append(answer)
    cost = [cost_line(m, "generation", by_model[m], spec.prices.get(m)) for m in spec.models]
    routes: list[R.RouteRow] = []
    styled: list[tuple[R.JudgeBlock, list[CombinedVerdict]]] = []
    for judge in judges:
        records = records_by_judge[judge]
        combined = combined_by_judge[judge]
        block = judge_block(spec, log, judge, combined, records, answers, options)
        block.calibration = judge_calibration(spec, log, judge, combined, answers, labels)
        block.calibration.objective = _objective(spec, checks, combined, records, labels)
        describe(block, conversation_count([t.id for t in spec.suite.tasks]))
        block.anchored = _anchored(spec, block, combined, answers, labels, options)
        styled.append((block, combined))
        deciders = (
            [cascade.plan.first_pass, judge]
            if cascade is not None and judge == cascade.plan.strong
            else [judge]
        )
        mark_self_family(spec, log, block, deciders, combined, records, answers, options)
        if cascade is not None and judge == cascade.plan.strong:
            block.cascade = cascade_block(decisions, spec.prices, spec.name)
            route = decisions.routes[str(decisions.cascade_route)]
            cost.append(cost_line(route.name, "judge", [], None, route.cost(spec.prices)))
            routes = route_rows(spec, log, decisions, answers)
            first = cascade.plan.first_pass
            first_records = decisions.judge_records.get(first, [])
            cost.append(cost_line(first, "judge", first_records, spec.prices.get(first)))
            records = decisions.judge_records[judge]
        blocks.append(block)
        cost.append(cost_line(judge, "judge", records, spec.prices.get(judge)))
    panel = judge_panel(spec, log, combined_by_judge, answers, labels, options)
    # The style-controlled rankings last: their bootstrap keeps both cores busy, which by now
    # the task files no longer want (made meanwhile, beside the figures above).
    for block, combined in styled:
        block.style = style_block(
            spec, block, complete_only(combined), labels, features, options
        )
    suite = spec.suite
    summary = R.Results(
        konkord_version=__version__,
        run=spec.name,
        evidence_date=evidence_date(log),
        inputs_digest=digest if hashing is None else hashing.result(),
        simulated=all(is_offline_model(m) for m in [*spec.models, *judges]),
        suite=R.SuiteInfo(
            name=suite.name,
            path=str(spec.suite_path),
            rubric=suite.rubric,
            answer_language=suite.answer_language,
            context=suite.context,
            task_count=len(suite.tasks),
        ),
        models=list(spec.models),
        judges=judges,
        judge_blocks=blocks,
        cost=cost,
        pass_rates=pass_rates_block(spec, answers, checks),
        tasks=[],
        judge_panel=panel,
        routes=routes,
    )
    return summary, tasks
