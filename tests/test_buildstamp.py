"""A no-change `konkord build` replays the last build's report; any changed input rebuilds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from fresh_imports import run_fresh

from konkord.cli import cli
from konkord.results.buildstamp import STAMP_DIR

REPO = Path(__file__).resolve().parent.parent
SUITE = {
    "name": "tiny",
    "rubric": "Prefer the answer that is correct and complete.",
    "tasks": [{"id": f"t{k}", "prompt": f"What is {k} plus {k}?"} for k in range(3)],
}
RUN = {
    "name": "sim-run",
    "suite": "suites/tiny.yaml",
    "models": ["sim/a:strength=2", "sim/b:strength=0"],
    "judges": ["sim-judge/fair"],
}


def _project(root: Path) -> None:
    for folder in ("templates", "content"):
        shutil.copytree(REPO / folder, root / folder)
    (root / "suites").mkdir()
    (root / "suites" / "tiny.yaml").write_text(yaml.safe_dump(SUITE, sort_keys=False))
    (root / "runs.json").write_text(json.dumps({"runs": [RUN]}))


def _build() -> str:
    outcome = CliRunner().invoke(cli, ["build"])
    assert outcome.exit_code == 0, outcome.output
    return outcome.output


def test_an_unchanged_build_says_what_the_full_path_says_without_its_imports(
    project: Path,
) -> None:
    _project(project)
    _build()
    (stamp,) = (project / STAMP_DIR).glob("*.json")
    stamp.unlink()
    full = _build()  # nothing to do, found the long way; stamps again
    assert "0 files written" in full and stamp.is_file()
    assert _build() == full
    code = "from konkord.cli import main\nsys.argv = ['konkord', 'build']\nmain()\n"
    heavy = ("konkord.stages.build.build", "pydantic", "jinja2", "numpy", "litellm")
    printed, imported = run_fresh(project, code, heavy)
    assert printed == full.splitlines()
    assert imported == []


def test_every_kind_of_changed_input_takes_the_full_path(project: Path) -> None:
    _project(project)
    _build()
    (stamp,) = (project / STAMP_DIR).glob("*.json")

    # A template edit: its pages are rewritten.
    template = project / "templates" / "task.html"
    template.write_text(template.read_text().replace("All tasks", "Every task"))
    assert "0 files written" not in _build().splitlines()[-1]
    # New evidence: the results file is recomputed.
    verdicts = project / "runs" / "sim-run" / "verdicts.jsonl"
    record = json.loads(verdicts.read_text().splitlines()[0])
    record["winner"] = "tie"
    with verdicts.open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    assert "computing results/sim-run.json" in _build()
    # A deleted page is written again.
    page = project / "public" / "sim-run" / "index.html"
    page.unlink()
    assert "1 files written" in _build() and page.is_file()
    # A results file nobody lists: a warning every time, as a build with notes stamps nothing.
    (project / "results" / "stray.json").write_text("{}")
    for _ in range(2):
        assert "stray.json: not on the site" in _build()
        assert not stamp.exists()
    (project / "results" / "stray.json").unlink()
    _build()
    assert stamp.is_file()
    # An edited content page.
    about = project / "content" / "about.md"
    about.write_text(about.read_text() + "\nOne more sentence.\n")
    assert "0 files written" not in _build().splitlines()[-1]
    # Built for other folders: not replayed for these.
    data = json.loads(stamp.read_text())
    data["key"]["templates"] = "other-templates"
    stamp.write_text(json.dumps(data))
    page.unlink()
    assert "1 files written" in _build() and page.is_file()


def test_a_run_found_complete_is_not_checked_again_until_it_changes(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(project)
    runs = json.loads((project / "runs.json").read_text())
    runs["runs"][0]["api_base"] = "http://127.0.0.1:9/v1?deployment=hunter2-private"
    (project / "runs.json").write_text(json.dumps(runs))
    _build()
    import konkord.stages.pipeline as pipeline

    def refuse(*_args: object, **_kwargs: object) -> list[str]:
        raise AssertionError("the run's stages were checked again")

    monkeypatch.setattr(pipeline, "ensure_run", refuse)
    # A template edit rebuilds pages without parsing the unchanged run's evidence.
    template = project / "templates" / "task.html"
    template.write_text(template.read_text().replace("All tasks", "Every task"))
    assert "0 files written" not in _build().splitlines()[-1]
    # New evidence: the run is checked again.
    verdicts = project / "runs" / "sim-run" / "verdicts.jsonl"
    with verdicts.open("a") as handle:
        handle.write(verdicts.read_text().splitlines()[0] + "\n")
    outcome = CliRunner().invoke(cli, ["build"])
    assert isinstance(outcome.exception, AssertionError)
    # No part of the api_base is written into a stamp.
    for stamp in (project / STAMP_DIR).rglob("*.json"):
        assert "hunter2" not in stamp.read_text()
