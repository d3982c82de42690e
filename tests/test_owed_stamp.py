"""A run found to owe nothing is stamped with its inputs (`konkord.stages.owed_stamp`): the
build after `konkord judge` takes the stamp instead of composing and hashing every call
again, and any change to the run's evidence, suite or settings sends it back to the check."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_build_pipeline import SIM_RUN, build, write_project

import konkord.stages.pipeline as pipeline
from konkord.cli import cli
from konkord.configuration.runspec import resolve_run
from konkord.stages.owed_stamp import STAMP_DIR, owes_nothing


def _refuse_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make the full check fail loudly, and count its calls."""
    calls: list[str] = []

    def refused(spec: object) -> tuple[int, dict[str, int]]:
        calls.append("checked")
        raise AssertionError("the run was checked in full")

    monkeypatch.setattr(pipeline, "owed_work", refused)
    return calls


def _judged(project: Path) -> None:
    """The run answered and judged by the commands a person types."""
    write_project(project, [{k: v for k, v in SIM_RUN.items() if k != "label_plan"}])
    for command in (["run", "--run", "sim-run"], ["judge", "--run", "sim-run"]):
        outcome = CliRunner().invoke(cli, command)
        assert outcome.exit_code == 0, outcome.output


def test_the_judge_stamps_a_run_it_completed_and_the_build_takes_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _judged(project)
    assert owes_nothing(resolve_run("sim-run"))
    assert len(list((project / STAMP_DIR).glob("*.json"))) == 1
    calls = _refuse_checks(monkeypatch)
    code, output = build("--offline")
    assert code == 0, output
    assert calls == []
    assert (project / "public" / "sim-run" / "index.html").exists()


def test_a_verdict_taken_away_sends_the_build_back_to_the_check(project: Path) -> None:
    _judged(project)
    verdicts = project / "runs" / "sim-run" / "verdicts.jsonl"
    lines = verdicts.read_text().splitlines(keepends=True)
    verdicts.write_text("".join(lines[:-1]))
    assert not owes_nothing(resolve_run("sim-run"))
    code, output = build("--offline")
    assert code == 2
    assert "1 verdicts of sim-judge/fair missing" in output


def test_a_failure_recorded_later_voids_the_stamp(project: Path) -> None:
    """A failure appended after the verdict supersedes it: the call is owed again."""
    _judged(project)
    verdicts = project / "runs" / "sim-run" / "verdicts.jsonl"
    record = json.loads(verdicts.read_text().splitlines()[0])
    failure = {**record, "kind": "failure", "winner": None, "error": "timeout"}
    with verdicts.open("a") as handle:
        handle.write(json.dumps(failure) + "\n")
    assert not owes_nothing(resolve_run("sim-run"))
    code, output = build("--offline")
    assert code == 2
    assert "1 verdicts of sim-judge/fair missing" in output


@pytest.mark.parametrize("change", ["suite", "settings", "code"])
def test_a_changed_suite_settings_or_code_voids_the_stamp(
    project: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    _judged(project)
    assert owes_nothing(resolve_run("sim-run"))
    if change == "suite":
        suite = project / "suites" / "tiny.yaml"
        suite.write_text(suite.read_text().replace("What is 1 plus 1?", "What is 1 plus 2?"))
    elif change == "settings":
        runs = json.loads((project / "runs.json").read_text())
        runs["runs"][0]["style_control"] = False
        (project / "runs.json").write_text(json.dumps(runs))
    else:
        import konkord.results.buildstamp as buildstamp

        signature = buildstamp._code_signature
        monkeypatch.setattr(buildstamp, "_code_signature", lambda: signature() + "\nnew")
    assert not owes_nothing(resolve_run("sim-run"))


def test_a_build_stamps_what_it_found_complete(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build that checked in full and found nothing owed stamps the run; the next build,
    its own stamps gone (a template edit, a new site folder), does not check it again."""
    _judged(project)
    shutil.rmtree(project / STAMP_DIR)
    code, output = build("--offline")
    assert code == 0, output
    assert owes_nothing(resolve_run("sim-run"))
    shutil.rmtree(project / ".konkord" / "build")
    shutil.rmtree(project / "public")
    calls = _refuse_checks(monkeypatch)
    code, output = build("--offline")
    assert code == 0, output
    assert calls == []
