"""The example conversation suite through the offline pipeline: each turn checked against its
own tests, labelled and calibrated under the same ids the judge gave verdicts under."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from click.testing import CliRunner

from konkord.cli import cli
from konkord.configuration.runspec import resolve_run
from konkord.configuration.suite import load_suite
from konkord.evidence.log import EvidenceLog
from konkord.stages import check
from konkord.stages.label.simulated import simulate_plan_labels

REPO = Path(__file__).resolve().parent.parent
SUITE = REPO / "suites" / "conversations.yaml"


def test_the_example_suite_has_eight_two_turn_tasks_with_tests_on_both_code_turns() -> None:
    suite = load_suite(SUITE)
    assert len(suite.tasks) >= 8 and all(len(task.turns) == 2 for task in suite.tasks)
    code = [task for task in suite.tasks if "tests" in task.checks]
    assert len(code) >= 2 and all(turn.tests for task in code for turn in task.turns)


def test_checks_run_each_turns_tests_and_labels_share_the_verdict_ids(project: Path) -> None:
    shutil.copy(SUITE, project / "talk.yaml")
    run = {
        "name": "talk", "suite": "talk.yaml",
        "models": ["sim/atlas:strength=2.0", "sim/cedar:strength=-1.0"],
        "judges": ["sim-judge/referee:accuracy=0.9,tie_rate=0.1"],
        "label_plan": {"n": 12, "seed": 0,
                       "simulated_labellers": [{"name": "sim-ana", "accuracy": 0.9}]},
    }  # fmt: skip
    (project / "runs.json").write_text(json.dumps({"runs": [run]}))
    runner = CliRunner()
    for command in (["run"], ["judge"], ["check", "--sandbox", "none"]):
        result = runner.invoke(cli, [*command, "--run", "talk"])
        assert result.exit_code in (0, 1), result.output  # 1: some answers fail their tests
    suite = load_suite("talk.yaml")
    log = EvidenceLog("runs/talk")
    checked = {(r["task_id"], r["check"]): r for r in log.records("checks")}
    for turn in (1, 2):
        unit = suite.task(f"code-clamp-t{turn}")
        assert unit.tests == suite.task("code-clamp").turns[turn - 1].tests
        assert checked[(unit.id, "tests")]["tests_sha"] == check.tests_sha(unit)
    assert check.tests_sha(suite.task("code-clamp-t1")) != check.tests_sha(suite.task("code-clamp-t2"))
    assert ("code-clamp", "tests") not in checked  # the conversation itself is not a unit

    simulate_plan_labels(resolve_run("talk"))
    result = runner.invoke(cli, ["calibrate", "--run", "talk"])
    assert result.exit_code == 0, result.output
    verdict_ids = {r["task_id"] for r in log.records("verdicts")}
    label_ids = {r["task_id"] for r in log.records("labels")}
    assert label_ids and label_ids <= verdict_ids
    assert {i.rsplit("-t", 1)[1] for i in verdict_ids} == {"1", "2"}
    assert "turn 1" in result.output and "turn 2" in result.output  # per turn, as Table 5

    assert runner.invoke(cli, ["report", "--run", "talk"]).exit_code == 0
    block = json.loads(Path("results/talk.json").read_text())["judge_blocks"][0]
    lines = block["by_turn"]
    assert [line["turn"] for line in lines] == [1, 2]
    for line in lines:
        assert line["pairs"] == 8  # one model pair per task, in each turn
        rates = list(line["win_rate"].values())
        assert rates[0] + rates[1] == 1.0  # two models: what one wins the other loses


def test_a_suite_mixing_conversations_and_single_prompts_counts_those_as_turn_one(
    project: Path,
) -> None:
    """Offline, end to end: per-turn agreement in calibrate and the judges table, the per-turn
    ranking in the report, and both on the site, with the single-turn tasks in turn 1."""
    from bs4 import BeautifulSoup
    from fixtures_site import build_project_site

    suite = yaml.safe_load(SUITE.read_text())
    suite["tasks"] = suite["tasks"][:5] + [
        {"id": f"plain-{k}", "prompt": f"Name {k + 2} prime numbers."} for k in range(3)
    ]
    (project / "mixed.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    for folder in ("templates", "content"):
        shutil.copytree(REPO / folder, project / folder)
    run = {
        "name": "mixed", "suite": "mixed.yaml",
        "models": ["sim/atlas:strength=1.5", "sim/cedar:strength=-1.0"],
        "judges": ["sim-judge/referee:accuracy=0.9,tie_rate=0.1"],
        "label_plan": {"n": 13, "seed": 0,
                       "simulated_labellers": [{"name": "sim-ana", "accuracy": 0.9}]},
    }  # fmt: skip
    (project / "runs.json").write_text(json.dumps({"runs": [run]}))
    runner = CliRunner()
    for command in (["run"], ["judge"]):
        result = runner.invoke(cli, [*command, "--run", "mixed"])
        assert result.exit_code == 0, result.output
    simulate_plan_labels(resolve_run("mixed"))
    labelled = {r["task_id"] for r in EvidenceLog("runs/mixed").records("labels")}
    single = sorted(t for t in labelled if t.startswith("plain-"))
    assert single and any(t.endswith("-t2") for t in labelled)

    out = " ".join(runner.invoke(cli, ["calibrate", "--run", "mixed"]).output.split())
    n = len(single)
    counted = f"turn 1 (and {n} single-turn task{'s' if n != 1 else ''}, counted as turn 1):"
    assert counted in out and "turn 2: judge vs people" in out
    out = " ".join(runner.invoke(cli, ["report", "--run", "mixed"]).output.split())
    assert "turn 1: 8 tasks, 3 of them single-turn (counted as turn 1), 8 pair verdicts" in out
    assert "turn 2: 5 tasks, 5 pair verdicts; win rate vs field [95%]:" in out
    out = " ".join(runner.invoke(cli, ["judges", "--run", "mixed"]).output.split())
    assert counted in out

    build_project_site(project)
    board = BeautifulSoup((project / "public/mixed/index.html").read_text(), "html.parser")
    first = board.select("ul.turn-lines > li")[0].get_text(" ", strip=True)
    assert first.startswith("Turn 1 (8 tasks, 3 of them single-turn, counted as turn 1;")
    assert board.select_one("figure.turn-plot svg.forest") is not None
    page = BeautifulSoup((project / "public/mixed/calibration/index.html").read_text(), "html.parser")
    rows = [r.get_text(" ", strip=True) for r in page.select("table.by-turn tbody tr")]
    assert rows[0].startswith(f"Turn 1 (with {n} single-turn task")
    note = page.select_one("p.single-turn-note")
    assert note is not None and "count" in note.get_text() and "as turn 1" in note.get_text()


def test_every_ranking_of_a_conversation_run_uses_every_turn(project: Path) -> None:
    """The style-controlled fit, the anchored ranking and the judge panel find a turn's
    verdicts under its conversation, as the plain ranking does: none of them may drop the
    turns (before, a turn id was "not in" the task index that `[]` answered for, and a
    conversation run had no style block at all)."""
    from konkord.results.schema import read_results

    suite = yaml.safe_load(SUITE.read_text())
    (project / "talk.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    judges = [
        "sim-judge/referee:accuracy=0.85,tie_rate=0.1",
        "sim-judge/careful:accuracy=0.95,tie_rate=0.1",
        "sim-judge/verbose:accuracy=0.6,length_bias=0.9",
    ]
    run = {
        "name": "talk", "suite": "talk.yaml",
        "models": ["sim/atlas:strength=1.5", "sim/birch:strength=0.3", "sim/cedar:strength=-1.0"],
        "judges": judges,
        "label_plan": {"n": 40, "seed": 0,
                       "simulated_labellers": [{"name": "sim-ana", "accuracy": 0.9}]},
    }  # fmt: skip
    (project / "runs.json").write_text(json.dumps({"runs": [run]}))
    runner = CliRunner()
    for command in (["run"], ["judge"]):
        result = runner.invoke(cli, [*command, "--run", "talk"])
        assert result.exit_code == 0, result.output
    simulate_plan_labels(resolve_run("talk"))
    result = runner.invoke(cli, ["report", "--run", "talk"])
    assert result.exit_code == 0, result.output
    results = read_results(resolve_run("talk").results_path)
    conversations = len(suite["tasks"])
    every_turn = conversations * 2 * 3  # two turns, three pairs of models
    for block in results.judge_blocks:
        assert block.style is not None, block.judge
        assert block.style.judge.comparisons == every_turn, block.judge
        assert block.anchored is not None and block.anchored.judged == every_turn
    panel = results.judge_panel
    assert panel is not None
    assert {s.consistency.tasks for s in panel.standings} == {conversations}
