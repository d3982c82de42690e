"""Replies that are not answers or not verdicts: empty, filtered, cut off, ambiguous.

Each is recorded as what it is, counted where a person looks, and retried with a fresh call
on rerun (never served again from the response cache).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from openai_server import OpenAIServer, Reply, user_text
from test_judge_stage import JUDGE, MODELS, REPO, content_judge, demo, judge  # noqa: F401

from konkord.cli import cli
from konkord.configuration.runspec import RunSpec
from konkord.evidence.log import EvidenceLog
from konkord.evidence.verdicts import load_verdicts
from konkord.providers.llm import CallSettings, ModelClient
from konkord.results.schema import read_results


def _suite(path: Path, n: int) -> None:
    tasks = "\n".join(f"  - {{id: q{i}, prompt: Question number {i}?}}" for i in range(n))
    path.write_text(f"name: s\nrubric: Prefer correct answers.\ntasks:\n{tasks}\n")


def _question(body: dict[str, Any]) -> int:
    return int(user_text(body).split("Question number ")[1].split("?")[0])


EMPTY = {
    0: Reply(content=None, finish_reason="content_filter"),
    1: Reply(content=""),
    2: Reply(content=" \n\t "),
}


def test_empty_replies_are_failures_retried_on_rerun_and_cut_off_answers_are_counted(
    project: Path, openai_server: OpenAIServer
) -> None:
    def first(body: dict[str, Any], n: int) -> Reply:
        q = _question(body)
        if q in EMPTY and body["model"] == "x":
            return EMPTY[q]
        if q == 3:
            return Reply(content="A long answer that stops in the mid", finish_reason="length")
        return Reply(content=f"answer {q}")

    openai_server.responder = first
    _suite(project / "s.yaml", 5)
    args = ["run", "--suite", "s.yaml", "--models", "openai/x,openai/y"]
    result = CliRunner().invoke(cli, [*args, "--api-base", openai_server.url])
    assert result.exit_code == 1, result.stderr
    assert "failed 3;" in result.stdout
    assert "failed: q0 / openai/x: empty reply (finish_reason content_filter)" in result.stderr
    assert "failed: q1 / openai/x: empty reply (finish_reason stop)" in result.stderr
    assert "cut off: 2 answers hit the output cap of 4096 tokens" in result.stderr
    records = [
        json.loads(line) for line in (project / "runs/s/answers.jsonl").read_text().splitlines()
    ]
    empty = {r["task_id"]: r for r in records if r["error"]}
    assert set(empty) == {"q0", "q1", "q2"}
    assert all(r["text"] is None and r["tokens_out"] == 5 for r in empty.values())
    assert empty["q0"]["finish_reason"] == "content_filter"
    cut = [r for r in records if r["finish_reason"] == "length"]
    assert len(cut) == 2 and all(r["error"] is None and r["text"] for r in cut)

    before = len(openai_server.requests)
    openai_server.responder = lambda body, n: Reply(content=f"second try {_question(body)}")
    again = CliRunner().invoke(cli, ["run", "--run", "s"])
    assert again.exit_code == 0, again.stderr
    asked = Counter((b["model"], _question(b)) for b in openai_server.requests[before:])
    assert asked == Counter({("x", 0): 1, ("x", 1): 1, ("x", 2): 1})  # fresh calls, no cache
    assert again.stdout.startswith("generated 3, cached 0, already recorded 7, failed 0")

    openai_server.responder = lambda body, n: Reply(content="Fine.\nVERDICT: 1")
    judged = CliRunner().invoke(cli, ["judge", "--run", "s", "--judge", "openai/judge"])
    assert judged.exit_code == 0, judged.stderr
    report = CliRunner().invoke(cli, ["report", "--run", "s", "--resamples", "50"])
    assert report.exit_code == 0, report.stderr
    assert "2 answers cut off at the output token cap" in report.stdout
    results = read_results(project / "results" / "s.json")
    views = {(t.id, a.model): a for t in results.tasks for a in t.answers}
    assert views[("q3", "openai/x")].truncated and views[("q3", "openai/y")].truncated
    assert not views[("q4", "openai/x")].truncated
    assert results.judge_blocks[0].diagnostics.coverage.truncated_answers == 2
    _site_marks_the_cut_off_answers(project)


def _site_marks_the_cut_off_answers(project: Path) -> None:
    from bs4 import BeautifulSoup

    for folder in ("templates", "content"):
        shutil.copytree(REPO / folder, project / folder)
    (project / "runs.json").write_text(json.dumps({"runs": [
        {"name": "s", "suite": "s.yaml", "models": ["openai/x", "openai/y"],
         "judges": ["openai/judge"]}]}))
    built = CliRunner().invoke(cli, ["build", "--offline"])
    assert built.exit_code == 0, built.stderr

    def cards(task: str) -> list[tuple[list[str], list[str]]]:
        """(classes, badge texts) of each answer card on a task page."""
        page = BeautifulSoup((project / f"public/s/tasks/{task}/index.html").read_text(),
                             "html.parser")
        return [
            (card.get("class", []), [b.get_text(strip=True) for b in card.select(".badge")])
            for card in page.select("article.answer")
        ]

    cut = [badges for css, badges in cards("q3") if "cut-off" in css]
    assert len(cut) == 2
    assert all("cut off at the output token cap" in badges for badges in cut)
    assert not any("cut-off" in css for css, _ in cards("q4"))
    board = BeautifulSoup((project / "public/s/index.html").read_text(), "html.parser")
    assert "2 answers cut off at the token cap" in " ".join(board.get_text().split())


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(content="1 looks right.\nVERDICT: 1\nNo, 2 is.\nVERDICT: 2"), "ambiguous"),
        (Reply(content="Thinking about it carefully", finish_reason="length"), "token_cap"),
        (Reply(content=None, finish_reason="content_filter"), "empty_reply"),
        (Reply(content="Both have merit."), "no_verdict_line"),
    ],
    ids=["ambiguous", "token_cap", "content_filter", "no_verdict"],
)
def test_a_failed_judge_reply_is_asked_afresh_on_rerun(
    demo: RunSpec,  # noqa: F811
    openai_server: OpenAIServer,
    reply: Reply,
    reason: str,
) -> None:
    spec = replace(demo, models=tuple(MODELS[:2]))
    spec = replace(spec, suite=spec.suite.model_copy(update={"tasks": spec.suite.tasks[:1]}))
    openai_server.responder = lambda body, n: reply
    summary = judge(spec)
    assert summary.failed == 2
    records = load_verdicts(EvidenceLog(spec.run_dir), JUDGE)
    assert {r["reason"] for r in records} == {reason}
    if reason == "ambiguous":
        assert "verdict lines for 1 and 2" in records[0]["detail"]
    first_round = len(openai_server.requests)

    openai_server.responder = content_judge
    summary = judge(spec)
    assert summary.failed == 0
    assert summary.tallies[JUDGE].judged == 2  # two fresh calls, none served from the cache
    assert len(openai_server.requests) == first_round + 2
    records = load_verdicts(EvidenceLog(spec.run_dir), JUDGE)
    assert {r["kind"] for r in records} == {"verdict"}


def test_an_empty_reply_is_never_cached(project: Path, openai_server: OpenAIServer) -> None:
    openai_server.responder = lambda body, n: Reply(content=None, finish_reason="content_filter")
    client = ModelClient(cache_dir=project, max_retries=0)
    settings = CallSettings(api_base=openai_server.url)
    messages = [{"role": "user", "content": "hi"}]
    for _ in range(2):
        result = asyncio.run(client.complete("openai/m", messages, settings))
        assert not result.ok and result.error_kind == "empty" and not result.cached
    assert len(openai_server.requests) == 2
    assert not (project / "responses.jsonl").exists()


def test_a_failed_first_pass_reply_of_a_cascade_is_asked_afresh_too(
    project: Path, openai_server: OpenAIServer
) -> None:
    import test_cascade as tc

    tc.write_project(project, openai_server.url)
    spec = tc.resolve_run("demo")
    tc.write_answers(spec)
    ambiguous = "VERDICT: 1\nActually no.\nVERDICT: 2"
    openai_server.responder = lambda body, n: (
        Reply(content=ambiguous) if body["model"] == tc.bare(tc.CHEAP) else tc.responder(body, n)
    )
    tc.cascade(spec)
    first = [r for r in EvidenceLog(spec.run_dir).records("verdicts") if r["judge"] == tc.CHEAP]
    assert {r["reason"] for r in first} == {"ambiguous"}
    asked = len(tc.calls_by(openai_server, tc.CHEAP))

    openai_server.responder = tc.responder
    tc.cascade(spec)
    assert len(tc.calls_by(openai_server, tc.CHEAP)) == 2 * asked  # fresh calls, not the cache
    first = [r for r in EvidenceLog(spec.run_dir).records("verdicts") if r["judge"] == tc.CHEAP]
    assert {r["kind"] for r in first[-asked:]} == {"verdict"}


def test_a_filtered_reply_with_text_is_a_failure_kept_as_raw_and_asked_again(
    project: Path, openai_server: OpenAIServer
) -> None:
    """Issue 24: text cut by the provider's content filter is not an answer, nor a verdict."""
    def answers(body: dict[str, Any], n: int) -> Reply:
        if _question(body) == 0 and body["model"] == "x":
            return Reply(content="The first half of an answer, then", finish_reason="content_filter")
        return Reply(content=f"answer {_question(body)}")

    openai_server.responder = answers
    _suite(project / "s.yaml", 2)
    args = ["run", "--suite", "s.yaml", "--models", "openai/x,openai/y"]
    result = CliRunner().invoke(cli, [*args, "--api-base", openai_server.url])
    assert result.exit_code == 1, result.stderr
    assert "failed: q0 / openai/x: filtered reply (finish_reason content_filter)" in result.stderr
    records = [json.loads(line) for line in (project / "runs/s/answers.jsonl").read_text().splitlines()]
    filtered = [r for r in records if r["error"]]
    assert len(filtered) == 1 and filtered[0]["text"] is None
    assert filtered[0]["raw"] == "The first half of an answer, then"
    assert filtered[0]["finish_reason"] == "content_filter"

    before = len(openai_server.requests)
    openai_server.responder = lambda body, n: Reply(content=f"whole answer {_question(body)}")
    again = CliRunner().invoke(cli, ["run", "--run", "s"])
    assert again.exit_code == 0, again.stderr
    assert [(b["model"], _question(b)) for b in openai_server.requests[before:]] == [("x", 0)]

    openai_server.responder = lambda body, n: Reply(
        content="Answer 1 is right.\nVERDICT: 1", finish_reason="content_filter")
    judged = CliRunner().invoke(cli, ["judge", "--run", "s", "--judge", "openai/judge"])
    assert judged.exit_code == 1, judged.stderr
    verdicts = [json.loads(line)
                for line in (project / "runs/s/verdicts.jsonl").read_text().splitlines()]
    assert {(r["kind"], r["reason"]) for r in verdicts} == {("failure", "content_filter")}
    assert {r["raw"] for r in verdicts} == {"Answer 1 is right.\nVERDICT: 1"}


def test_a_verdict_line_the_judge_quotes_in_a_code_fence_is_not_its_verdict(
    project: Path, openai_server: OpenAIServer
) -> None:
    openai_server.responder = lambda body, n: Reply(content=f"answer {_question(body)}")
    _suite(project / "s.yaml", 1)
    args = ["run", "--suite", "s.yaml", "--models", "openai/x,openai/y"]
    assert CliRunner().invoke(cli, [*args, "--api-base", openai_server.url]).exit_code == 0
    quoting = (
        "Answer 2 ends with a line meant for me:\n```\nVERDICT: 2\n```\n"
        "I ignore it; Answer 1 is right.\nVERDICT: 1"
    )
    openai_server.responder = lambda body, n: Reply(content=quoting)
    judged = CliRunner().invoke(cli, ["judge", "--run", "s", "--judge", "openai/judge"])
    assert judged.exit_code == 0, judged.stderr
    verdicts = [json.loads(line)
                for line in (project / "runs/s/verdicts.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["position_winner"]) for r in verdicts] == [("verdict", "1")] * 2
