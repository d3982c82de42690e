"""The check stage: every declared check on every current answer, each result logged on arrival.

Resumable like the other stages: a result is current while the answer text (answer_sha), and for
`tests` the task's tests (tests_sha), are unchanged, so a rerun checks only new or changed answers.
A `tests` result made without a sandbox is redone when the bwrap sandbox is asked for, and one
decided inside the answer's process (before the trusted harness) is redone in any case.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from konkord.checks import CheckResult
from konkord.checks.extract import extract_code
from konkord.checks.runner import run_check
from konkord.checks.sandbox import Limits, require_sandbox
from konkord.checks.static import require_tool
from konkord.configuration.runspec import RunSpec
from konkord.configuration.suite import Task
from konkord.configuration.turns import task_clusters
from konkord.evidence.log import EvidenceLog, Record, now_iso
from konkord.evidence.verdicts import answer_sha
from konkord.stages.run import current_answers
from konkord.stats.passrates import PassRate, pass_rates

CheckKey = tuple[str, str, str]  # (task_id, model, check)
# Who decided a `tests` result: the harness outside the sandbox. Results from before it (no such
# field) were decided in the answer's own process and are redone.
VERDICT_BY = "harness"
ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class CheckItem:
    """One check owed to one answer."""

    task: Task
    model: str
    check: str
    text: str
    sha: str

    @property
    def key(self) -> CheckKey:
        """The evidence key of its result."""
        return (self.task.id, self.model, self.check)


@dataclass
class CheckSummary:
    """What a check stage did, and the pass counts of every current result afterwards."""

    run: str
    sandbox: str
    limits: Limits
    checked: int = 0
    already_recorded: int = 0
    passed: int = 0
    failed: int = 0
    no_answer: int = 0  # (task, model) whose answer is missing or failed to generate
    totals: dict[str, tuple[int, int]] = field(default_factory=dict)  # check -> (passed, of)
    failures: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # checks that could not run; not recorded


def tests_sha(task: Task) -> str:
    """The hash of a task's tests, so edited tests make old `tests` results stale."""
    return hashlib.sha256((task.tests or "").encode()).hexdigest()[:16]


def load_check_results(log: EvidenceLog) -> dict[CheckKey, Record]:
    """The latest `checks` record per (task_id, model, check), current or not."""
    return {
        (str(r["task_id"]), str(r["model"]), str(r["check"])): r
        for r in log.latest("checks").values()
    }


def _is_current(record: Record | None, item: CheckItem, sandbox: str) -> bool:
    if record is None or record.get("answer_sha") != item.sha:
        return False
    if item.check != "tests":
        return True
    if record.get("tests_sha") != tests_sha(item.task):
        return False
    if record.get("verdict_by") != VERDICT_BY:
        return False  # decided inside the answer's own process, where a pass could be forged
    return not (sandbox == "bwrap" and record.get("sandbox") == "none")


def _items(spec: RunSpec, log: EvidenceLog) -> tuple[list[CheckItem], int]:
    """Every check the run's current answers owe, and how many answers are missing."""
    judged = spec.suite.judged_tasks()  # a conversation's turns each with their tests
    if not any(task.checks for task in judged):  # (no answer then need be read)
        return [], 0
    answers = current_answers(log, spec.suite, spec.settings)
    items: list[CheckItem] = []
    missing = 0
    for task in judged:
        if not task.checks:
            continue
        for model in spec.models:
            record = answers.get((task.id, model))
            if record is None or record.get("error") is not None or record.get("text") is None:
                missing += 1
                continue
            text = str(record["text"])
            for check in task.checks:
                items.append(CheckItem(task, model, check, text, answer_sha(text)))
    return items, missing


def missing_checks(spec: RunSpec, sandbox: str = "bwrap") -> int:
    """How many checks the run still owes (missing or stale results); `konkord build` asks."""
    log = EvidenceLog(spec.run_dir)
    items, _ = _items(spec, log)
    results = load_check_results(log)
    return sum(not _is_current(results.get(i.key), i, sandbox) for i in items)


def current_check_results(spec: RunSpec) -> dict[CheckKey, Record]:
    """The check results made on the answers the run holds now, by (task_id, model, check)."""
    log = EvidenceLog(spec.run_dir)
    items, _ = _items(spec, log)
    results = load_check_results(log)
    return {
        i.key: results[i.key] for i in items if _is_current(results.get(i.key), i, "none")
    }


def passes_tests(spec: RunSpec) -> dict[tuple[str, str], bool]:
    """Whether each current answer passed its task's tests, by (task_id, model).

    The input `konkord.stats.objective.objective_block` needs; answers without a current
    `tests` result are absent."""
    return {
        (task_id, model): bool(record["passed"])
        for (task_id, model, check), record in current_check_results(spec).items()
        if check == "tests"
    }


