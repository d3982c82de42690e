"""Pair designs: random designs are balanced and connected, the design is recorded and shown,
and an adaptive design killed mid-round continues the same design without paying twice."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path
from typing import Any

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


def _differences(m: int, pairs: dict[tuple[int, int], tuple[float, float, float]]) -> Any:
    """Difference intervals with (estimate, low, high) for the pairs given, mirrored."""
    from konkord.stats.ranking import PairwiseDifferences

    est, low, high = np.zeros((m, m)), np.full((m, m), -1.0), np.full((m, m), 1.0)
    for (a, b), (e, lo, hi) in pairs.items():
        est[a, b], low[a, b], high[a, b] = e, lo, hi
        est[b, a], low[b, a], high[b, a] = -e, -hi, -lo
    return PairwiseDifferences(est, low, high, np.full((m, m), 0.5), 0.95)


def test_next_round_spends_its_quota_on_open_neighbours_on_unjudged_tasks() -> None:
    m, t = 3, 10
    order = np.array([0, 1, 2])
    supported = np.zeros((m, m), dtype=bool)
    supported[1, 2] = True  # 1 above 2 is settled
    diffs = _differences(m, {(0, 1): (0.2, -0.05, 0.45), (1, 2): (0.8, 0.5, 1.1)})
    judged = np.zeros((t, m, m), dtype=bool)
    judged[:4, 0, 1] = True
    judged[:6, 1, 2] = True
    choice = next_round(
        order, supported, diffs, judged, pairs_left=100, round_pairs=5, seed=0, window=1
    )
    assert choice.stop is None
    assert {(int(i), int(j)) for _, i, j in choice.design} == {(0, 1)}
    assert len(choice.design) == 5 and not judged[choice.design[:, 0], 0, 1].any()
    assert [c.status for c in choice.pairs] == ["separated", "open"]
    assert choice.pairs[1].tasks_given == 5
    # a gap of 0 stays inside any interval: out of reach, and nothing is spent on it
    tied = next_round(
        order, supported, _differences(m, {(0, 1): (0.0, -0.3, 0.3)}), judged, 100, 5, 0
    )
    assert tied.stop and tied.pairs[0].status == "out of reach"
    assert "even 6 more direct comparisons would leave about +-" in tied.pairs[0].reason
    spent = next_round(order, supported, diffs, judged, pairs_left=0, round_pairs=5, seed=0)
    assert spent.stop == "the budget is spent"
    judged[:, 0, 1] = True
    done = next_round(order, supported, diffs, judged, pairs_left=9, round_pairs=5, seed=0)
    assert done.stop == "every neighbouring pair is separated or out of reach"


def test_reach_is_judged_against_the_family_wise_bar() -> None:
    """A neighbour the remaining tasks could separate at the pair's own interval is out of
    reach when the ranking's claims are held to an interval widened 3-fold (issue 29)."""
    m, t = 3, 200
    order = np.array([0, 1, 2])
    supported = np.zeros((m, m), dtype=bool)
    judged = np.zeros((t, m, m), dtype=bool)
    judged[:40] = np.triu(np.ones((m, m), dtype=bool), k=1)
    diffs = _differences(
        m, {(0, 1): (0.3, -0.02, 0.62), (1, 2): (0.06, -0.26, 0.38), (0, 2): (0.36, 0.0, 0.7)}
    )
    plain = next_round(order, supported, diffs, judged, pairs_left=300, round_pairs=100, seed=1)
    assert plain.pairs[1].status == "open"
    wide = next_round(
        order, supported, diffs, judged, pairs_left=300, round_pairs=100, seed=1, widen=3.0
    )
    assert wide.pairs[1].status == "out of reach" and wide.stop


