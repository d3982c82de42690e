"""`konkord report` with nothing changed prints the file it has instead of recomputing it."""

from __future__ import annotations

import builtins
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from evidence_factory import add_answers, add_verdict, write_runs, write_suite
from fresh_imports import run_fresh

from konkord.cli import cli
from konkord.configuration.runspec import resolve_run
from konkord.results import files
from konkord.results.schema import TaskView
from konkord.stages.report.freshness import (
    ReportOptions,
    inputs_digest,
    results_current,
    stored_digest,
)


def _run(root: Path) -> dict[tuple[str, str], str]:
    models = ["m/a", "m/b"]
    suite = write_suite(root, 6)
    write_runs(root, [{"name": "r", "suite": "suites/tiny.yaml", "models": models}])
    texts = add_answers(root, "r", suite, models)
    for k in range(6):
        add_verdict(root, "r", texts, f"t{k:02d}", "m/a", "m/b", ("1", "2"))
    return texts


def _report(*extra: str) -> str:
    outcome = CliRunner().invoke(cli, ["report", "--run", "r", "--resamples", "50", *extra])
    assert outcome.exit_code == 0, outcome.output
    return outcome.output


def test_stored_digest_is_the_one_written_and_none_without_a_file(project: Path) -> None:
    _run(project)
    _report()
    path = project / "results" / "r.json"
    digest = json.loads(path.read_text())["inputs_digest"]
    assert stored_digest(path) == digest
    assert digest == inputs_digest(resolve_run("r"), ReportOptions(resamples=50))
    assert stored_digest(project / "results" / "none.json") is None
    (project / "results" / "bad.json").write_text("{not json")
    assert stored_digest(project / "results" / "bad.json") is None


def test_an_unchanged_run_is_printed_not_recomputed(project: Path) -> None:
    _run(project)
    first = _report()
    path = project / "results" / "r.json"
    written = path.read_bytes()
    path.touch()
    stamp = path.stat().st_mtime_ns
    second = _report()
    assert "is up to date with the evidence; nothing recomputed" in second
    assert path.stat().st_mtime_ns == stamp and path.read_bytes() == written
    # The same table as the run that computed it.
    assert first.splitlines()[:-1] == second.splitlines()[:-1]


def test_new_evidence_or_other_options_recompute(project: Path) -> None:
    texts = _run(project)
    _report()
    spec = resolve_run("r")
    assert results_current(spec, ReportOptions(resamples=50))
    assert not results_current(spec, ReportOptions(resamples=50, seed=1))
    assert "wrote results/r.json" in _report("--seed", "1")
    add_verdict(project, "r", texts, "t00", "m/b", "m/a", ("2", "1"))
    assert not results_current(spec, ReportOptions(resamples=50, seed=1))
    assert "wrote results/r.json" in _report("--seed", "1")


def test_a_results_file_that_does_not_read_is_recomputed(project: Path) -> None:
    _run(project)
    _report()
    path = project / "results" / "r.json"
    data = json.loads(path.read_text())
    data["models"] = "not a list"  # the digest still matches; the file no longer validates
    path.write_text(json.dumps(data, indent=1))
    assert "wrote results/r.json" in _report()
    assert isinstance(json.loads(path.read_text())["models"], list)


def test_checking_freshness_imports_no_statistics(project: Path) -> None:
    _run(project)
    _report()
    code = (
        "from konkord.configuration.runspec import resolve_run\n"
        "from konkord.stages.report.freshness import ReportOptions, results_current\n"
        "assert results_current(resolve_run('r'), ReportOptions(resamples=50))\n"
    )
    assert run_fresh(project, code, ("numpy", "scipy", "litellm"))[1] == []


def test_an_unchanged_run_prints_without_parsing_its_task_files(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 20 models x 1,000 tasks, parsing the task files took 9 s of the 10 the printing did;
    they are only checked against their hash (a changed one is still caught)."""
    monkeypatch.setattr(files, "INLINE_TASKS_MAX", 0)  # the tasks in files of their own
    _run(project)
    first = _report()
    folder = project / "results" / "r.tasks"
    assert sorted(folder.glob("*.json")), "the tasks are in files of their own"

    def parsed(*args: object, **kwargs: object) -> None:
        raise AssertionError("a task file was parsed")

    with monkeypatch.context() as patch:
        patch.setattr(TaskView, "model_validate_json", parsed)
        second = _report()
    assert "is up to date with the evidence; nothing recomputed" in second
    assert first.splitlines()[:-1] == second.splitlines()[:-1]
    shutil.rmtree(project / ".konkord")
    task = sorted(folder.glob("*.json"))[0]
    task.write_bytes(task.read_bytes().replace(b'"', b"'", 1))  # changed since
    assert "wrote results/r.json" in _report()


def test_a_stale_results_file_costs_no_second_read_of_the_evidence(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stale results file made the report hash its inputs three times: for the replay
    stamp's fingerprint, to find the file stale, and for the new file's digest (0.2 s each
    at a 300 MB verdict log). Now each stream is read once to hash it, as when there is no
    results file at all, and the new results are the same bytes."""
    texts = _run(project)
    log = (project / "runs" / "r" / "verdicts.jsonl").resolve()
    reads: list[str] = []
    real_open = io.open

    def counted(file: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        if isinstance(file, (str, os.PathLike)) and Path(file).resolve() == log:
            reads.append(mode)
        return real_open(file, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(builtins, "open", counted)
    monkeypatch.setattr(io, "open", counted)  # (what Path.open calls)
    assert "wrote results/r.json" in _report()  # no results file yet
    with_none = len(reads)
    add_verdict(project, "r", texts, "t00", "m/b", "m/a", ("2", "1"))
    reads.clear()
    assert "wrote results/r.json" in _report()  # over a stale one
    assert len(reads) == with_none
    path = project / "results" / "r.json"
    stale_then = path.read_bytes()
    assert json.loads(stale_then)["inputs_digest"] == inputs_digest(
        resolve_run("r"), ReportOptions(resamples=50)
    )
    path.unlink()
    assert "wrote results/r.json" in _report()
    assert path.read_bytes() == stale_then
