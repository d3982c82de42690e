"""`konkord build` runs what is missing, like make, and calls no model when it must not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from fresh_imports import run_fresh

from konkord.cli import cli

SUITE = {
    "name": "tiny",
    "rubric": "Prefer the answer that is correct and complete.",
    "tasks": [{"id": f"t{k}", "prompt": f"What is {k} plus {k}?"} for k in range(3)],
}
SIM_RUN = {
    "name": "sim-run",
    "suite": "suites/tiny.yaml",
    "models": ["sim/a:strength=2", "sim/b:strength=0", "sim/c:strength=-2"],
    "judges": ["sim-judge/fair"],
    "label_plan": {"n": 5, "seed": 0, "simulated_labellers": [{"name": "sim-l", "accuracy": 0.9}]},
}


REPO = Path(__file__).resolve().parent.parent


def write_project(root: Path, runs: list[dict[str, object]]) -> None:
    for folder in ("templates", "content"):
        (root / folder).symlink_to(REPO / folder)
    (root / "suites").mkdir(exist_ok=True)
    (root / "suites" / "tiny.yaml").write_text(yaml.safe_dump(SUITE, sort_keys=False))
    (root / "runs.json").write_text(json.dumps({"runs": runs}))


def build(*args: str) -> tuple[int, str]:
    outcome = CliRunner().invoke(cli, ["build", *args])
    return outcome.exit_code, outcome.output


def test_build_runs_every_missing_stage_then_nothing(project: Path) -> None:
    write_project(project, [SIM_RUN])
    code, output = build()
    assert code == 0, output
    run_dir = project / "runs" / "sim-run"
    answers = (run_dir / "answers.jsonl").read_text().splitlines()
    verdicts = (run_dir / "verdicts.jsonl").read_text().splitlines()
    labels = (run_dir / "labels.jsonl").read_text().splitlines()
    assert len(answers) == 3 * 3
    assert len(verdicts) == 3 * 3 * 2  # 3 tasks x 3 pairs x 2 orders
    assert len(labels) == 5
    results = json.loads((project / "results" / "sim-run.json").read_text())
    assert results["judge_blocks"][0]["calibration"]["status"] == "calibrated"
    assert (project / "public" / "sim-run" / "index.html").exists()
    before = {p: p.read_bytes() for p in (project / "runs").rglob("*.jsonl")}
    results_before = (project / "results" / "sim-run.json").read_bytes()
    code, output = build()
    assert code == 0, output
    assert {p: p.read_bytes() for p in (project / "runs").rglob("*.jsonl")} == before
    assert (project / "results" / "sim-run.json").read_bytes() == results_before
    assert "0 files written" in output


def test_new_evidence_makes_the_results_file_stale(project: Path) -> None:
    write_project(project, [SIM_RUN])
    assert build()[0] == 0
    before = json.loads((project / "results" / "sim-run.json").read_text())
    labels = project / "runs" / "sim-run" / "labels.jsonl"
    record = json.loads(labels.read_text().splitlines()[0])
    # A person changes their mind: the newer record supersedes, so the calibration must change.
    record["winner"] = "tie" if record["winner"] != "tie" else record["model_a"]
    with labels.open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    code, output = build()
    assert code == 0, output
    assert "computing results/sim-run.json" in output
    after = json.loads((project / "results" / "sim-run.json").read_text())
    assert after["inputs_digest"] != before["inputs_digest"]
    confusion = after["judge_blocks"][0]["calibration"]["confusion"]["matrix"]
    assert confusion != before["judge_blocks"][0]["calibration"]["confusion"]["matrix"]
    assert after["judge_blocks"][0]["calibration"]["labels"] == 5


def test_offline_build_calls_nothing_and_names_what_is_missing(project: Path) -> None:
    write_project(project, [SIM_RUN])
    code, output = build("--offline")
    assert code == 2
    assert "offline, no model called: run sim-run: results/sim-run.json is missing" in output
    assert "answers 0 of 9 present" in output
    assert 'results/sim-run.json: missing, but runs.json lists run "sim-run"' in output
    assert not (project / "runs" / "sim-run" / "answers.jsonl").exists()


def test_a_real_model_without_credentials_names_the_variable(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    run = {**SIM_RUN, "models": ["gpt-4o-mini", "sim/b"], "judges": ["sim-judge/fair"]}
    write_project(project, [run])
    code, output = build()
    assert code == 2
    assert "run sim-run: answers: 6 missing" in output
    assert "OPENAI_API_KEY" in output
    assert not (project / "runs" / "sim-run" / "answers.jsonl").exists()


def test_labels_added_after_the_report_with_their_time_set_back_still_show(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hostile edit the head start cannot see: a label appended after the report, its log's
    modification time set back before the results file's. The task pages start rendering
    from the old results file; the check finds the file stale and makes it again, and the
    site must be the one the new file makes, byte for byte (a fresh one-process build of the
    same evidence). Would catch pages of the stale file kept or left behind."""
    import os
    import shutil

    import konkord.site.parallel as parallel
    import konkord.stages.build.build as build_module

    write_project(project, [SIM_RUN])
    monkeypatch.setenv("KONKORD_BUILD_WORKERS", "1")
    assert build()[0] == 0
    results = project / "results" / "sim-run.json"
    labels = project / "runs" / "sim-run" / "labels.jsonl"
    record = json.loads(labels.read_text().splitlines()[0])
    record["winner"] = "tie" if record["winner"] != "tie" else record["model_a"]
    with labels.open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    shutil.rmtree(project / "public")  # every page to render: the head start has work
    for path in project.rglob("*"):  # everything older than the results file again
        if path.is_file() and path != results and not path.is_symlink():
            early = results.stat().st_mtime_ns - 10**9
            os.utime(path, ns=(early, early))
    monkeypatch.setenv("KONKORD_BUILD_WORKERS", "2")
    monkeypatch.setattr(parallel, "PARALLEL_MIN_TASKS", 1)
    monkeypatch.setattr(parallel, "SPLIT_MIN_TASKS", 1)
    started: list[object] = []

    def spy(*args: object) -> object:
        found = parallel.render_ahead(*args)  # type: ignore[arg-type]
        started.append(found)
        return found

    monkeypatch.setattr(build_module, "render_ahead", spy)
    code, output = build()
    assert code == 0, output
    assert started and started[0] is not None, "the head start rendered the stale file"
    assert "computing results/sim-run.json" in output

    def site() -> dict[str, bytes]:
        public = project / "public"
        return {p.relative_to(public).as_posix(): p.read_bytes() for p in public.rglob("*") if p.is_file()}

    hostile = site()
    shutil.rmtree(project / "public")
    shutil.rmtree(project / ".konkord" / "build", ignore_errors=True)
    monkeypatch.setenv("KONKORD_BUILD_WORKERS", "1")
    code, output = build()
    assert code == 0, output
    assert site() == hostile


def test_checking_a_complete_run_imports_no_statistics(project: Path) -> None:
    """A build of runs whose results are current asks what each run owes (answers, every
    judge call) and renders: nothing of it needs the statistics, whose import (scipy with
    them, then) cost about 0.6 s of every such build. They load only where a report is
    computed, and scipy not even then (`konkord.stats.special`)."""
    write_project(project, [SIM_RUN])
    code, output = build()
    assert code == 0, output
    check = (
        "from konkord.configuration.runspec import resolve_run\n"
        "from konkord.stages.pipeline import ensure_run\n"
        "assert ensure_run(resolve_run('sim-run'), True, print) == []\n"
    )
    heavy = ("scipy", "konkord.stats")
    assert run_fresh(project, check, heavy)[1] == []
    (project / "results" / "sim-run.json").unlink()  # now a report is owed: they load
    assert run_fresh(project, check, heavy)[1] == ["konkord.stats"]
