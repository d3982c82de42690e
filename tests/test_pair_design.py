"""Pair designs: random designs are balanced and connected, the design is recorded and shown,
and an adaptive design killed mid-round continues the same design without paying twice."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from konkord.cli import cli
from konkord.configuration.pair_design import PairDesign, parse_design
from konkord.stats.design import all_pairs, is_connected, next_round, random_design

MODELS = ",".join(f"sim/m{k}:strength={s}" for k, s in enumerate([2.0, 1.0, 0.9, 0.0, -1.5]))


@pytest.mark.parametrize(("m", "t", "k", "seed"), [(20, 200, 5, 0), (20, 10, 2, 3), (7, 3, 2, 1)])
def test_a_random_design_is_connected_balanced_and_seeded(
    m: int, t: int, k: int, seed: int
) -> None:
    rows = random_design(m, t, k, seed)
    assert rows.shape == (t * k, 3)
    assert is_connected(m, rows)
    assert np.all(np.bincount(rows[:, 0], minlength=t) == k)
    assert np.all(rows[:, 1] < rows[:, 2])
    per_task = {(int(a), int(b), int(c)) for a, b, c in rows}
    assert len(per_task) == t * k  # no pair twice on one task
    seen = np.bincount(rows[:, 1:].ravel(), minlength=m)
    assert seen.max() - seen.min() <= 2  # every model about equally often
    assert np.array_equal(rows, random_design(m, t, k, seed))
    assert not np.array_equal(rows, random_design(m, t, k, seed + 1))


def test_connectivity_is_judged_on_the_pairs() -> None:
    assert is_connected(4, all_pairs(4, 1))
    assert not is_connected(4, np.array([[0, 0, 1], [0, 2, 3]]))


def test_a_design_too_sparse_to_connect_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot connect 20 models"):
        random_design(20, 5, 3, 0)


def test_next_round_goes_to_open_neighbours_on_unjudged_tasks() -> None:
    m, t = 3, 10
    order = np.array([0, 1, 2])
    supported = np.zeros((m, m), dtype=bool)
    supported[1, 2] = True  # 1 above 2 is settled
    low, high = np.full((m, m), -0.05), np.full((m, m), 0.5)
    judged = np.zeros((t, m, m), dtype=bool)
    judged[:4, 0, 1] = True
    choice = next_round(order, supported, low, high, judged, pairs_left=100, round_pairs=5, seed=0)
    assert choice.stop is None
    assert {(int(i), int(j)) for _, i, j in choice.design} == {(0, 1)}
    assert len(choice.design) == 5 and not judged[choice.design[:, 0], 0, 1].any()
    assert [c.status for c in choice.pairs] == ["separated", "open"]
    wide = next_round(order, supported, low - 0.5, high + 0.5, judged, 100, 5, seed=0)
    assert wide.stop and wide.pairs[0].status == "out of reach"
    assert "at all 10 tasks, more than 1 x the gap" in wide.pairs[0].reason
    spent = next_round(order, supported, low, high, judged, pairs_left=0, round_pairs=5, seed=0)
    assert spent.stop == "the budget is spent"
    judged[:, 0, 1] = True
    done = next_round(order, supported, low, high, judged, pairs_left=9, round_pairs=5, seed=0)
    assert done.stop == "every neighbouring pair is separated or out of reach"


def test_designs_parse_from_runs_json_and_the_command_line() -> None:
    assert parse_design("all") == PairDesign()
    assert parse_design("random:3") == PairDesign("random", k=3)
    assert parse_design({"random": {"k": 4, "seed": 9}}) == PairDesign("random", k=4, seed=9)
    assert parse_design({"adaptive": {"budget": 500}}).budget == 500
    assert parse_design("adaptive:40").kind == "adaptive"
    for bad in ("some", {"random": 0}, {"adaptive": {"budget": 5, "k": 1}}, {"x": 1}):
        with pytest.raises(ValueError):
            parse_design(bad)


def test_a_bad_design_in_runs_json_is_one_line_naming_file_line_and_field(project: Path) -> None:
    (project / "s.yaml").write_text(_suite(2))
    runs = {
        "runs": [
            {
                "name": "s",
                "suite": "s.yaml",
                "models": ["sim/a", "sim/b"],
                "judges": ["sim-judge/referee"],
                "design": {"random": "five"},
            }
        ]
    }
    (project / "runs.json").write_text(json.dumps(runs, indent=2))
    result = CliRunner().invoke(cli, ["judge", "--run", "s", "--dry-run"])
    assert result.exit_code == 2
    assert "runs.json:" in result.output and "design" in result.output
    assert "Traceback" not in result.output


def _suite(n: int) -> str:
    tasks = "".join(f"  - {{id: q{k}, prompt: Question {k}?}}\n" for k in range(n))
    return f"name: s\nrubric: Prefer correct answers.\ntasks:\n{tasks}"


def _run(project: Path, tasks: int) -> None:
    (project / "s.yaml").write_text(_suite(tasks))
    made = CliRunner().invoke(cli, ["run", "--suite", "s.yaml", "--models", MODELS])
    assert made.exit_code == 0, made.output


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_random_design_is_recorded_judged_and_shown(project: Path) -> None:
    _run(project, 6)
    result = CliRunner().invoke(
        cli, ["judge", "--run", "s", "--judge", "sim-judge/referee", "--design", "random:2"]
    )
    assert result.exit_code == 0, result.output
    rounds = _lines(project / "runs/s/designs.jsonl")
    assert [r["round"] for r in rounds] == [0]
    owed = {tuple(row) for row in rounds[0]["rows"]}
    assert len(owed) == 12
    verdicts = _lines(project / "runs/s/verdicts.jsonl")
    assert len(verdicts) == 24
    assert {(v["task_id"], v["model_a"], v["model_b"]) for v in verdicts} == owed
    assert "design random: 2 pairs per task (seed 0): 12 of 60 task pairs (20%)" in result.output
    from konkord.configuration.runspec import resolve_run
    from konkord.stages.report.report import build_results

    block = build_results(resolve_run("s")).judge_blocks[0]
    assert block.design is not None
    assert (block.design.judged, block.design.possible) == (12, 60)
    assert block.design.label == "random: 2 pairs per task (seed 0)"
    assert block.captions["rank"].startswith("Judged 12 of 60 possible comparisons")
    assert any(m.startswith("Pair design: random: 2 pairs per task") for m in block.methods)


def test_an_adaptive_design_killed_mid_round_continues_the_same_design(project: Path) -> None:
    _run(project, 8)
    command = ["judge", "--run", "s", "--judge", "sim-judge/referee", "--design", "adaptive:80"]
    first = CliRunner().invoke(cli, command)
    assert first.exit_code == 0, first.output
    designs = project / "runs/s/designs.jsonl"
    verdicts = project / "runs/s/verdicts.jsonl"
    rounds = _lines(designs)
    assert len(rounds) >= 3 and rounds[-1]["stop"]
    assert all(r["pairs"] for r in rounds[1:])  # every adaptive round says why
    judged = _lines(verdicts)
    assert len(judged) <= 80
    owed = {tuple(row) for r in rounds for row in r["rows"]}
    assert {(v["task_id"], v["model_a"], v["model_b"]) for v in judged} == owed
    pairs = {tuple(sorted(p)) for p in combinations([f"m{k}" for k in range(5)], 2)}
    assert len(pairs) == 10
    # Killed mid-round: the last round chosen and half its calls made, the stop not yet written.
    last = rounds[-2]
    cut = {tuple(row) for row in last["rows"]}
    kept = [v for v in judged if (v["task_id"], v["model_a"], v["model_b"]) not in cut]
    made = [v for v in judged if (v["task_id"], v["model_a"], v["model_b"]) in cut]
    designs.write_text("".join(json.dumps(r) + "\n" for r in rounds[:-1]))
    verdicts.write_text("".join(json.dumps(v) + "\n" for v in kept + made[: len(made) // 2]))
    again = CliRunner().invoke(cli, command)
    assert again.exit_code == 0, again.output
    strip = [{k: v for k, v in r.items() if k != "created_at"} for r in _lines(designs)]
    assert strip == [{k: v for k, v in r.items() if k != "created_at"} for r in rounds]
    redone = len(made) - len(made) // 2
    assert (
        f"judged {redone}, cached 0," in again.output
        or f"judged 0, cached {redone}," in again.output
    )
    assert len(_lines(verdicts)) == len(judged)  # nothing paid twice
    assert "adaptive round(s); stopped:" in again.output


def test_a_dry_run_plans_the_rounds_and_their_cap_and_writes_nothing(project: Path) -> None:
    _run(project, 6)
    command = ["judge", "--run", "s", "--judge", "sim-judge/referee", "--dry-run"]
    result = CliRunner().invoke(cli, [*command, "--design", "adaptive:40"])
    assert result.exit_code == 0, result.output
    assert (
        "design adaptive: a budget of 40 judge calls (seed 0): 24 calls in the rounds chosen so "
        "far; each later round up to 4 calls, at most 40 calls across all rounds"
    ) in result.output
    assert not (project / "runs/s/designs.jsonl").exists()
    assert not (project / "runs/s/verdicts.jsonl").exists()
    random = CliRunner().invoke(cli, [*command, "--design", "random:3"])
    assert "design random: 3 pairs per task (seed 0): 36 calls in one round" in random.output
    everything = CliRunner().invoke(cli, command)
    assert "design all: every pair on every task" in everything.output


def test_the_design_in_runs_json_is_judged_and_a_different_flag_is_refused(project: Path) -> None:
    (project / "s.yaml").write_text(_suite(4))
    runs = {
        "runs": [
            {
                "name": "s",
                "suite": "s.yaml",
                "models": MODELS.split(","),
                "judges": ["sim-judge/referee"],
                "design": {"random": {"k": 1, "seed": 5}},
            }
        ]
    }
    (project / "runs.json").write_text(json.dumps(runs, indent=2))
    made = CliRunner().invoke(cli, ["run", "--run", "s"])
    assert made.exit_code == 0, made.output
    other = CliRunner().invoke(cli, ["judge", "--run", "s", "--design", "random:2"])
    assert other.exit_code == 2
    assert 'set "design" there instead' in other.output
    judged = CliRunner().invoke(cli, ["judge", "--run", "s"])
    assert judged.exit_code == 0, judged.output
    assert "design random: 1 pairs per task (seed 5): 4 of 40 task pairs (10%)" in judged.output
    assert len(_lines(project / "runs/s/verdicts.jsonl")) == 8
