"""Judging conversations: a verdict per turn, the judge shown both conversations up to that
turn (each model's own earlier replies), blind, both orders; turns cluster under their task."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from openai_server import OpenAIServer, Reply

from konkord.cli import cli
from konkord.configuration.judge_frame import compose_system_prompt, split_framed_answers
from konkord.configuration.suite import Suite, Task
from konkord.configuration.turns import conversation_count, split_unit, task_clusters, unit_id
from konkord.evidence.log import EvidenceLog

JUDGE = "openai/test-judge"
MODELS = ["openai/m-one", "openai/m-two"]


def _respond(body: dict[str, Any], n: int) -> Reply:
    if body["model"] == "test-judge":
        return Reply("Answer 1 follows the conversation.\nVERDICT: 1")
    turn = sum(1 for m in body["messages"] if m["role"] == "user")
    return Reply(f"{body['model']} says turn {turn}")


def _project(root: Path, server: OpenAIServer) -> None:
    (root / "talk.yaml").write_text(
        "name: talk\nrubric: Prefer correct answers.\ntasks:\n"
        "  - id: poem\n    turns:\n      - Write a poem about rain.\n"
        "      - prompt: Now as a limerick.\n        reference: A limerick about rain.\n"
        "  - id: plain\n    prompt: What is 2 + 2?\n"
    )
    run = {"name": "talk", "suite": "talk.yaml", "models": MODELS, "judges": [JUDGE],
           "api_base": server.url}  # fmt: skip
    (root / "runs.json").write_text(json.dumps({"runs": [run]}))


def test_a_verdict_per_turn_on_both_conversations_in_both_orders(
    project: Path, openai_server: OpenAIServer
) -> None:
    openai_server.responder = _respond
    _project(project, openai_server)
    runner = CliRunner()
    assert runner.invoke(cli, ["run", "--run", "talk"]).exit_code == 0
    result = runner.invoke(cli, ["judge", "--run", "talk"])
    assert result.exit_code == 0, result.output
    asked = [b for b in openai_server.requests if b["model"] == "test-judge"]
    assert len(asked) == 6  # (2 turns + 1 prompt) x 2 orders, one pair
    second = [b for b in asked if "Now as a limerick." in b["messages"][1]["content"]]
    assert len(second) == 2
    system = second[0]["messages"][0]["content"]
    assert "Some tasks are conversations" in system
    for body in second:
        message = body["messages"][1]["content"]
        answer_1, answer_2 = split_framed_answers(message)  # the final replies, fenced as ever
        assert {answer_1, answer_2} == {"m-one says turn 2", "m-two says turn 2"}
        # the earlier turn: the same user message, each model's own reply, in the shown order
        first_1 = answer_1.replace("turn 2", "turn 1")
        first_2 = answer_2.replace("turn 2", "turn 1")
        assert "Write a poem about rain." in message
        assert message.index(first_1) < message.index(first_2) < message.index("## Task")
        assert "m-one" not in message.replace("m-one says", "")  # blind: no model names
        assert "## Reference answer\nA limerick about rain." in message  # the turn's own
    verdicts = EvidenceLog("runs/talk").records("verdicts")
    keys = sorted({(r["task_id"], r["order"]) for r in verdicts})
    assert keys == [
        ("plain", "ab"), ("plain", "ba"), ("poem-t1", "ab"), ("poem-t1", "ba"),
        ("poem-t2", "ab"), ("poem-t2", "ba"),
    ]  # fmt: skip
    before = len(openai_server.requests)
    assert runner.invoke(cli, ["judge", "--run", "talk"]).exit_code == 0
    assert len(openai_server.requests) == before  # nothing asked twice
    report = runner.invoke(cli, ["report", "--run", "talk"])  # turns rank within their task
    assert report.exit_code == 0, report.output


def test_the_frame_covers_the_multi_turn_template_only_where_a_suite_has_turns() -> None:
    plain = Suite(name="s", rubric="Be right.", tasks=(Task(id="a", prompt="Q?"),))
    talk = Suite(
        name="s",
        rubric="Be right.",
        tasks=(Task(id="a", prompt="Q?"), Task(id="b", turns=("One?", "Two?"))),  # type: ignore[arg-type]
    )
    assert "conversations" not in compose_system_prompt(plain)  # old frame hashes stand
    assert "Some tasks are conversations" in compose_system_prompt(talk)


def test_turns_are_comparisons_within_their_task_for_the_bootstrap() -> None:
    index = task_clusters(["poem", "plain"])
    assert index[unit_id("poem", 2)] == index["poem"] == 0
    assert index["plain"] == 1
    assert split_unit("poem-t2") == ("poem", 2) and split_unit("plain") == ("plain", None)
    with pytest.raises(KeyError):
        index["other-t1"]
    # an import's tasks that are one question's turns (MT-Bench) share the question's index
    imported = task_clusters(["q81-t1", "q81-t2", "q82-t1", "q82-t2", "plain"])
    assert [imported[t] for t in ("q81-t1", "q81-t2", "q82-t1", "q82-t2", "plain")] == [
        0, 0, 1, 1, 2
    ]
    assert conversation_count(["q81-t1", "q81-t2", "q82-t1", "plain"]) == 3
