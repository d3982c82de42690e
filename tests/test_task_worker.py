"""A large report's task files made in a worker process (konkord/stages/report/task_worker.py)
are the bytes the thread makes; a worker that fails or dies fails the report with the previous
results left as they were; Ctrl-C and a killed report leave no worker behind."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from processes import all_gone
from test_report_background import snapshot
from test_report_tasks import DEMOS, odd_run

from konkord.configuration.runspec import resolve_run
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog
from konkord.results import files as results_files
from konkord.results.schema import read_results
from konkord.stages.report import report as report_module
from konkord.stages.report import task_spawn, task_worker
from konkord.stages.report.report import ReportOptions, write_report
from konkord.stages.report.task_source import TaskSource, answer_features, tasks_of

FAST = ReportOptions(resamples=20, seed=1)


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every report makes its tasks in a worker; the task makers started, in order."""
    monkeypatch.setattr(task_worker, "PROCESS_MIN_COMPARISONS", 0)
    monkeypatch.setattr(task_worker, "core_free", lambda: True)
    makers: list[Any] = []
    for name in ("TasksInProcess", "TasksInBackground"):
        real = getattr(report_module, name)

        def spied(*args: Any, real: Any = real) -> Any:
            makers.append(real(*args))
            return makers[-1]

        monkeypatch.setattr(report_module, name, spied)
    return makers


def report_files(project: Path) -> dict[str, bytes]:
    write_report(resolve_run("r"), project / "results" / "r.json", FAST)
    return snapshot(project / "results")


@pytest.mark.parametrize("inline", [0, 10**9], ids=["task files", "inline"])
def test_the_worker_writes_the_bytes_the_thread_writes(
    project: Path, monkeypatch: pytest.MonkeyPatch, started: list[Any], inline: int
) -> None:
    odd_run(project)
    monkeypatch.setattr(results_files, "INLINE_TASKS_MAX", inline)
    by_worker = report_files(project)
    assert [type(m).__name__ for m in started] == ["TasksInProcess"]
    monkeypatch.setattr(task_worker, "PROCESS_MIN_COMPARISONS", 10**9)
    by_thread = report_files(project)
    assert [type(m).__name__ for m in started] == ["TasksInProcess", "TasksInBackground"]
    assert by_worker == by_thread
    assert len(by_worker) == (5 if inline == 0 else 1)  # r.json, the folder and 3 task files
    assert [t.id for t in read_results(project / "results" / "r.json").tasks] == [
        "t00", "t01", "t02",
    ]  # fmt: skip


