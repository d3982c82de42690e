"""The objective block: the judge (and people) measured against which answer passes the tests."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from openai_server import OpenAIServer, Reply

from konkord.checks.sandbox import Limits, bwrap_path
from konkord.configuration.judge_frame import split_framed_answers
from konkord.configuration.runspec import RunSpec, resolve_run
from konkord.evidence.log import EvidenceLog, now_iso
from konkord.evidence.verdicts import CombinedVerdict, combine_verdicts, load_verdicts
from konkord.providers.llm import ModelClient
from konkord.stages.check import check_run, passes_tests
from konkord.stages.judge.judge import judge_run
from konkord.stages.run import answer_key_hash, answer_messages
from konkord.stats.objective import agreement, objective_block
from konkord.stats.passrates import pass_rates

PASSED = {
    ("t1", "a"): True, ("t1", "b"): False,
    ("t2", "a"): False, ("t2", "b"): True,
    ("t3", "a"): True, ("t3", "b"): True,
    ("t4", "a"): False, ("t4", "b"): False,
    ("t5", "a"): True, ("t5", "c"): False,
}


def test_counts_split_into_passing_tie_failing_with_pairs_listed() -> None:
    verdicts = [
        ("t1", "a", "b", "a"),  # picks the passing answer
        ("t2", "a", "b", "a"),  # picks the failing answer
        ("t3", "a", "b", "b"),  # both pass: not objective
        ("t4", "a", "b", "tie"),  # both fail: not objective
        ("t5", "a", "c", "tie"),  # objective, tie
        ("t6", "a", "b", "a"),  # untested
    ]
    block = objective_block(verdicts, PASSED)
    assert (block.objective_pairs, block.both_passed, block.both_failed, block.untested) == (
        3, 1, 1, 1,
    )
    overall = block.judge.overall
    assert (overall.n, overall.picks_passing, overall.ties, overall.picks_failing) == (3, 1, 1, 1)
    assert overall.rate == pytest.approx(1 / 3)
    assert overall.rate_decided == pytest.approx(0.5)
    assert [(p.task_id, p.passing, p.outcome) for p in block.judge.pairs] == [
        ("t1", "a", "passing"), ("t2", "b", "failing"), ("t5", "a", "tie"),
    ]
    by_pair = {(p.model_a, p.model_b): p.agreement for p in block.judge.by_model_pair}
    assert by_pair[("a", "b")].n == 2 and by_pair[("a", "c")].ties == 1
    assert block.human is None and block.calls is None


def test_wilson_interval_matches_the_published_example() -> None:
    # DESIGN.md: 46 of 75 gives 61.3%, 50.0% to 71.5%.
    result = agreement(["passing"] * 46 + ["failing"] * 29)
    assert result.rate == pytest.approx(0.6133, abs=5e-4)
    assert result.low == pytest.approx(0.500, abs=5e-4)
    assert result.high == pytest.approx(0.715, abs=5e-4)


def test_empty_agreement_has_no_rate() -> None:
    result = agreement([])
    assert (result.n, result.rate, result.low, result.rate_decided) == (0, None, None, None)


def test_pair_order_and_input_shapes_do_not_matter() -> None:
    combined = CombinedVerdict("t1", "a", "b", "judge", "a", False, True)
    as_record = {"task_id": "t2", "model_a": "b", "model_b": "a", "winner": "b"}  # swapped
    incomplete = CombinedVerdict("t5", "a", "c", "judge", None, False, False)
    block = objective_block([combined, as_record, incomplete], PASSED)
    assert block.judge.overall.picks_passing == 2
    assert block.judge.undecided == 1
    assert {(p.model_a, p.model_b) for p in block.judge.pairs} == {("a", "b")}


def test_human_labels_are_measured_against_the_same_reference() -> None:
    labels = [
        ("t1", "a", "b", "a"),
        ("t2", "a", "b", "b"),
        ("t2", "a", "b", None),  # withdrawn
        ("t3", "a", "b", "a"),  # not objective
    ]
    block = objective_block([("t1", "a", "b", "b")], PASSED, labels=labels)
    assert block.judge.overall.picks_failing == 1
    assert block.human is not None
    assert (block.human.overall.n, block.human.overall.rate, block.human.undecided) == (2, 1.0, 1)


def test_pass_rates_bootstrap_over_tasks() -> None:
    outcome = np.array([[1.0, 0.0], [1.0, np.nan], [0.0, 0.0], [1.0, 1.0]])
    rates = pass_rates(outcome, ["a", "b"], "tests", resamples=500, seed=1)
    a, b = rates
    assert (a.passed, a.n, a.rate) == (3, 4, 0.75)
    assert (b.passed, b.n) == (1, 3)
    assert b.rate == pytest.approx(1 / 3)
    assert a.low is not None and a.high is not None and a.low < 0.75 < a.high
    assert a.low >= 0.0 and a.high <= 1.0
    assert pass_rates(outcome, ["a", "b"], "tests", resamples=500, seed=1) == rates
    empty = pass_rates(np.full((2, 1), np.nan), ["c"], "tests")[0]
    assert (empty.n, empty.rate, empty.low) == (0, None, None)


def test_pass_rates_resample_a_conversations_turns_together() -> None:
    rng = np.random.default_rng(7)
    tasks = (rng.random((12, 2)) < 0.6).astype(float)
    # each task asked again as a second turn with the same outcome: one conversation, two rows
    turns = np.repeat(tasks, 2, axis=0)
    conversation = np.repeat(np.arange(12), 2)
    alone = pass_rates(tasks, ["a", "b"], "tests", resamples=400, seed=3)
    together = pass_rates(turns, ["a", "b"], "tests", resamples=400, seed=3, clusters=conversation)
    # doubling every row of a resampled conversation changes no ratio: the same draws, the
    # same interval as the tasks alone
    for one, two in zip(alone, together, strict=True):
        assert (two.low, two.high) == pytest.approx((one.low, one.high))
        assert (two.passed, two.n) == (2 * one.passed, 2 * one.n)
    # turns taken as independent rows pretend to twice the evidence: a narrower interval
    apart = pass_rates(turns, ["a", "b"], "tests", resamples=400, seed=3)
    assert all(
        (x.high - x.low) < (y.high - y.low) for x, y in zip(apart, together, strict=True)
    )
    with pytest.raises(ValueError, match="clusters has 3 entries for 24 rows"):
        pass_rates(turns, ["a", "b"], "tests", clusters=[0, 1, 2])


# --- Against execution, end to end: answers checked, then judged by the local server. ---

N_TASKS = 12
MODELS = ("openai/model-a", "openai/model-b")
JUDGE = "openai/test-judge"


def correct_model(index: int) -> str:
    """Alternate which model is right, so position and model are not confounded."""
    return MODELS[index % 2]


def code_answer(index: int, right: bool) -> str:
    op = "+" if right else "-"
    return f"```python\ndef shift(x: int) -> int:\n    return x {op} {index + 1}\n```\n"


def write_project(root: Path, api_base: str) -> RunSpec:
    tasks = "\n".join(
        f"  - id: t{i}\n    prompt: Write shift(x) returning x plus {i + 1}.\n"
        f"    checks: [tests]\n    tests: |\n      assert shift(10) == {10 + i + 1}\n"
        for i in range(N_TASKS)
    )
    (root / "code.yaml").write_text(
        f"name: code\nanswer_language: python\nrubric: Correct code wins.\ntasks:\n{tasks}"
    )
    runs = {"runs": [{"name": "code", "suite": "code.yaml", "models": list(MODELS),
                      "judges": [JUDGE], "api_base": api_base}]}
    (root / "runs.json").write_text(json.dumps(runs))
    spec = resolve_run("code")
    records = []
    for i, task in enumerate(spec.suite.tasks):
        for model in MODELS:
            records.append({
                "kind": "answer", "task_id": task.id, "model": model,
                "settings_hash": answer_key_hash(answer_messages(spec.suite, task), spec.settings),
                "text": code_answer(i, model == correct_model(i)), "error": None,
                "created_at": now_iso(),
            })
    EvidenceLog(spec.run_dir).append_many("answers", records)
    return spec


def always_one(body: dict[str, Any], n: int) -> Reply:
    return Reply(content="The first answer is better.\nVERDICT: 1")


def reads_the_code(body: dict[str, Any], n: int) -> Reply:
    first, second = split_framed_answers(body["messages"][1]["content"])
    verdict = "1" if re.search(r"return x \+", first) else "2"
    assert bool(re.search(r"return x \+", second)) == (verdict == "2")
    return Reply(content=f"Answer {verdict} adds as asked.\nVERDICT: {verdict}")


def judged_block(spec: RunSpec) -> Any:
    client = ModelClient(concurrency=4, max_retries=0, prices=spec.prices)
    asyncio.run(judge_run(spec, [JUDGE], client, concurrency=4))
    records = load_verdicts(EvidenceLog(spec.run_dir), JUDGE)
    calls = [r for r in records if r.get("kind") == "verdict"]
    return objective_block(combine_verdicts(records), passes_tests(spec), calls=calls)


@pytest.fixture
def checked(project: Path, openai_server: OpenAIServer) -> tuple[RunSpec, OpenAIServer]:
    spec = write_project(project, openai_server.url)
    sandbox = "bwrap" if bwrap_path() else "none"
    summary = check_run(spec, sandbox=sandbox, limits=Limits(wall_s=10.0))
    assert summary.totals == {"tests": (N_TASKS, 2 * N_TASKS)}
    return spec, openai_server


def test_a_judge_always_picking_answer_1_agrees_with_the_tests_half_the_time(
    checked: tuple[RunSpec, OpenAIServer],
) -> None:
    spec, server = checked
    server.responder = always_one
    block = judged_block(spec)
    assert block.objective_pairs == N_TASKS
    # Both orders disagree on every pair: every combined verdict is a flipped tie.
    assert block.judge.overall.ties == N_TASKS and block.judge.overall.rate == 0.0
    assert block.calls is not None
    calls = block.calls.overall
    assert calls.n == 2 * N_TASKS
    assert calls.rate == pytest.approx(0.5)
    assert calls.low is not None and calls.high is not None and calls.low < 0.5 < calls.high


def test_a_judge_that_reads_the_code_agrees_with_the_tests(
    checked: tuple[RunSpec, OpenAIServer],
) -> None:
    spec, server = checked
    server.responder = reads_the_code
    block = judged_block(spec)
    assert block.judge.overall.n == N_TASKS
    assert block.judge.overall.rate == 1.0
    assert block.judge.overall.low is not None and block.judge.overall.low > 0.7
    assert block.calls is not None and block.calls.overall.rate == 1.0
    pair = block.judge.by_model_pair[0]
    assert (pair.model_a, pair.model_b, pair.agreement.n) == (*MODELS, N_TASKS)
