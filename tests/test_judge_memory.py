"""Memory bounded by design in the judge stage: a call waiting for its batch is a key and a tag
in the door, not a coroutine; live calls go through as many coroutines as the concurrency; the
closing tally streams the verdict log instead of holding it; the same verdicts and tallies as
before come out."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from openai_batch_server import BatchServer
from openai_server import OpenAIServer
from test_batch import (
    CALLS,
    batch_client,
    batch_server,  # noqa: F401 (a fixture, by its name)
)
from test_batch import JUDGE as BATCH_JUDGE
from test_batch import demo as batch_demo_fixture  # noqa: F401 (a fixture)
from test_judge_stage import EXPECTED_CALLS, JUDGE, content_judge
from test_judge_stage import demo as demo_fixture  # noqa: F401 (a fixture)

import konkord.providers.batch_run as batch_run_module
import konkord.providers.replies as replies_module
from konkord.configuration.runspec import RunSpec
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog, now_iso
from konkord.evidence.stream import fold_stream
from konkord.evidence.verdicts import combine_verdicts, load_verdicts
from konkord.providers.llm import ModelClient
from konkord.stages.judge.judge import judge_run

pytestmark = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning",
    "ignore:coroutine 'connect_tcp.<locals>.try_connect' was never awaited:RuntimeWarning",
)


def test_calls_waiting_for_a_batch_hold_no_coroutine_each(
    request: pytest.FixtureRequest,
) -> None:
    spec: RunSpec = request.getfixturevalue("batch_demo_fixture")
    server: BatchServer = request.getfixturevalue("batch_server")
    tasks_while_waiting: list[int] = []

    def on_status(text: str) -> None:
        if "submitted" in text or "in_progress" in text:
            tasks_while_waiting.append(len(asyncio.all_tasks()))

    client = batch_client(spec, on_status=on_status)
    summary = asyncio.run(judge_run(spec, (BATCH_JUDGE,), client, concurrency=10_000))

    assert summary.tallies[BATCH_JUDGE].judged == CALLS == len(server.requests)
    assert tasks_while_waiting
    # The stage, the batch's own task and the spool's timer: never one per waiting call
    # (before, each of the 24 calls waited in a coroutine of its own).
    assert max(tasks_while_waiting) <= 4 < CALLS


def test_live_calls_go_through_as_many_coroutines_as_the_concurrency(
    request: pytest.FixtureRequest,
) -> None:
    spec: RunSpec = request.getfixturevalue("demo_fixture")
    server: OpenAIServer = request.getfixturevalue("openai_server")
    server.responder = content_judge
    seen: list[int] = []

    def on_progress(done: int, total: int) -> None:
        # the stage's own coroutines (litellm keeps tasks of its own for its logging)
        names = [task.get_coro().__qualname__ for task in asyncio.all_tasks()]  # type: ignore[union-attr]
        seen.append(sum("judge" in name for name in names))

    client = ModelClient(concurrency=2, max_retries=0, prices=spec.prices)
    summary = asyncio.run(
        judge_run(spec, (JUDGE,), client, concurrency=2, on_progress=on_progress)
    )

    assert summary.tallies[JUDGE].judged == EXPECTED_CALLS == 18
    # the stage, two workers and the call each is making (before: a coroutine per call)
    assert 3 <= max(seen) <= 1 + 2 * 2 < EXPECTED_CALLS


def test_the_closing_tally_is_the_one_read_from_the_whole_log(
    request: pytest.FixtureRequest,
) -> None:
    spec: RunSpec = request.getfixturevalue("demo_fixture")
    server: OpenAIServer = request.getfixturevalue("openai_server")
    server.responder = content_judge
    client = ModelClient(concurrency=3, max_retries=0, prices=spec.prices)
    log = EvidenceLog(spec.run_dir)
    first = asyncio.run(judge_run(spec, (JUDGE,), client, concurrency=3))
    # A later record supersedes: one pair's "ba" becomes a tie (a flip), one "ab" a failure.
    records = [r for r in log.records("verdicts") if r["kind"] == "verdict"]
    ba = next(r for r in records if r["order"] == "ba" and r["winner"] != "tie")
    ab = next(r for r in records if r["order"] == "ab" and r["task_id"] != ba["task_id"])
    log.append_many("verdicts", [
        {**ba, "winner": "tie", "position_winner": "tie", "created_at": now_iso()},
        {**{k: v for k, v in ab.items() if k not in ("winner", "position_winner", "rationale")},
         "kind": "failure", "reason": "no_verdict_line", "detail": "x", "created_at": now_iso()},
    ])
    again = asyncio.run(judge_run(spec, (JUDGE,), client, concurrency=3))

    combined = combine_verdicts(load_verdicts(log, JUDGE))
    complete = [c for c in combined if c.complete]
    tally = again.tallies[JUDGE]
    assert tally.already_recorded == EXPECTED_CALLS - 1 and tally.judged == 1  # the failure
    assert tally.complete_pairs == len(complete) == EXPECTED_CALLS // 2
    assert tally.flipped_pairs == sum(c.flipped for c in complete)
    assert tally.flipped_pairs == first.tallies[JUDGE].flipped_pairs + 1
    assert tally.incomplete_pairs == 0


def folded(log: EvidenceLog, stream: str) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    fold_stream(log, stream, out.extend)
    return out


def test_a_folded_stream_gives_every_record_keeps_none_and_names_a_bad_line(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import konkord.evidence.parse as evidence_parse

    monkeypatch.setattr(evidence_parse, "CHUNK_BYTES", 333)  # chunks cut records anywhere
    log = EvidenceLog(project / "runs" / "demo")
    records = [
        {"kind": "label", "task_id": f"t{i}", "model_a": "a", "model_b": "b",
         "labeller": "ana", "winner": "a" if i % 2 else "tie", "created_at": now_iso(),
         "note": "é" * (i % 7)}
        for i in range(500)
    ]
    log.append_many("labels", records)
    chunks: list[int] = []
    fold_stream(log, "labels", lambda got: chunks.append(len(got)))
    assert sum(chunks) == 500 and len(chunks) > 100  # handed on a chunk at a time
    assert folded(log, "labels") == records
    assert folded(EvidenceLog(project / "runs" / "none"), "labels") == []

    path = log.path("labels")
    lines = path.read_bytes().splitlines(keepends=True)
    lines[411] = b'{"kind": "label", "task_id": 7,\n'
    path.write_bytes(b"".join(lines))
    with pytest.raises(KonkordError, match=r"labels\.jsonl:412: "):
        folded(log, "labels")


def test_a_folded_stream_with_a_torn_last_line_warns_and_skips_it(project: Path) -> None:
    log = EvidenceLog(project / "runs" / "demo")
    record = {"kind": "label", "task_id": "t1", "model_a": "a", "model_b": "b",
              "labeller": "ana", "winner": "a", "created_at": now_iso()}
    log.append_many("labels", [record] * 3)
    with open(log.path("labels"), "ab") as handle:
        handle.write(b'{"kind": "label", "task_')
    with pytest.warns(UserWarning, match="the last line is incomplete"):
        got = folded(log, "labels")
    assert got == [record] * 3


def test_batches_landing_together_wait_for_the_stage_to_take_their_replies(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six batches collected at once hand back at most `limit` replies, plus one pace of
    lines per batch, before the stage takes them: the replies held do not grow with the
    number of batches (at 380,000 calls, eight batches' replies piled up: 1.7 KB a call)."""
    spec: RunSpec = request.getfixturevalue("batch_demo_fixture")
    server: BatchServer = request.getfixturevalue("batch_server")
    monkeypatch.setattr(replies_module, "READY_LIMIT", 2)
    monkeypatch.setattr(batch_run_module, "PACE_LINES", 1)
    held: list[int] = []
    put = replies_module.Replies.put

    def counting_put(self: replies_module.Replies[Any], tag: Any, outcome: Any) -> None:
        put(self, tag, outcome)
        held.append(self.ready)

    monkeypatch.setattr(replies_module.Replies, "put", counting_put)
    client = batch_client(spec, max_requests=4)
    summary = asyncio.run(judge_run(spec, (BATCH_JUDGE,), client, concurrency=10_000))

    batches = CALLS // 4
    assert summary.tallies[BATCH_JUDGE].judged == CALLS == len(server.requests)
    assert len(server.batch_creates) == batches
    assert len(held) == CALLS
    # Without pacing, each batch hands back all its 4 replies: up to CALLS (24) held at once.
    assert max(held) <= 2 + batches * 1 < CALLS