def test_a_round_spends_its_quota_where_it_separates_most_not_evenly() -> None:
    """A neighbour whose gap is small against its interval is out of reach and gets nothing;
    two open neighbours share the round by what each share adds to the expected separations,
    not evenly, and the whole quota is spent on tasks not judged yet, the two pairs on the
    same tasks where they can (the sign test then sees the shared model in both)."""
    m, t = 3, 200
    order = np.array([0, 1, 2])
    supported = np.zeros((m, m), dtype=bool)
    judged = np.zeros((t, m, m), dtype=bool)
    judged[:40] = np.triu(np.ones((m, m), dtype=bool), k=1)
    far = (0.36, 0.0, 0.7)
    near_tie = _differences(
        m, {(0, 1): (0.3, -0.02, 0.62), (1, 2): (0.06, -0.26, 0.38), (0, 2): far}
    )
    one = next_round(order, supported, near_tie, judged, pairs_left=300, round_pairs=100, seed=1)
    assert [(c.upper, c.lower, c.status) for c in one.pairs] == [
        (1, 2, "out of reach"),
        (0, 1, "open"),
    ]
    assert len(one.design) == 100 and one.pairs[1].tasks_given == 100
    both = _differences(m, {(0, 1): (0.3, -0.02, 0.62), (1, 2): (0.2, -0.12, 0.52), (0, 2): far})
    two = next_round(order, supported, both, judged, pairs_left=300, round_pairs=100, seed=1)
    given = {(c.upper, c.lower): c.tasks_given for c in two.pairs}
    assert sum(given.values()) == len(two.design) == 100
    assert abs(given[(0, 1)] - given[(1, 2)]) > 20  # an even share would be 50 and 50
    rows = {tuple(r) for r in two.design.tolist()}
    assert len(rows) == 100 and not any(judged[t_, i, j] for t_, i, j in rows)
    # pairs sharing a model share tasks: model 1 meets both others on the smaller pair's tasks
    tasks = {pair: {t_ for t_, i, j in rows if (i, j) == pair} for pair in [(0, 1), (1, 2)]}
    smaller, larger = sorted(tasks.values(), key=len)
    assert smaller <= larger


def test_designs_parse_from_runs_json_and_the_command_line() -> None:
    assert parse_design("all") == PairDesign()
    assert parse_design("random:3") == PairDesign("random", k=3)
    assert parse_design({"random": {"k": 4, "seed": 9}}) == PairDesign("random", k=4, seed=9)
    assert parse_design({"adaptive": {"budget": 500}}).budget == 500
    assert parse_design("adaptive:40").kind == "adaptive"
    shares = parse_design({"adaptive": {"budget": 90, "round_share": 0.2, "start_share": 0.5}})
    assert (shares.round_share, shares.start_share) == (0.2, 0.5)
    assert shares.as_json() == {
        "adaptive": {"budget": 90, "seed": 0, "round_share": 0.2, "start_share": 0.5}
    }
    assert parse_design(shares.as_json()) == shares
    # at the default start share the design's key is what it was before start_share was read
    assert parse_design("adaptive:90").as_json() == {
        "adaptive": {"budget": 90, "seed": 0, "round_share": 0.1}
    }
    for bad in (
        "some", {"random": 0}, {"adaptive": {"budget": 5, "k": 1}}, {"x": 1},
        {"adaptive": {"budget": 5, "start_share": 0}},
    ):  # fmt: skip
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
    _run(project, 40)  # fewer tasks leave every neighbour out of reach after the start
    command = ["judge", "--run", "s", "--judge", "sim-judge/referee", "--design", "adaptive:200"]
    first = CliRunner().invoke(cli, command)
    assert first.exit_code == 0, first.output
    designs = project / "runs/s/designs.jsonl"
    verdicts = project / "runs/s/verdicts.jsonl"
    rounds = _lines(designs)
    assert len(rounds) >= 3 and rounds[-1]["stop"]
    assert all(r["pairs"] for r in rounds[1:])  # every adaptive round says why
    judged = _lines(verdicts)
    owed = {tuple(row) for r in rounds for row in r["rows"]}
    assert {(v["task_id"], v["model_a"], v["model_b"]) for v in judged} == owed
    # both orders of every pair owed, within the budget of 200 calls; the rounds stop early
    # when every open neighbour is out of reach of the family-wise bar (issue 29)
    assert len(judged) == 2 * len(owed) <= 200
    assert rounds[-2]["rows"]  # the last round chosen judged something, to be cut below
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
        "design adaptive: a budget of 40 judge calls (seed 0): round 0: 24 calls; then up to 4 "
        "round(s) of up to 4 calls each; at most 40 calls across all rounds"
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