def results_then_new_evidence(project: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """The odd run reported (its files returned), then a label added: the next report is due."""
    odd_run(project)
    monkeypatch.setattr(results_files, "INLINE_TASKS_MAX", 0)
    before = report_files(project)
    EvidenceLog(project / "runs" / "r").append(
        "labels",
        {"task_id": "t00", "model_a": "m/b", "model_b": "m/c", "labeller": "cy",
         "winner": "m/c", "created_at": "2026-01-03T03:04:05+00:00"},
    )  # fmt: skip
    return before


@pytest.mark.parametrize("run", DEMOS)
def test_a_demo_runs_source_sent_in_a_pickle_makes_the_same_tasks(
    run: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The committed demos (conversations, code checks, labels, a cascade's judges): what the
    worker is sent makes, after the pickle, the tasks this process makes."""
    monkeypatch.chdir(REPO)  # read only: report_parts writes nothing
    sources: list[TaskSource | None] = []

    def ready(tasks: object, source: TaskSource | None) -> None:
        sources.append(source)

    report_module.report_parts(resolve_run(run), FAST, ready)
    (source,) = sources
    if source is None:  # a cascade marks its comparisons here: never sent
        assert resolve_run(run).cascade is not None
        return
    sent = pickle.loads(pickle.dumps(source, protocol=pickle.HIGHEST_PROTOCOL))
    assert [t.json() for t in tasks_of(sent)] == [t.json() for t in tasks_of(source)]


def test_a_worker_that_dies_fails_the_report_and_the_previous_results_stand(
    project: Path, monkeypatch: pytest.MonkeyPatch, started: list[Any]
) -> None:
    before = results_then_new_evidence(project, monkeypatch)
    real = task_worker.TasksInProcess.__init__

    def killed(self: task_worker.TasksInProcess, *args: Any) -> None:
        real(self, *args)
        self._worker.kill()  # as the out-of-memory killer would

    monkeypatch.setattr(task_worker.TasksInProcess, "__init__", killed)
    with pytest.raises(KonkordError, match=r"task-file worker \(pid \d+\) ended with exit status"):
        report_files(project)
    assert snapshot(project / "results") == before  # no staging folder left, nothing changed


def test_a_worker_that_cannot_start_leaves_the_tasks_to_a_thread(
    project: Path, monkeypatch: pytest.MonkeyPatch, started: list[Any]
) -> None:
    odd_run(project)
    monkeypatch.setattr(results_files, "INLINE_TASKS_MAX", 0)
    expected = report_files(project)  # by the worker

    def no_process(*args: object, **kwargs: object) -> None:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(task_spawn.subprocess, "Popen", no_process)
    assert report_files(project) == expected
    assert [type(m).__name__ for m in started] == ["TasksInProcess", "TasksInBackground"]


def test_an_error_in_the_worker_is_raised_here(
    project: Path, monkeypatch: pytest.MonkeyPatch, started: list[Any]
) -> None:
    """A task folder the worker cannot write into: its OSError, raised by the report."""
    odd_run(project)
    monkeypatch.setattr(results_files, "INLINE_TASKS_MAX", 0)
    real = results_files.temporary_name

    def taken(folder: Path) -> Path:
        staging: Path = real(folder)
        staging.write_text("a file where the staging folder goes")
        return staging

    monkeypatch.setattr(results_files, "temporary_name", taken)
    results = project / "results"
    with pytest.raises(OSError):
        write_report(resolve_run("r"), results / "r.json", FAST)
    assert not (results / "r.json").exists()


def test_ctrl_c_stops_the_worker_and_removes_its_staging_folder(
    project: Path, monkeypatch: pytest.MonkeyPatch, started: list[Any]
) -> None:
    odd_run(project)
    monkeypatch.setattr(results_files, "INLINE_TASKS_MAX", 0)

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(report_module, "style_block", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_report(resolve_run("r"), project / "results" / "r.json", FAST)
    (maker,) = started
    assert maker._worker.poll() is not None  # stopped and waited for
    assert list((project / "results").iterdir()) == []


KILLED_REPORT = """
import os, signal, sys
from konkord.stages.report import task_spawn, task_worker
from konkord.stages.report.report import ReportOptions, write_report
from konkord.configuration.runspec import resolve_run
task_worker.PROCESS_MIN_COMPARISONS = 0
task_worker.core_free = lambda: True
real = task_worker.TasksInProcess.__init__
def started(self, *args):
    real(self, *args)
    print(self._worker.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # killed while the worker is at work
task_worker.TasksInProcess.__init__ = started
write_report(resolve_run("r"), resolve_run("r").results_path, ReportOptions(resamples=20))
"""


def test_a_killed_report_leaves_no_worker_behind(project: Path) -> None:
    odd_run(project)
    done = subprocess.run(
        [sys.executable, "-c", KILLED_REPORT], cwd=project, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120,
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr
    worker = int(done.stdout.split()[0])
    assert all_gone([worker], 10), "the task-file worker outlived its report"


def _start_early(project: Path, monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen[bytes]]:
    """A worker started early for run r, as `konkord report` of a large log starts one (for
    a log of any size); the processes started from here on."""
    spawned: list[subprocess.Popen[bytes]] = []
    real = task_spawn.subprocess.Popen

    def spied(*args: Any, **kwargs: Any) -> Any:
        spawned.append(real(*args, **kwargs))
        return spawned[-1]

    monkeypatch.setattr(task_spawn.subprocess, "Popen", spied)
    monkeypatch.setattr(task_spawn, "core_free", lambda: True)
    monkeypatch.setattr(task_spawn, "EARLY_LOG_BYTES", 0)
    task_spawn.start_early(EvidenceLog(project / "runs" / "r").path("verdicts").stat().st_size)
    assert len(spawned) == 1 and task_spawn.waiting()
    return spawned


def test_a_worker_started_early_is_the_one_the_report_uses_and_an_unused_one_is_stopped(
    project: Path, monkeypatch: pytest.MonkeyPatch, started: list[Any]
) -> None:
    """`konkord report` of a large log starts the worker before importing the statistics
    (`task_spawn.start_early`): the report then sends its tasks to that worker, not another,
    and writes the same files; a worker no report takes up is stopped."""
    odd_run(project)
    monkeypatch.setattr(results_files, "INLINE_TASKS_MAX", 0)
    expected = report_files(project)  # by a worker started when the tasks were ready
    spawned = _start_early(project, monkeypatch)
    assert len(task_spawn.EARLY) == 1
    assert report_files(project) == expected
    assert len(spawned) == 1 and task_spawn.EARLY == []  # taken up, none other started
    assert spawned[0].wait(timeout=30) == 0
    task_spawn.start_early(1)
    unused = spawned[-1]
    assert len(spawned) == 2 and unused.poll() is None
    task_spawn.stop_early()  # what runs at exit
    assert unused.poll() is not None and task_spawn.EARLY == []
    monkeypatch.setattr(task_spawn, "EARLY_LOG_BYTES", 10)
    task_spawn.start_early(5)  # a small log: no worker
    assert len(spawned) == 2


def test_a_worker_started_early_counts_the_style_features_the_report_uses(
    project: Path, monkeypatch: pytest.MonkeyPatch, started: list[Any]
) -> None:
    """The answers go to the early worker as soon as they are read; the features it counts
    are the ones the report would count (the report does not count them itself), and the
    files are the bytes a thread makes."""
    odd_run(project)
    monkeypatch.setattr(results_files, "INLINE_TASKS_MAX", 0)
    expected = report_files(project)  # features counted here, tasks by a worker
    answers = report_module.good_answers(resolve_run("r"), EvidenceLog(project / "runs" / "r"))
    spawned = _start_early(project, monkeypatch)
    early = task_worker.EarlyAnswers(answers, True)
    counted = early.features()
    early.stop()
    assert counted == answer_features(answers) and len(counted) == 8
    assert early.worker is spawned[0] and early.worker.poll() is not None

    def not_here(answers: object) -> object:
        raise AssertionError("the report counted the features the worker had counted")

    _start_early(project, monkeypatch)
    monkeypatch.setattr(report_module, "answer_features", not_here)
    assert report_files(project) == expected
    assert task_spawn.EARLY == [] and [type(m).__name__ for m in started][-1] == "TasksInProcess"


def test_an_early_worker_that_dies_with_the_answers_fails_the_report_as_before(
    project: Path, monkeypatch: pytest.MonkeyPatch, started: list[Any]
) -> None:
    """Killed once it has the answers: the report counts the features itself, then fails
    with the worker's exit status when the tasks are due; the previous results stand."""
    before = results_then_new_evidence(project, monkeypatch)
    real = task_worker.EarlyAnswers.__init__

    def killed(self: task_worker.EarlyAnswers, *args: Any) -> None:
        real(self, *args)
        self.sending.join()
        self.worker.kill()

    monkeypatch.setattr(task_worker.EarlyAnswers, "__init__", killed)
    spawned = _start_early(project, monkeypatch)
    with pytest.raises(KonkordError, match=r"task-file worker \(pid \d+\) ended with exit status"):
        report_files(project)
    assert snapshot(project / "results") == before
    assert spawned[0].poll() is not None and task_spawn.EARLY == []


def test_a_cascades_answers_are_not_sent_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cascade marks its comparisons on the tasks in this process: its answers are not
    handed on when read (a worker started early for it is stopped at exit, as any unused)."""
    monkeypatch.chdir(REPO)  # read only: report_parts writes nothing
    cascade = next(run for run in DEMOS if resolve_run(run).cascade is not None)
    handed: list[Any] = []
    made: list[Any] = []

    def ready(tasks: object, source: TaskSource | None) -> None:
        made.append(source)

    report_module.report_parts(
        resolve_run(cascade), FAST, ready, None, lambda answers, count: handed.append(answers)
    )
    assert made == [None] and handed == []
    plain = next(run for run in DEMOS if resolve_run(run).cascade is None)
    report_module.report_parts(
        resolve_run(plain), FAST, ready, None, lambda answers, count: handed.append(answers)
    )
    assert made[1] is not None and len(handed) == 1 and handed[0] == made[1].answers


def test_ctrl_c_after_the_answers_were_sent_stops_the_early_worker(
    project: Path, monkeypatch: pytest.MonkeyPatch, started: list[Any]
) -> None:
    odd_run(project)

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(report_module, "decisions_of", interrupted)
    (worker,) = _start_early(project, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        write_report(resolve_run("r"), project / "results" / "r.json", FAST)
    assert task_spawn.EARLY == [] and worker.poll() is not None  # taken, then stopped
    assert started == [] and not (project / "results").exists()
