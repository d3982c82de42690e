"""--max-cost, --dry-run and kill -9 under an adaptive design: the cap counts the calls of
every round, a rerun after the cap or a kill mid-round goes on with the same rounds and pays
for nothing twice, a dry run says what each round may call, and the site states the design."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner
from conftest import REPO
from openai_server import OpenAIServer, Reply

from konkord.cli import cli
from konkord.configuration.judge_frame import split_framed_answers
from konkord.configuration.runspec import resolve_run
from konkord.evidence.log import EvidenceLog, now_iso
from konkord.providers.budget import count_tokens
from konkord.stages.build.build import build_site
from konkord.stages.judge.judge import calls_to_make, judge_messages
from konkord.stages.run import answer_key_hash, answer_messages

MODELS = [f"openai/model-{c}" for c in "abcde"]
JUDGE = "openai/test-judge"
TASKS = 40
BUDGET = 200  # judge calls: 100 task pairs of the 400 there are
MAX_TOKENS = 100
PRICE_IN, PRICE_OUT = 1e-6, 2e-6


def write_run(root: Path, api_base: str) -> None:
    """Five models whose answers carry a quality that varies from task to task, so that after
    the balanced start some neighbours are still unseparated and adaptive rounds follow."""
    tasks = "\n".join(f"  - id: t{k}\n    prompt: Solve problem {k}." for k in range(TASKS))
    (root / "suite.yaml").write_text(
        f"name: s\nrubric: Prefer the higher quality.\ntasks:\n{tasks}\n"
    )
    prices = {m: {"input_per_million": 1, "output_per_million": 2} for m in [*MODELS, JUDGE]}
    run = {
        "name": "s", "suite": "suite.yaml", "models": MODELS, "judges": [JUDGE],
        "api_base": api_base, "prices": prices, "design": {"adaptive": {"budget": BUDGET}},
    }  # fmt: skip
    (root / "runs.json").write_text(json.dumps({"runs": [run]}, indent=2))
    spec = resolve_run("s")
    draw = random.Random(7)
    records = []
    for task in spec.suite.tasks:
        settings_hash = answer_key_hash(answer_messages(spec.suite, task), spec.settings)
        for rank, model in enumerate(MODELS):
            quality = 100 - 12 * rank + draw.randint(0, 30)
            records.append({
                "kind": "answer", "task_id": task.id, "model": model,
                "settings_hash": settings_hash, "text": f"Answer {rank} to {task.id}.\nquality={quality}",
                "error": None, "finish_reason": "stop", "created_at": now_iso(),
            })  # fmt: skip
    EvidenceLog(spec.run_dir).append_many("answers", records)


def judge_by_quality(tokens_in: int) -> Any:
    """The higher quality wins; every reply as long as allowed, so each call costs about its
    upper estimate and the cap is met exactly where the test expects."""

    def reply(body: dict[str, Any], n: int) -> Reply:
        first, second = split_framed_answers(body["messages"][1]["content"])
        q1, q2 = (int(re.search(r"quality=(\d+)", t).group(1)) for t in (first, second))  # type: ignore[union-attr]
        verdict = "1" if q1 > q2 else "2" if q2 > q1 else "TIE"
        return Reply(
            content=f"Answer {verdict} is better.\nVERDICT: {verdict}",
            prompt_tokens=tokens_in,
            completion_tokens=MAX_TOKENS,
        )

    return reply


def judge_cli(*extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli, ["judge", "--run", "s", "--max-tokens", str(MAX_TOKENS), *extra]
    )
    return result.exit_code, result.output


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def run(project: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KONKORD_BACKOFF_BASE", "0.01")
    write_run(project, openai_server.url)
    return project / "runs" / "s"


def test_the_cap_counts_every_round_and_a_rerun_pays_nothing_twice(
    run: Path, openai_server: OpenAIServer
) -> None:
    spec = resolve_run("s")
    first_call = calls_to_make(spec, (JUDGE,))[0]
    tokens_in = count_tokens(JUDGE, judge_messages(spec, first_call))
    upper = tokens_in * PRICE_IN + MAX_TOKENS * PRICE_OUT  # what one call may cost
    openai_server.responder = judge_by_quality(tokens_in)
    start_calls = len(calls_to_make(spec, (JUDGE,)))
    round_calls = 2 * 10  # round_share 0.1 of 100 task pairs, both orders
    # Room for the start and one and a half rounds: the cap has to hold across rounds.
    cap = (start_calls + round_calls * 1.5) * upper
    code, output = judge_cli("--max-cost", f"{cap}", "--concurrency", "1")
    assert code == 1, output
    assert f"stopped at --max-cost ${cap:g}" in output
    verdicts = lines(run / "verdicts.jsonl")
    rounds = lines(run / "designs.jsonl")
    assert len(rounds) >= 3  # the start, one round judged in full, one cut by the cap
    assert start_calls + round_calls < len(verdicts) < start_calls + 2 * round_calls
    assert sum(v["cost_usd"] for v in verdicts) <= cap + 1e-12
    assert len(openai_server.requests) == len(verdicts)
    owed = {tuple(row) for r in rounds for row in r["rows"]}
    assert {(v["task_id"], v["model_a"], v["model_b"]) for v in verdicts} <= owed

    code, output = judge_cli("--max-cost", "1")
    assert code == 0, output
    again = lines(run / "designs.jsonl")
    assert again[: len(rounds)] == rounds  # the rounds chosen before the cap, unchanged
    assert again[-1]["stop"]
    verdicts = lines(run / "verdicts.jsonl")
    assert len(verdicts) == BUDGET  # the whole budget, in all rounds
    prompts = [r["messages"][1]["content"] for r in openai_server.requests]
    assert len(prompts) == len(set(prompts)) == BUDGET  # nothing asked twice
    assert sum(v["cost_usd"] for v in verdicts) <= BUDGET * upper + 1e-12

    # the design is stated on the leaderboard and the methodology page
    for folder in ("templates", "content"):
        shutil.copytree(REPO / folder, folder)
    build_site(Path("public"), offline=True, runs_file=Path("runs.json"))
    board = BeautifulSoup(Path("public/s/index.html").read_text(), "html.parser")
    judged = "Judged 100 of 400 possible comparisons (every pair of models on every task): 25%."
    assert any(judged in c.get_text(" ") for c in board.select("caption"))
    method = BeautifulSoup(Path("public/s/methodology/index.html").read_text(), "html.parser")
    sentences = [li.get_text(" ") for li in method.select("li")]
    stated = f"Pair design: adaptive: a budget of {BUDGET} judge calls (seed 0). {judged}"
    assert stated in sentences
    chosen = len(again) - 1
    assert any(f"A balanced random start, then {chosen} round(s)" in s for s in sentences)


def test_a_dry_run_says_the_calls_of_each_round(run: Path, openai_server: OpenAIServer) -> None:
    code, output = judge_cli("--dry-run")
    assert code == 0, output
    assert openai_server.requests == []
    spec = resolve_run("s")
    start = len(calls_to_make(spec, (JUDGE,)))
    assert start == 2 * TASKS  # K = 1 pair per task: 70% of 100 task pairs, over 40 tasks
    line = (
        f"design adaptive: a budget of {BUDGET} judge calls (seed 0): round 0: {start} calls; "
        f"then up to 6 round(s) of up to 20 calls each; at most {BUDGET} calls across all rounds"
    )
    assert line in output
    assert not (run / "designs.jsonl").exists()
    # after a capped run, the rounds chosen are listed one by one
    tokens_in = count_tokens(JUDGE, judge_messages(spec, calls_to_make(spec, (JUDGE,))[0]))
    openai_server.responder = judge_by_quality(tokens_in)
    upper = tokens_in * PRICE_IN + MAX_TOKENS * PRICE_OUT
    code, output = judge_cli("--max-cost", f"{(start + 30) * upper}", "--concurrency", "1")
    assert code == 1, output
    code, output = judge_cli("--dry-run")
    assert code == 0, output
    assert re.search(
        rf"\(seed 0\): round 0: {start} calls; round 1: 20 calls; round 2: 20 calls; then up "
        rf"to [1-4] round\(s\) of up to 20 calls each; at most {BUDGET} calls across all rounds",
        output,
    ), output


def test_kill_9_mid_round_and_the_rerun_goes_on_with_the_same_rounds(
    run: Path, openai_server: OpenAIServer, project: Path
) -> None:
    spec = resolve_run("s")
    start_calls = len(calls_to_make(spec, (JUDGE,)))
    tokens_in = count_tokens(JUDGE, judge_messages(spec, calls_to_make(spec, (JUDGE,))[0]))
    quick = judge_by_quality(tokens_in)

    def slow(body: dict[str, Any], n: int) -> Reply:
        reply = quick(body, n)
        reply.delay_s = 0.05
        return reply

    openai_server.responder = slow
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "konkord.cli", "judge", "--run", "s", "--concurrency", "1"]
    child = subprocess.Popen(
        command, cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    designs, verdicts = run / "designs.jsonl", run / "verdicts.jsonl"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            made = verdicts.read_bytes().count(b"\n") if verdicts.exists() else 0
            if made >= start_calls + 4 and b'"round": 1' in designs.read_bytes():
                break  # round 1 chosen and partly judged
            if child.poll() is not None:
                pytest.fail(f"the judge ended early: {child.stderr.read().decode()}")  # type: ignore[union-attr]
            time.sleep(0.01)
        else:
            pytest.fail("round 1 was never reached")
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    before = lines(designs)
    made = lines(verdicts)
    assert start_calls < len(made) < BUDGET
    openai_server.responder = quick
    code, output = judge_cli()
    assert code == 0, output
    after = lines(designs)
    assert after[: len(before)] == before  # the rounds chosen before the kill, unchanged
    assert after[-1]["stop"]
    done = lines(verdicts)
    owed = {tuple(row) for r in after for row in r["rows"]}
    assert {(v["task_id"], v["model_a"], v["model_b"]) for v in done} == owed
    assert len(done) == BUDGET
    prompts = Counter(r["messages"][1]["content"] for r in openai_server.requests)
    assert len(prompts) == BUDGET
    assert sum(prompts.values()) - BUDGET <= 1  # at most the one call in flight at the kill