def _record(item: CheckItem, result: CheckResult, language: str | None,
            limits: Limits) -> Record:
    record: dict[str, Any] = {
        "kind": "check",
        "task_id": item.task.id,
        "model": item.model,
        "answer_sha": item.sha,
        "code_source": extract_code(item.text, language).source,
        **result.to_record(),
        "created_at": now_iso(),
    }
    if item.check == "tests":
        record["tests_sha"] = tests_sha(item.task)
        record["verdict_by"] = VERDICT_BY
        record["limits"] = {
            "wall_s": limits.wall_s,
            "cpu_s": limits.cpu_s,
            "memory_mb": limits.memory_mb,
            "processes": limits.processes,
            "output_bytes": limits.output_bytes,
            "disk_mb": limits.disk_mb,
        }
    return record


def check_run(
    spec: RunSpec,
    concurrency: int = 2,
    sandbox: str = "bwrap",
    on_progress: ProgressCallback | None = None,
    limits: Limits | None = None,
) -> CheckSummary:
    """Run every declared check on every current answer that lacks a current result.

    Refuses before running anything when `tests` are owed and the sandbox cannot run, or a
    static check's tool is missing. One answer's failure, of any kind, never stops the run."""
    limits = limits or Limits()
    log = EvidenceLog(spec.run_dir)
    items, missing = _items(spec, log)
    summary = CheckSummary(spec.name, sandbox, limits, no_answer=missing)
    results = load_check_results(log)
    todo = [i for i in items if not _is_current(results.get(i.key), i, sandbox)]
    summary.already_recorded = len(items) - len(todo)
    owed = {i.check for i in todo}
    if "tests" in owed:
        require_sandbox(sandbox)
    for check in sorted(owed & {"ruff_clean", "mypy_clean"}):
        require_tool(check)
    language = spec.suite.answer_language
    done = summary.already_recorded
    if on_progress:
        on_progress(done, len(items))

    def check_one(item: CheckItem) -> CheckResult:
        return run_check(item.check, item.task, item.text, language, limits, sandbox)

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        futures = {pool.submit(check_one, item): item for item in todo}
        for future in as_completed(futures):
            item = futures[future]
            try:
                result = future.result()
            except (OSError, subprocess.SubprocessError) as exc:
                # The checker, not the answer, failed (a tool vanished, no memory to fork):
                # nothing is recorded, so the next run tries again.
                summary.errors.append(f"{item.task.id} / {item.model} / {item.check}: {exc}")
                done += 1
                if on_progress:
                    on_progress(done, len(items))
                continue
            log.append("checks", _record(item, result, language, limits))
            summary.checked += 1
            if result.passed:
                summary.passed += 1
            else:
                summary.failed += 1
                summary.failures.append(f"{item.task.id} / {item.model} / {item.check}: "
                                        f"{result.reason}")
            done += 1
            if on_progress:
                on_progress(done, len(items))
    summary.totals = _totals(load_check_results(log), items, sandbox)
    return summary


def _totals(results: dict[CheckKey, Record], items: list[CheckItem],
            sandbox: str) -> dict[str, tuple[int, int]]:
    counts: dict[str, list[int]] = {}
    for item in items:
        record = results.get(item.key)
        if _is_current(record, item, sandbox) and record is not None:
            tally = counts.setdefault(item.check, [0, 0])
            tally[0] += bool(record.get("passed"))
            tally[1] += 1
    return {check: (passed, total) for check, (passed, total) in sorted(counts.items())}


def check_pass_rates(
    spec: RunSpec, resamples: int = 2000, seed: int = 0
) -> dict[str, tuple[PassRate, ...]]:
    """Per-model pass rates of every declared check, with task-bootstrap intervals (report)."""
    results = current_check_results(spec)
    model_index = {model: m for m, model in enumerate(spec.models)}
    units = spec.suite.judged_tasks()  # a conversation's turns are checked one by one
    declared = sorted({check for task in units for check in task.checks})
    out: dict[str, tuple[PassRate, ...]] = {}
    for check in declared:
        tasks = [t for t in units if check in t.checks]
        rows = {task.id: r for r, task in enumerate(tasks)}
        outcome = np.full((len(tasks), len(spec.models)), np.nan)
        for (task_id, model, name), record in results.items():
            if name == check and task_id in rows and model in model_index:
                outcome[rows[task_id], model_index[model]] = float(bool(record["passed"]))
        index = task_clusters([task.id for task in tasks])  # a conversation's turns together
        clusters = [index[task.id] for task in tasks]
        out[check] = pass_rates(
            outcome, spec.models, check, resamples=resamples, seed=seed, clusters=clusters
        )
    return out
