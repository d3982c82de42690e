"""The per-turn lines of a report: each turn ranked the way every ranking is (Bradley-Terry, the
task bootstrap, the floors and the sign-test gate), single-turn tasks counted as turn 1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import scipy.stats
import yaml
from click.testing import CliRunner
from evidence_factory import write_runs

from konkord.cli import cli
from konkord.configuration.runspec import resolve_run
from konkord.evidence.log import EvidenceLog, now_iso
from konkord.stages.report.report import ReportOptions, build_results

FAST = ReportOptions(resamples=200, seed=3)
MODELS = ["m/a", "m/b", "m/c"]
PAIRS = [("m/a", "m/b"), ("m/a", "m/c"), ("m/b", "m/c")]
A_WINS, B_WINS, TIE = ("1", "2"), ("2", "1"), ("tie", "tie")  # model_a / model_b / tie


def outcome_of(task: int, turn: int, pair: int) -> tuple[str, str]:
    """Turn 1 mixed; turn 2 the earlier model (by name) of each pair wins on most tasks."""
    if turn == 1:
        return (A_WINS, B_WINS, TIE)[(task + pair) % 3]
    return B_WINS if (task + pair) % 5 == 0 else A_WINS


def write(root: Path, name: str, tasks: list[dict[str, Any]]) -> None:
    suite = {"name": name, "rubric": "Prefer the better answer.", "tasks": tasks}
    (root / "suites").mkdir(exist_ok=True)
    (root / "suites" / f"{name}.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))


def add_verdict(root: Path, run: str, unit: str, x: str, y: str, first_wins: Any) -> None:
    """Both orders of one pair, as verdicts imported without their answers are (no answer
    hashes to go stale): first_wins[k] is "1", "2" or "tie" for order k (ab, ba)."""
    model_a, model_b = sorted((x, y))
    records = []
    for order, position in zip(("ab", "ba"), first_wins, strict=True):
        shown = (model_a, model_b) if order == "ab" else (model_b, model_a)
        records.append(
            {
                "kind": "verdict", "task_id": unit, "model_a": model_a, "model_b": model_b,
                "order": order, "judge": "judge/j1", "frame_hash": "frame0001",
                "position_winner": position,
                "winner": {"1": shown[0], "2": shown[1], "tie": "tie"}[position],
                "rationale": "Because.", "raw": f"Because.\nVERDICT: {position.upper()}",
                "answer_a_sha": None, "answer_b_sha": None, "created_at": now_iso(),
            }
        )  # fmt: skip
    EvidenceLog(root / "runs" / run).append_many("verdicts", records)


def judge(root: Path, run: str, unit: str, first_wins: tuple[str, str]) -> None:
    for x, y in PAIRS:
        add_verdict(root, run, unit, x, y, first_wins)


def conversation_run(root: Path, n: int, singles: int = 0) -> None:
    tasks: list[dict[str, Any]] = [
        {"id": f"c{k}", "turns": [f"Tell me about {k}.", "Now shorter."]} for k in range(n)
    ]
    tasks += [{"id": f"s{k}", "prompt": f"Question {k}?"} for k in range(singles)]
    write(root, "talk", tasks)
    runs = [{"name": "talk", "suite": "suites/talk.yaml", "models": MODELS}]
    write_runs(root, runs)
    for k in range(n):
        for turn in (1, 2):
            for p, (x, y) in enumerate(PAIRS):
                add_verdict(root, "talk", f"c{k}-t{turn}", x, y, outcome_of(k, turn, p))
    for k in range(singles):
        for p, (x, y) in enumerate(PAIRS):
            add_verdict(root, "talk", f"s{k}", x, y, outcome_of(n + k, 1, p))


def test_a_turns_line_is_the_ranking_a_run_of_that_turn_alone_would_get(project: Path) -> None:
    conversation_run(project, n=10)
    lines = build_results(resolve_run("talk"), FAST).judge_blocks[0].by_turn
    assert [(line.turn, line.tasks, line.pairs) for line in lines] == [(1, 10, 30), (2, 10, 30)]
    # The same verdicts of turn 2 as a run of ten single-turn tasks: the report's own ranking
    write(project, "alone", [{"id": f"c{k}", "prompt": f"Now shorter ({k})."} for k in range(10)])
    runs = [
        {"name": "talk", "suite": "suites/talk.yaml", "models": MODELS},
        {"name": "alone", "suite": "suites/alone.yaml", "models": MODELS},
    ]
    write_runs(project, runs)
    for k in range(10):
        for p, (x, y) in enumerate(PAIRS):
            add_verdict(project, "alone", f"c{k}", x, y, outcome_of(k, 2, p))
    alone = build_results(resolve_run("alone"), FAST).judge_blocks[0]
    turn = lines[1]
    assert [r.model for r in turn.ratings] == [r.model for r in alone.ratings]
    for mine, theirs in zip(turn.ratings, alone.ratings, strict=True):
        assert (mine.rank_best, mine.rank_worst) == (theirs.rank_best, theirs.rank_worst)
        assert mine.comparisons == theirs.comparisons
        got, want = mine.win_rate_vs_field, theirs.win_rate_vs_field
        assert (got.estimate, got.low, got.high) == (
            pytest.approx(want.estimate),
            pytest.approx(want.low),
            pytest.approx(want.high),
        )
    above = [(c.text, c.models) for c in alone.claims if c.kind == "above"]
    assert above and [(c.text, c.models) for c in turn.claims if c.kind == "above"] == above
    # turn 1 is mixed: nothing is supported, and each unordered neighbour says why
    assert lines[0].claims and all(c.kind == "not_separated" for c in lines[0].claims)
    assert all("are not separated" in c.text for c in lines[0].claims)


@pytest.mark.parametrize("n", [5, 6])
def test_the_sign_test_gates_a_turns_claims(project: Path, n: int) -> None:
    """Turn 2 is unanimous, m/a > m/b > m/c on every task. With 5 tasks the fit alone would
    order m/a above m/c (their intervals do not even overlap), but an exact sign test over 5
    tasks gives p = 2^-4 = 0.0625 (scipy), so the turn claims nothing; at 6, p = 0.03125."""
    write(project, "talk", [{"id": f"c{k}", "turns": ["One.", "Two."]} for k in range(n)])
    write_runs(project, [{"name": "talk", "suite": "suites/talk.yaml", "models": MODELS}])
    for k in range(n):
        judge(project, "talk", f"c{k}-t1", TIE)
        judge(project, "talk", f"c{k}-t2", A_WINS)
    p = scipy.stats.binomtest(n, n).pvalue
    line = build_results(resolve_run("talk"), FAST).judge_blocks[0].by_turn[1]
    assert line.win_rate == {"m/a": 1.0, "m/b": 0.5, "m/c": 0.0}
    top, bottom = line.ratings[0].win_rate_vs_field, line.ratings[-1].win_rate_vs_field
    assert top.low is not None and bottom.high is not None and top.low > bottom.high
    ranks = [(r.model, r.rank_best, r.rank_worst) for r in line.ratings]
    if n == 5:
        assert p == pytest.approx(0.0625)
        assert ranks == [("m/a", 1, 3), ("m/b", 1, 3), ("m/c", 1, 3)]
        assert not any(claim.kind == "above" for claim in line.claims)
    else:
        assert p == pytest.approx(0.03125)
        assert "m/a ranks above m/c." in [claim.text for claim in line.claims]
        assert ranks[0][1:] == (1, 2) and ranks[2][1:] == (2, 3)


def test_single_turn_tasks_count_as_turn_one_and_the_report_says_so(project: Path) -> None:
    conversation_run(project, n=4, singles=3)
    result = CliRunner().invoke(cli, ["report", "--run", "talk", "--resamples", "100"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "turn 1: 7 tasks, 3 of them single-turn (counted as turn 1), 21 pair verdicts" in text
    assert "turn 2: 4 tasks, 12 pair verdicts; win rate vs field [95%]:" in text
    lines = build_results(resolve_run("talk"), FAST).judge_blocks[0].by_turn
    assert [(line.tasks, line.single_turn_tasks) for line in lines] == [(7, 3), (4, 0)]
    assert all(len(line.ratings) == 3 for line in lines)


def test_a_suite_without_conversations_has_no_turn_lines(project: Path) -> None:
    write(project, "plain", [{"id": f"t{k}", "prompt": f"Q{k}?"} for k in range(4)])
    write_runs(project, [{"name": "plain", "suite": "suites/plain.yaml", "models": MODELS}])
    for k in range(4):
        judge(project, "plain", f"t{k}", A_WINS)
    assert build_results(resolve_run("plain"), FAST).judge_blocks[0].by_turn == []
