"""From a run of your own to the site: publish, and the steps around it that used to stop a
newcomer (calibrate before report, judging nothing, a runs file elsewhere, unnamed errors)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import SHARED
from test_build_pipeline import SUITE, write_project

from konkord.cli import cli
from konkord.stages.build.publish import with_entry

MODELS = "sim/a:strength=1,sim/b:strength=-1"
JUDGE = "sim-judge/fair:accuracy=0.9"


def konkord(*args: str) -> tuple[int, str]:
    outcome = CliRunner().invoke(cli, list(args))
    return outcome.exit_code, outcome.output


def made_run(project: Path) -> None:
    write_project(project, [])
    assert (
        konkord("run", "--suite", "suites/tiny.yaml", "--models", MODELS, "--run", "mine")[0] == 0
    )
    assert konkord("judge", "--run", "mine", "--judge", JUDGE)[0] == 0


def test_an_unlisted_run_is_a_warning_then_publish_puts_it_on_the_site(project: Path) -> None:
    made_run(project)
    assert konkord("report", "--run", "mine")[0] == 0
    code, output = konkord("build")
    assert code == 0, output
    assert "warning: results/mine.json: not on the site" in output
    assert "`konkord publish mine`" in output
    assert not (project / "public" / "mine").exists()

    code, output = konkord("publish", "mine")
    assert code == 0, output
    entry = json.loads((project / "runs.json").read_text())["runs"][0]
    assert entry == {
        "name": "mine",
        "suite": "suites/tiny.yaml",
        "models": MODELS.split(","),
        "judges": [JUDGE],
    }
    assert not list(project.glob(".runs.json.*")), "the temporary file was left behind"
    code, output = konkord("build")
    assert code == 0, output
    assert "warning" not in output
    assert (project / "public" / "mine" / "index.html").is_file()
    code, output = konkord("publish", "mine")
    assert code == 0 and "already listed" in output


def test_publish_keeps_the_hand_written_layout_of_runs_json() -> None:
    text = '{\n  "runs": [\n    {"name": "a", "suite": "s.yaml", "models": ["x", "y"]}\n  ]\n}\n'
    out = with_entry(text, {"name": "b", "suite": "s.yaml", "models": ["x", "y"]})
    assert out.startswith(
        '{\n  "runs": [\n    {"name": "a", "suite": "s.yaml", "models": ["x", "y"]},'
    )
    assert [r["name"] for r in json.loads(out)["runs"]] == ["a", "b"]
    empty = with_entry('{"runs": []}\n', {"name": "b", "suite": "s", "models": ["x", "y"]})
    assert [r["name"] for r in json.loads(empty)["runs"]] == ["b"]


def test_publish_of_an_unknown_run_says_how_to_make_one(project: Path) -> None:
    code, output = konkord("publish", "ghost")
    assert code == 2
    assert 'no run named "ghost" to publish' in output and "konkord run" in output


def test_calibrate_right_after_labelling_needs_no_report(project: Path) -> None:
    from konkord.configuration.runspec import resolve_run
    from konkord.evidence.log import EvidenceLog
    from konkord.stages.label.labels import record_label
    from konkord.stages.label.sample import pool_for_run

    made_run(project)
    spec = resolve_run("mine")
    log = EvidenceLog(spec.run_dir)
    for item in pool_for_run(spec, log)[:2]:
        record_label(log, item, item.model_a, "ann", item.model_a)
    assert not (project / "results" / "mine.json").exists()
    code, output = konkord("calibrate", "--run", "mine")
    assert code == 0, output
    assert "no results/mine.json yet: computing it first" in output
    assert f"{JUDGE}: 2 labels by 1 labeller\n" in output
    results = json.loads((project / "results" / "mine.json").read_text())
    assert results["judge_blocks"][0]["calibration"]["labels"] == 2


def test_judge_with_no_usable_answers_fails_and_says_why(project: Path) -> None:
    write_project(project, [])
    (project / "runs" / "empty").mkdir(parents=True)
    (project / "runs" / "empty" / "run.json").write_text(
        json.dumps({"name": "empty", "suite": "suites/tiny.yaml", "models": MODELS.split(",")})
    )
    code, output = konkord("judge", "--run", "empty", "--judge", JUDGE)
    assert code == 2
    assert "run empty: nothing to judge: no task has two usable answers" in output
    assert "konkord run --run empty" in output


def test_build_with_a_runs_file_elsewhere_finds_suites_beside_it(project: Path) -> None:
    write_project(project, [])
    other = project / "elsewhere"
    (other / "suites").mkdir(parents=True)
    (other / "suites" / "tiny.yaml").write_text(yaml.safe_dump(SUITE, sort_keys=False))
    run = {
        "name": "far",
        "suite": "suites/tiny.yaml",
        "models": MODELS.split(","),
        "judges": [JUDGE],
    }
    (other / "runs.json").write_text(json.dumps({"runs": [run]}))
    (project / "suites" / "tiny.yaml").unlink()
    code, output = konkord("build", "--runs", "elsewhere/runs.json")
    assert code == 0, output
    assert (project / "public" / "far" / "index.html").is_file()


def test_a_build_error_names_its_run(project: Path) -> None:
    bad = {"name": "broken", "suite": "suites/tiny.yaml", "models": ["gpt-4o-mni", "sim/b"]}
    write_project(project, [bad])
    code, output = konkord("build")
    assert code == 2
    assert "run broken" in output and '"gpt-4o-mni"' in output and "gpt-4o-mini" in output
    assert not (project / "runs" / "broken" / "answers.jsonl").exists()


@pytest.mark.parametrize("layout", ['{"runs": []}', '{\n  "runs": [\n  ]\n}\n'])
def test_publish_into_an_empty_runs_file(layout: str) -> None:
    out = with_entry(layout, {"name": "b", "suite": "s", "models": ["x", "y"]})
    assert json.loads(out)["runs"][0]["name"] == "b"


def test_publish_keeps_every_field_of_the_manifest(project: Path) -> None:
    """A cascade run's entry keeps its cascade, prices and label plan; the first pass is not
    listed as a judge (report does not list it either), so build finds the two in agreement."""
    made_run(project)
    manifest_file = project / "runs" / "mine" / "run.json"
    manifest = json.loads(manifest_file.read_text())
    manifest["judges"] = [JUDGE]
    manifest["cascade"] = {"first_pass": "sim-judge/quick", "accept_at": 0.7}
    manifest["prices"] = {JUDGE: {"input_per_million": 3.0, "output_per_million": 15.0}}
    manifest["label_plan"] = {"n": 7, "seed": 3}
    manifest_file.write_text(json.dumps(manifest))
    code, output = konkord("publish", "mine")
    assert code == 0, output
    entry = json.loads((project / "runs.json").read_text())["runs"][0]
    assert entry["cascade"] == {"first_pass": "sim-judge/quick", "accept_at": 0.7}
    assert entry["prices"] == manifest["prices"]
    assert entry["label_plan"] == {"n": 7, "seed": 3}
    assert entry["judges"] == [JUDGE]


MTBENCH = SHARED / "data" / "mtbench_human_judgments"


@pytest.mark.skipif(not (MTBENCH / "human.jsonl").exists(), reason="shared MT-Bench data absent")
def test_publish_takes_imported_judges_from_the_evidence(project: Path) -> None:
    from konkord.results.schema import read_results

    files = [str(MTBENCH / "human.jsonl"), str(MTBENCH / "gpt4_pair.jsonl")]
    assert konkord("import", "mt-bench-human", *files, "--run", "mtb")[0] == 0
    code, output = konkord("publish", "mtb")
    assert code == 0, output
    assert "judges: gpt4_pair" in output and "none yet" not in output
    entry = json.loads((project / "runs.json").read_text())["runs"][0]
    assert entry["judges"] == ["gpt4_pair"]
    code, output = konkord("report", "--run", "mtb", "--resamples", "20")
    assert code == 0, output
    assert read_results("results/mtb.json").judges == entry["judges"]
