"""A report writes its task files on a thread of their own while its figures are computed,
into a staging folder moved in only with the results file: a report whose figures fail, or
that is interrupted, leaves the previous results and task files byte for byte, with no
staging folder; one killed mid-way leaves a temporary folder the next report removes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_report_tasks import odd_run

from konkord.configuration.runspec import resolve_run
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog
from konkord.results import files as results_files
from konkord.results.schema import read_results
from konkord.stages.report import report as report_module
from konkord.stages.report.report import ReportOptions, write_report

FAST = ReportOptions(resamples=20, seed=1)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>"
        for p in sorted(folder.rglob("*"))
    }


@pytest.fixture
def reported(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The odd run reported once, each task in a file of its own."""
    odd_run(project)
    monkeypatch.setattr(results_files, "INLINE_TASKS_MAX", 0)
    write_report(resolve_run("r"), project / "results" / "r.json", FAST)
    assert len(list((project / "results" / "r.tasks").glob("*.json"))) == 3
    return project / "results"


def _label_t00(reported: Path) -> None:
    """A label that changes task t00's file, so a rewrite of the results would show."""
    EvidenceLog(reported.parent / "runs" / "r").append(
        "labels",
        {"task_id": "t00", "model_a": "m/b", "model_b": "m/c", "labeller": "cy",
         "winner": "m/c", "created_at": "2026-01-03T03:04:05+00:00"},
    )  # fmt: skip


@pytest.mark.parametrize("error", [KonkordError("no figures"), KeyboardInterrupt()])
def test_a_report_whose_figures_stop_leaves_the_previous_results_as_they_were(
    reported: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    before = snapshot(reported)
    _label_t00(reported)  # t00's task file would change
    started: list[object] = []
    real = results_files.TasksInBackground
    style_block = report_module.style_block

    def background(*args: object) -> object:
        started.append(real(*args))  # type: ignore[arg-type]
        return started[-1]

    def failing(*args: object, **kwargs: object) -> None:
        assert started  # the tasks were already being written
        started[0]._future.result()  # type: ignore[attr-defined]  # and were all made
        raise error

    monkeypatch.setattr(report_module, "TasksInBackground", background)
    monkeypatch.setattr(report_module, "style_block", failing)
    with pytest.raises(type(error)):
        write_report(resolve_run("r"), reported / "r.json", FAST)
    assert snapshot(reported) == before  # no staging folder, every file as it was
    assert read_results(reported / "r.json").tasks  # and the previous results still read
    monkeypatch.setattr(report_module, "TasksInBackground", real)
    monkeypatch.setattr(report_module, "style_block", style_block)
    write_report(resolve_run("r"), reported / "r.json", FAST)  # the label is in t00's file now
    assert snapshot(reported)["r.tasks/t00.json"] != before["r.tasks/t00.json"]


def test_the_task_files_written_in_the_background_are_the_ones_named(reported: Path) -> None:
    results = read_results(reported / "r.json")  # checks the task files' hash
    assert [task.id for task in results.tasks] == ["t00", "t01", "t02"]
    assert sorted(p.name for p in reported.iterdir()) == ["r.json", "r.tasks"]


def test_a_staging_folder_left_by_a_killed_report_is_removed_by_the_next(
    reported: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    left = reported / f".r.tasks.{int(dead.stdout)}.0123abcd.tmp"
    left.mkdir()
    (left / "t00.json").write_bytes(b"{}")
    mine = reported / f".r.tasks.{os.getpid()}.4567abcd.tmp"  # a live process's: kept
    mine.mkdir()
    monkeypatch.setattr("konkord.evidence.atomic._swept", set())
    write_report(resolve_run("r"), reported / "r.json", FAST)
    assert not left.exists() and mine.exists()
    assert read_results(reported / "r.json").tasks


def test_ctrl_c_while_the_results_wait_for_the_task_files_leaves_the_previous_results(
    reported: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(reported)
    _label_t00(reported)  # t00's task file would change
    real_result = results_files.TasksInBackground.result

    def interrupted(self: results_files.TasksInBackground) -> results_files.TasksWritten:
        real_result(self)  # every task file staged
        assert any(self.staging.iterdir())
        raise KeyboardInterrupt

    monkeypatch.setattr(results_files.TasksInBackground, "result", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_report(resolve_run("r"), reported / "r.json", FAST)
    assert snapshot(reported) == before
