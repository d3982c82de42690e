"""The judge stage against the local OpenAI-compatible server acting as the judge."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from holding_judge import HoldingJudge
from openai_server import OpenAIServer, Reply

from konkord.cli import cli
from konkord.configuration.judge_frame import RETRY_REMINDER, split_framed_answers
from konkord.configuration.runspec import RunSpec, resolve_run
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog, now_iso, record_key
from konkord.evidence.verdicts import combine_verdicts, judges_in_log, load_verdicts
from konkord.providers.llm import ModelClient
from konkord.stages.judge.judge import JudgeSummary, judge_run, missing_verdicts
from konkord.stages.run import answer_key_hash, answer_messages

REPO = Path(__file__).resolve().parent.parent
MODELS = ["openai/model-a", "openai/model-b", "openai/model-c"]
QUALITY = {"openai/model-a": 3, "openai/model-b": 2, "openai/model-c": 1}
JUDGE = "openai/test-judge"
TASKS = ["t1", "t2", "t3"]
PAIRS_PER_TASK = 3
RUBRIC = "Prefer the answer with the higher quality score."


def write_project(root: Path, api_base: str, judges: list[str], rubric: str = RUBRIC) -> None:
    (root / "suites").mkdir(exist_ok=True)
    tasks = "\n".join(f"  - id: {t}\n    prompt: Solve problem {t}." for t in TASKS)
    (root / "suites" / "demo.yaml").write_text(
        f"name: demo\nrubric: {rubric}\ntasks:\n{tasks}\n"
    )
    runs = {
        "runs": [
            {
                "name": "demo",
                "suite": "suites/demo.yaml",
                "models": MODELS,
                "judges": judges,
                "api_base": api_base,
                "prices": {j: {"input_per_million": 1, "output_per_million": 2} for j in judges},
            }
        ]
    }
    (root / "runs.json").write_text(json.dumps(runs, indent=2))


def answer_text(task_id: str, model: str, version: int = 0) -> str:
    # No model name in the text: the judge must not be able to tell who wrote it.
    return f"Solution to {task_id}, version {version}.\nquality={QUALITY[model]}"


def write_answers(spec: RunSpec, texts: dict[tuple[str, str], str] | None = None) -> None:
    log = EvidenceLog(spec.run_dir)
    records = []
    for task in spec.suite.tasks:
        settings_hash = answer_key_hash(answer_messages(spec.suite, task), spec.settings)
        for model in spec.models:
            text = (texts or {}).get((task.id, model), answer_text(task.id, model))
            records.append(
                {
                    "kind": "answer",
                    "task_id": task.id,
                    "model": model,
                    "settings_hash": settings_hash,
                    "text": text,
                    "error": None,
                    "finish_reason": "stop",
                    "created_at": now_iso(),
                }
            )
    log.append_many("answers", records)


def quality_of(text: str) -> int:
    found = re.search(r"quality=(\d+)", text)
    assert found, text
    return int(found.group(1))


def shown(body: dict[str, Any]) -> tuple[str, str]:
    return split_framed_answers(body["messages"][1]["content"])


def content_judge(body: dict[str, Any], n: int) -> Reply:
    first, second = shown(body)
    q1, q2 = quality_of(first), quality_of(second)
    verdict = "1" if q1 > q2 else "2" if q2 > q1 else "TIE"
    return Reply(content=f"Answer {verdict} scores higher.\n**VERDICT: {verdict}**")


def always_one(body: dict[str, Any], n: int) -> Reply:
    return Reply(content="The first answer is better.\nVERDICT: 1")


@pytest.fixture
def demo(project: Path, openai_server: OpenAIServer) -> RunSpec:
    write_project(project, openai_server.url, [JUDGE])
    spec = resolve_run("demo")
    write_answers(spec)
    return spec


def judge(spec: RunSpec, judges: list[str] | None = None, **kwargs: Any) -> JudgeSummary:
    client = ModelClient(concurrency=4, max_retries=0, prices=spec.prices)
    return asyncio.run(
        judge_run(spec, tuple(judges or [JUDGE]), client, concurrency=4, **kwargs)
    )


EXPECTED_CALLS = len(TASKS) * PAIRS_PER_TASK * 2


def test_blind_both_orders_and_content_reading_judge(
    demo: RunSpec, openai_server: OpenAIServer
) -> None:
    openai_server.responder = content_judge
    summary = judge(demo)

    assert len(openai_server.requests) == EXPECTED_CALLS
    for body in openai_server.requests:
        blob = json.dumps(body)
        for model in MODELS:
            assert model.split("/")[1] not in blob
        assert body["model"] == "test-judge"
        assert body["max_tokens"] == 8192
    orders = Counter(shown(body) for body in openai_server.requests)
    assert set(orders.values()) == {1}
    pairs = Counter(frozenset(pair) for pair in orders)
    assert len(pairs) == len(TASKS) * PAIRS_PER_TASK
    assert set(pairs.values()) == {2}
    for first, second in orders:
        assert (second, first) in orders

    tally = summary.tallies[JUDGE]
    assert (tally.judged, tally.cached, tally.failed) == (EXPECTED_CALLS, 0, 0)
    assert tally.flip_rate == 0.0
    assert tally.cost_usd == pytest.approx(EXPECTED_CALLS * (10 * 1.0 + 5 * 2.0) / 1e6)
    combined = combine_verdicts(load_verdicts(EvidenceLog(demo.run_dir), JUDGE))
    assert len(combined) == len(TASKS) * PAIRS_PER_TASK
    for verdict in combined:
        assert verdict.complete and not verdict.flipped
        best = max((verdict.model_a, verdict.model_b), key=QUALITY.__getitem__)
        assert verdict.winner == best
    assert missing_verdicts(demo, JUDGE) == 0

    again = judge(demo)
    assert len(openai_server.requests) == EXPECTED_CALLS
    assert again.tallies[JUDGE].already_recorded == EXPECTED_CALLS


def test_always_verdict_1_flips_every_pair(demo: RunSpec, openai_server: OpenAIServer) -> None:
    openai_server.responder = always_one
    summary = judge(demo)
    tally = summary.tallies[JUDGE]
    assert tally.flip_rate == 1.0
    assert tally.flipped_pairs == len(TASKS) * PAIRS_PER_TASK
    assert len(tally.most_flipped) == 3
    combined = combine_verdicts(load_verdicts(EvidenceLog(demo.run_dir), JUDGE))
    assert {(c.winner, c.flipped, c.complete) for c in combined} == {("tie", True, True)}
    records = load_verdicts(EvidenceLog(demo.run_dir), JUDGE)
    assert {r["position_winner"] for r in records} == {"1"}
    assert {r["order"] for r in records if r["winner"] == r["model_a"]} == {"ab"}


def test_verdict_records_and_prompt_record(demo: RunSpec, openai_server: OpenAIServer) -> None:
    openai_server.responder = content_judge
    judge(demo)
    log = EvidenceLog(demo.run_dir)
    prompts = log.records("prompts")
    assert len(prompts) == 1
    system = openai_server.requests[0]["messages"][0]["content"]
    assert prompts[0]["system_prompt"] == system
    assert RUBRIC in system
    assert prompts[0]["rubric_sha"] == demo.suite.rubric_hash()
    record = log.records("verdicts")[0]
    for key in ("position_winner", "winner", "rationale", "raw", "answer_a_sha", "answer_b_sha",
                "cost_usd", "tokens_in", "tokens_out", "latency_s", "created_at"):
        assert key in record
    assert record["frame_hash"] == prompts[0]["frame_hash"]
    assert record["model_a"] < record["model_b"]
    judge(demo, [JUDGE, "openai/second-judge"])
    assert len(log.records("prompts")) == 1


def test_rubric_drift_is_refused_and_evidence_unchanged(
    demo: RunSpec, openai_server: OpenAIServer, project: Path
) -> None:
    openai_server.responder = content_judge
    judge(demo)
    before = {p.name: p.read_bytes() for p in demo.run_dir.glob("*.jsonl")}
    requests = len(openai_server.requests)

    write_project(project, openai_server.url, [JUDGE], rubric="Prefer the shorter answer.")
    edited = resolve_run("demo")
    with pytest.raises(KonkordError) as refused:
        judge(edited)
    message = str(refused.value)
    assert "the rubric in suites/demo.yaml changed" in message
    assert "start a new run" in message
    assert {p.name: p.read_bytes() for p in demo.run_dir.glob("*.jsonl")} == before
    assert len(openai_server.requests) == requests


def test_unparseable_is_retried_once_then_recorded_as_failure(
    demo: RunSpec, openai_server: OpenAIServer
) -> None:
    spec = replace(demo, models=tuple(MODELS[:2]))
    spec = replace(spec, suite=spec.suite.model_copy(update={"tasks": spec.suite.tasks[:1]}))
    openai_server.responder = lambda body, n: Reply(content="Both answers have merit.")
    summary = judge(spec)
    assert len(openai_server.requests) == 4  # one pair, two orders, one retry each
    retries = [b for b in openai_server.requests if len(b["messages"]) == 4]
    assert len(retries) == 2
    assert retries[0]["messages"][2] == {"role": "assistant", "content": "Both answers have merit."}
    assert retries[0]["messages"][3]["content"] == RETRY_REMINDER
    assert summary.failed == 2
    records = load_verdicts(EvidenceLog(spec.run_dir), JUDGE)
    assert {(r["kind"], r["reason"], r["raw"]) for r in records} == {
        ("failure", "no_verdict_line", "Both answers have merit.")
    }
    assert combine_verdicts(records)[0].complete is False
    assert combine_verdicts(records)[0].winner is None

    # A judge that complies with the reminder: the verdict keeps the first rationale.
    openai_server.responder = lambda body, n: Reply(
        content="VERDICT: 2" if len(body["messages"]) == 4 else "Answer 2 is sharper."
    )
    summary = judge(spec)
    assert summary.failed == 0
    records = load_verdicts(EvidenceLog(spec.run_dir), JUDGE)
    assert {(r["kind"], r["retried"], r["rationale"]) for r in records} == {
        ("verdict", True, "Answer 2 is sharper.")
    }


def test_token_cap_failure_names_the_cap(demo: RunSpec, openai_server: OpenAIServer) -> None:
    openai_server.responder = lambda body, n: Reply(
        content="Let me think step by step about", finish_reason="length"
    )
    summary = judge(demo, max_tokens=300)
    assert len(openai_server.requests) == EXPECTED_CALLS  # no retry: the cap would hit again
    assert {b["max_tokens"] for b in openai_server.requests} == {300}
    assert summary.failed == EXPECTED_CALLS
    record = load_verdicts(EvidenceLog(demo.run_dir), JUDGE)[0]
    assert record["reason"] == "token_cap"
    assert "output cap of 300 tokens" in record["detail"]
    assert record["raw"] == "Let me think step by step about"


def test_failed_call_is_recorded_and_retried_on_rerun(
    demo: RunSpec, openai_server: OpenAIServer
) -> None:
    openai_server.responder = lambda body, n: Reply(status=401)
    summary = judge(demo)
    assert summary.failed == EXPECTED_CALLS
    record = load_verdicts(EvidenceLog(demo.run_dir), JUDGE)[0]
    assert record["reason"] == "call_failed"
    openai_server.responder = content_judge
    summary = judge(demo)
    assert summary.tallies[JUDGE].judged == EXPECTED_CALLS
    assert summary.tallies[JUDGE].flip_rate == 0.0


def test_judges_side_by_side(demo: RunSpec, openai_server: OpenAIServer) -> None:
    def panel(body: dict[str, Any], n: int) -> Reply:
        if body["model"] == "test-judge":
            return content_judge(body, n)
        return Reply(content="VERDICT: 2")

    openai_server.responder = panel
    summary = judge(demo, [JUDGE, "openai/contrarian"])
    per_judge = Counter(b["model"] for b in openai_server.requests)
    assert per_judge == {"test-judge": EXPECTED_CALLS, "contrarian": EXPECTED_CALLS}
    assert summary.tallies[JUDGE].flip_rate == 0.0
    assert summary.tallies["openai/contrarian"].flip_rate == 1.0
    log = EvidenceLog(demo.run_dir)
    assert judges_in_log(log) == ["openai/contrarian", JUDGE]
    assert {r["judge"] for r in load_verdicts(log, "openai/contrarian")} == {"openai/contrarian"}

    # A third judge never reuses the others' verdicts; the first two owe nothing.
    judge(demo, [JUDGE, "openai/contrarian", "openai/third"])
    assert Counter(b["model"] for b in openai_server.requests)["third"] == EXPECTED_CALLS
    assert len(openai_server.requests) == 3 * EXPECTED_CALLS


def test_changed_answer_makes_its_verdicts_stale(
    demo: RunSpec, openai_server: OpenAIServer
) -> None:
    openai_server.responder = content_judge
    judge(demo)
    write_answers(demo, {("t1", "openai/model-a"): answer_text("t1", "openai/model-a", 1)})
    assert missing_verdicts(demo, JUDGE) == 4  # two pairs with model-a on t1, both orders
    judge(demo)
    assert len(openai_server.requests) == EXPECTED_CALLS + 4
    assert missing_verdicts(demo, JUDGE) == 0


def test_family_refusal_uses_every_model_of_the_run(
    demo: RunSpec, openai_server: OpenAIServer
) -> None:
    spec = replace(demo, models=(*demo.models, "anthropic/claude-y"))  # no answers yet
    with pytest.raises(KonkordError, match=r'"anthropic/claude-y".*"anthropic" family'):
        judge(spec, ["openrouter/anthropic/claude-x"])
    with pytest.raises(KonkordError, match="is also a ranked model"):
        judge(spec, ["openai/model-a"])
    assert openai_server.requests == []
    assert not EvidenceLog(demo.run_dir).path("verdicts").exists()


def test_no_judge_is_an_error(demo: RunSpec) -> None:
    with pytest.raises(KonkordError, match='run "demo" has no judge: give --judge MODEL'):
        asyncio.run(judge_run(replace(demo, judges=()), (), None))


def test_cli_prints_the_summary(demo: RunSpec, openai_server: OpenAIServer) -> None:
    openai_server.responder = always_one
    result = CliRunner().invoke(cli, ["judge", "--run", "demo", "--concurrency", "3"])
    assert result.exit_code == 0, result.output
    assert (
        f"judge {JUDGE}: judged {EXPECTED_CALLS}, cached 0, already recorded 0, failed 0"
        in result.stdout
    )
    assert "order-flip rate 100.0% (9 of 9 pairs)" in result.stdout
    assert "most flips: openai/model-a vs openai/model-b: 3 of 3" in result.stdout


def test_kill_9_mid_judge_then_resume(
    demo: RunSpec, openai_server: OpenAIServer, project: Path
) -> None:
    switch = HoldingJudge(5, content_judge)
    openai_server.responder = switch
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-m", "konkord.cli", "judge", "--run", "demo", "--concurrency", "3"],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    verdicts = EvidenceLog(demo.run_dir).path("verdicts")
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            lines = verdicts.read_bytes().count(b"\n") if verdicts.exists() else 0
            if lines >= switch.quick and len(openai_server.requests) > switch.quick:
                break
            assert child.poll() is None, "the judge finished before it could be killed"
            time.sleep(0.05)
        else:
            pytest.fail("the judge never reached the kill point")
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    finally:
        switch.release.set()
    recorded_before_kill = verdicts.read_bytes().count(b"\n")
    assert recorded_before_kill == switch.quick
    assert len(openai_server.requests) > switch.quick  # calls were in flight when killed

    summary = judge(demo)
    assert summary.tallies[JUDGE].already_recorded == switch.quick
    assert summary.tallies[JUDGE].judged == EXPECTED_CALLS - switch.quick
    assert sum(switch.paid.values()) == EXPECTED_CALLS  # every verdict paid once, none twice
    assert set(switch.paid.values()) == {1}
    log = EvidenceLog(demo.run_dir)
    keys = Counter(record_key("verdicts", r) for r in log.records("verdicts"))
    assert len(keys) == EXPECTED_CALLS and set(keys.values()) == {1}
    combined = combine_verdicts(load_verdicts(log, JUDGE))
    assert all(c.complete and not c.flipped for c in combined)
