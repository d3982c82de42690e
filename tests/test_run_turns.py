"""Conversations in `konkord run`: turn by turn against a real local server through litellm,
each model seeing its own earlier answers; a kill between turns resumes at the missing turn."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from conftest import FAKE_KEY
from openai_server import OpenAIServer, Reply

from konkord.configuration.suite import Suite, Task
from konkord.evidence.log import EvidenceLog
from konkord.providers.llm import CallSettings, ModelClient
from konkord.stages.run import (
    answer_key_hash,
    conversation_messages,
    current_answers,
    current_conversations,
    generate_answers,
)

KONKORD = Path(sys.executable).parent / "konkord"
SUITE = Suite(
    name="talk",
    rubric="Prefer correct answers.",
    tasks=(
        Task(id="poem", turns=("Write a poem about rain.", "Now as a limerick.")),  # type: ignore[arg-type]
        Task(id="plain", prompt="What is 2 + 2?"),
    ),
)
MODELS = ("openai/m-one", "openai/m-two")
TALK3 = Suite(
    name="talk",
    rubric="Prefer correct answers.",
    tasks=(
        Task(id="poem", turns=("Write a poem about rain.", "Now as a limerick.", "Now as a haiku.")),  # type: ignore[arg-type]
        Task(id="plain", prompt="What is 2 + 2?"),
    ),
)


def _reply(body: dict[str, Any], n: int) -> Reply:
    """A reply that names the model and the turn, so a later request shows whose answer it
    carries."""
    turn = sum(1 for m in body["messages"] if m["role"] == "user")
    return Reply(f"{body['model']} says turn {turn}")


def _run(server: OpenAIServer, **kwargs: Any) -> Any:
    client = ModelClient(
        concurrency=4, max_retries=1, backoff_base_s=0.01, timeout_s=5.0,
        cache_dir=Path(".konkord/cache"),
    )  # fmt: skip
    settings = CallSettings(api_base=server.url)
    return asyncio.run(
        generate_answers(EvidenceLog("runs/talk"), SUITE, MODELS, settings, client, **kwargs)
    )


def test_the_second_turn_carries_the_models_own_first_answer(
    project: Path, openai_server: OpenAIServer
) -> None:
    openai_server.responder = _reply
    summary = _run(openai_server)
    assert (summary.generated, summary.failed) == (6, 0)  # 2 models x (2 turns + 1 prompt)
    second = [b for b in openai_server.requests if len(b["messages"]) == 3]
    assert len(second) == 2
    for body in second:
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
        assert body["messages"][1]["content"] == f"{body['model']} says turn 1"  # its own
        assert body["messages"][2]["content"] == "Now as a limerick."
    log = EvidenceLog("runs/talk")
    chains = current_conversations(log, SUITE, CallSettings(api_base=openai_server.url))
    poem = chains[("poem", "openai/m-two")]
    assert [(r["turn"], r["text"]) for r in poem] == [(1, "m-two says turn 1"), (2, "m-two says turn 2")]
    assert poem[0]["settings_hash"] != poem[1]["settings_hash"]  # each keyed by what was sent
    assert "turn" not in chains[("plain", "openai/m-one")][0]  # a single prompt is unchanged
    # the single-turn view reads a conversation's first turn
    first = current_answers(log, SUITE, CallSettings(api_base=openai_server.url))
    assert first[("poem", "openai/m-one")]["text"] == "m-one says turn 1"

    before = len(openai_server.requests)
    again = _run(openai_server)
    assert len(openai_server.requests) == before and again.already_recorded == 4


def test_a_failed_turn_stops_the_conversation_and_a_rerun_resumes_there(
    project: Path, openai_server: OpenAIServer
) -> None:
    def fail_second_turn_of_one(body: dict[str, Any], n: int) -> Reply:
        if body["model"] == "m-one" and len(body["messages"]) == 3:
            return Reply(status=400, content="bad request")
        return _reply(body, n)

    openai_server.responder = fail_second_turn_of_one
    summary = _run(openai_server)
    assert summary.failed == 1 and "poem / openai/m-one (turn 2)" in summary.failures[0]
    openai_server.responder = _reply
    before = len(openai_server.requests)
    summary = _run(openai_server)
    asked = openai_server.requests[before:]
    assert [(b["model"], len(b["messages"])) for b in asked] == [("m-one", 3)]
    assert summary.generated == 1
    chains = current_conversations(
        EvidenceLog("runs/talk"), SUITE, CallSettings(api_base=openai_server.url)
    )
    assert [r["text"] for r in chains[("poem", "openai/m-one")]] == [
        "m-one says turn 1",
        "m-one says turn 2",
    ]


def test_a_failed_first_turn_asks_no_later_turn(project: Path, openai_server: OpenAIServer) -> None:
    def fail_first(body: dict[str, Any], n: int) -> Reply:
        if "rain" in body["messages"][0]["content"] and len(body["messages"]) == 1:
            return Reply(status=400, content="bad request")
        return _reply(body, n)

    openai_server.responder = fail_first
    summary = _run(openai_server)
    assert summary.failed == 2
    assert not [b for b in openai_server.requests if len(b["messages"]) == 3]


def test_kill_between_turns_resumes_at_turn_two_without_paying_for_turn_one(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    def hang_on_turn_two(body: dict[str, Any], n: int) -> Reply:
        if len(body["messages"]) == 3:
            return Reply("late", delay_s=30)
        return _reply(body, n)

    openai_server.responder = hang_on_turn_two
    (tmp_path / "talk.yaml").write_text(
        "name: talk\nrubric: Prefer correct answers.\ntasks:\n"
        "  - id: poem\n    turns:\n      - Write a poem about rain.\n      - Now as a limerick.\n"
    )
    env = {**os.environ, "OPENAI_API_KEY": FAKE_KEY, "KONKORD_BACKOFF_BASE": "0.01"}
    command = [
        str(KONKORD), "run", "--suite", "talk.yaml", "--models", ",".join(MODELS),
        "--api-base", openai_server.url,
    ]  # fmt: skip
    log = tmp_path / "runs" / "talk" / "answers.jsonl"
    first = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        waiting = [b for b in openai_server.requests if len(b["messages"]) == 3]
        if len(waiting) == 2:
            break
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.wait()
    recorded = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted((r["model"], r["turn"]) for r in recorded) == [
        ("openai/m-one", 1),
        ("openai/m-two", 1),
    ]

    openai_server.responder = _reply
    before = len(openai_server.requests)
    second = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    asked = openai_server.requests[before:]
    assert sorted((b["model"], len(b["messages"])) for b in asked) == [("m-one", 3), ("m-two", 3)]
    for body in asked:
        assert body["messages"][1]["content"] == f"{body['model']} says turn 1"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted((r["model"], r["turn"]) for r in records) == [
        ("openai/m-one", 1), ("openai/m-one", 2), ("openai/m-two", 1), ("openai/m-two", 2),
    ]  # fmt: skip


def test_a_dry_run_counts_every_turn_still_to_ask(project: Path, openai_server: OpenAIServer) -> None:
    from click.testing import CliRunner

    from konkord.cli import cli

    openai_server.responder = _reply
    (project / "talk.yaml").write_text(
        "name: talk\nrubric: Prefer correct answers.\ntasks:\n"
        "  - id: poem\n    turns:\n      - Write a poem about rain.\n      - Now as a limerick.\n"
        "      - Now as a haiku.\n  - id: plain\n    prompt: What is 2 + 2?\n"
    )
    base = ["run", "--suite", "talk.yaml", "--models", ",".join(MODELS), "--api-base",
            openai_server.url]  # fmt: skip
    result = CliRunner().invoke(cli, [*base, "--dry-run"])
    assert result.exit_code == 0, result.output
    assert openai_server.requests == []
    for model in MODELS:
        assert f"model {model}: 4 calls, " in result.output  # 3 turns + 1 prompt
    # a killed conversation owes only its missing turns
    EvidenceLog("runs/talk").append(
        "answers",
        {"kind": "answer", "task_id": "poem", "turn": 1, "model": MODELS[0],
         "settings_hash": answer_key_hash(
             conversation_messages(TALK3, TALK3.tasks[0], 1, []), CallSettings()),
         "text": "rain", "error": None, "created_at": "2026-12-02T00:00:00+00:00"},
    )  # fmt: skip
    result = CliRunner().invoke(cli, [*base, "--dry-run"])
    assert f"model {MODELS[0]}: 3 calls, " in result.output, result.output
    assert f"model {MODELS[1]}: 4 calls, " in result.output
