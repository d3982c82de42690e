"""Batch mode, point by point against the local fake of the OpenAI files and batches endpoints:
the status a batch shows as it runs, the output and error files, replies that cannot be read
failing exactly as live ones do, batches cut within the byte limit, and files streamed rather
than held in memory."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_batch_server import BatchServer
from openai_server import Reply
from test_batch import (
    CALLS,
    JUDGE,
    TASKS,
    batch_client,
    content_judge,
    judge,
    write_answers,
    write_project,
)

from konkord.configuration.call_settings import CallSettings
from konkord.configuration.runspec import RunSpec, resolve_run
from konkord.evidence.log import EvidenceLog, record_key
from konkord.providers.batch import BatchClient
from konkord.providers.llm import ModelClient
from konkord.providers.loading import load_litellm

pytestmark = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning",
    "ignore:coroutine 'connect_tcp.<locals>.try_connect' was never awaited:RuntimeWarning",
)
REPO = Path(__file__).resolve().parent.parent
PER_TASK = CALLS // len(TASKS)  # 3 pairs, both orders


@pytest.fixture
def batch_server() -> Iterator[BatchServer]:
    server = BatchServer(content_judge).start()
    yield server
    server.stop()


@pytest.fixture
def demo(project: Path, batch_server: BatchServer, monkeypatch: pytest.MonkeyPatch) -> RunSpec:
    monkeypatch.setenv("KONKORD_BATCH_POLL", "0.01")
    monkeypatch.setenv("KONKORD_BACKOFF_BASE", "0.01")
    write_project(project, batch_server.url)
    spec = resolve_run("demo")
    write_answers(spec)
    return spec


def task_of(body: dict[str, Any]) -> str:
    found = re.search(r"Solve problem (t\d)", body["messages"][1]["content"])
    assert found is not None
    return found.group(1)


def test_a_batch_shows_validating_then_in_progress_then_completed_with_both_files(
    demo: RunSpec, batch_server: BatchServer
) -> None:
    def t4_refused(body: dict[str, Any], n: int) -> Reply:
        return Reply(status=400) if task_of(body) == "t4" else content_judge(body, n)

    batch_server.responder = t4_refused
    said: list[str] = []
    judge(demo, batch_client(demo, on_status=said.append))

    ((batch_id, statuses),) = batch_server.statuses.items()
    assert statuses == ["validating", "in_progress", "completed"]
    seen = [text.removeprefix(f"batch {batch_id}: ") for text in said]
    assert [s for s in seen if s in ("validating", "in_progress", "completed")] == statuses
    batch = batch_server.batches[batch_id]
    out = batch_server.files[batch["output_file_id"]]["path"].read_text().splitlines()
    err = batch_server.files[batch["error_file_id"]]["path"].read_text().splitlines()
    assert (len(out), len(err)) == (CALLS - PER_TASK, PER_TASK)
    # what each file said reached the evidence: verdicts from the output file, failures
    # (permanent, so never resubmitted) from the error file
    records = EvidenceLog(demo.run_dir).records("verdicts")
    failed = [r for r in records if r["kind"] == "failure"]
    assert len(records) == CALLS and len(failed) == PER_TASK
    assert {r["task_id"] for r in failed} == {"t4"}
    assert all("status 400" in r["detail"] for r in failed)
    assert len(batch_server.batch_creates) == 1


def troubled(body: dict[str, Any], n: int) -> Reply:
    """t1: no verdict line, even after the reminder; t2: two verdict lines; t3: cut off."""
    task = task_of(body)
    if task == "t1":
        return Reply(content="Both answers have merit. I cannot decide.")
    if task == "t2":
        return Reply(content="VERDICT: 1\nOn reflection, the second.\nVERDICT: 2")
    if task == "t3":
        return Reply(content="Answer 1 is", finish_reason="length")
    return content_judge(body, n)


def record_view(log: EvidenceLog) -> dict[Any, tuple[Any, ...]]:
    """What a record says, without what differs by transport (time, latency, cost)."""
    fields = ("kind", "reason", "winner", "raw", "first_raw", "retried", "finish_reason",
              "message_sha", "frame_hash")
    return {
        record_key("verdicts", r): tuple(r.get(f) for f in fields)
        for r in log.records("verdicts")
    }


def test_replies_that_cannot_be_read_fail_in_batch_exactly_as_live_and_are_asked_again(
    demo: RunSpec, batch_server: BatchServer, tmp_path: Path
) -> None:
    batch_server.responder = troubled
    judge(demo, batch_client(demo))
    log = EvidenceLog(demo.run_dir)
    batched = record_view(log)
    reasons = {r["task_id"]: r.get("reason") for r in log.records("verdicts")}
    # never coerced into a winner: each unreadable reply is a failure with its reason
    assert reasons == {"t1": "no_verdict_line", "t2": "ambiguous", "t3": "token_cap", "t4": None}
    assert {r["retried"] for r in log.records("verdicts") if r["task_id"] == "t1"} == {True}
    # t1's reminders went into a second batch
    assert len(batch_server.batch_creates) == 2

    live_dir = tmp_path / "live"
    live_dir.mkdir()
    os.chdir(live_dir)
    write_project(live_dir, batch_server.url)
    live = resolve_run("demo")
    write_answers(live)
    judge(live, ModelClient(prices=live.prices, cache_dir=None))
    assert record_view(EvidenceLog(live.run_dir)) == batched

    # A rerun in batch mode asks the failed calls afresh (not from the cache), and only them.
    os.chdir(tmp_path)
    batch_server.responder = content_judge
    asked_before = len(batch_server.requests)
    judge(demo, batch_client(demo))
    latest = log.latest("verdicts")
    assert len(latest) == CALLS and {r["kind"] for r in latest.values()} == {"verdict"}
    assert len(batch_server.requests) - asked_before == 3 * PER_TASK


def test_a_batch_file_stays_within_the_byte_limit(
    demo: RunSpec, batch_server: BatchServer
) -> None:
    limit = 12_000  # about eight judge requests of this suite
    summary = judge(demo, batch_client(demo, max_bytes=limit))
    assert summary.tallies[JUDGE].judged == CALLS
    uploaded = [f for f in batch_server.files.values() if f["object"]["purpose"] == "batch"]
    sizes = [f["object"]["bytes"] for f in uploaded]
    assert len(sizes) >= 3 and max(sizes) <= limit
    lines = sum(len(f["path"].read_text().splitlines()) for f in uploaded)
    assert lines == CALLS == len(batch_server.requests)


def start_server_process() -> tuple[subprocess.Popen[str], str]:
    """The fake in a process of its own, so that its memory is not counted as the client's."""
    server = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "openai_batch_server.py")],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "tests")},
    )
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


def test_request_files_are_written_and_uploaded_without_being_held_in_memory(
    project: Path,
) -> None:
    n, size = 500, 60_000  # 30 MB of requests, each prompt distinct
    server, url = start_server_process()
    try:
        client = BatchClient(log=None, cache_dir=project / "cache", quiet_s=0.05, poll_s=0.01)
        settings = CallSettings(api_base=url, max_tokens=16)

        async def one(i: int) -> bool:
            # the prompt is not kept in this frame: the judge stage drops its own too
            prompt = [{"role": "user", "content": f"{i:06d} " + "a long prompt. " * (size // 15)}]
            asking = client.complete(JUDGE, prompt, settings)
            del prompt
            return (await asking).ok

        async def ask_all() -> list[bool]:
            return await asyncio.gather(*(one(i) for i in range(n)))

        load_litellm()  # its import is not the batch path's memory
        tracemalloc.start()
        try:
            answered = asyncio.run(ask_all())
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        server.terminate()
        server.wait()
    assert all(answered) and len(answered) == n
    spooled = n * size
    # held whole, the requests alone would take their full size (about 7 MB is bookkeeping)
    assert peak < spooled / 2, f"peak {peak / 1e6:.1f} MB for {spooled / 1e6:.1f} MB of requests"


def test_output_files_are_read_as_a_stream(batch_server: BatchServer) -> None:
    path = batch_server.directory / "big-output.jsonl"
    reply = {"status_code": 200, "body": {"choices": [{"message": {"content": "x" * 2000}}]}}
    with open(path, "w") as handle:
        for i in range(20_000):
            handle.write(json.dumps({"custom_id": f"k{i}", "response": reply}) + "\n")
    batch_server._register_file("file-big", path, "batch_output", "output.jsonl")
    client = BatchClient(cache_dir=None)
    creds = {"custom_llm_provider": "openai", "api_base": batch_server.url, "api_key": "x"}

    async def count() -> int:
        return sum([1 async for _ in client.api().lines("file-big", creds)])

    asyncio.run(count())  # litellm's first call builds its clients: not the stream's memory
    tracemalloc.start()
    try:
        assert asyncio.run(count()) == 20_000
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < path.stat().st_size / 3, f"peak {peak / 1e6:.1f} MB"
