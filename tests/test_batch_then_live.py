"""A batch left open by a killed `--batch` run is never paid for twice: a live rerun collects it
if it has ended, or stops (calling nothing) and says how to collect or cancel it while it runs;
a later `--batch` run collects it even when nothing is left to ask."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from openai_batch_server import BatchServer
from openai_server import echo_responder
from test_batch import CALLS, REPO, content_judge, write_answers, write_project

from konkord.cli import cli
from konkord.configuration.runspec import resolve_run
from konkord.evidence.log import EvidenceLog, record_key
from konkord.providers.batch_resume import open_batches

pytestmark = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning",
    "ignore:coroutine 'connect_tcp.<locals>.try_connect' was never awaited:RuntimeWarning",
)


@pytest.fixture
def server(project: Path, monkeypatch: pytest.MonkeyPatch) -> BatchServer:
    monkeypatch.setenv("KONKORD_BATCH_POLL", "0.01")
    monkeypatch.setenv("KONKORD_BACKOFF_BASE", "0.01")
    batch_server = BatchServer(content_judge).start()
    write_project(project, batch_server.url)
    yield batch_server  # type: ignore[misc]
    batch_server.stop()


def kill_once_submitted(project: Path, server: BatchServer, args: list[str]) -> None:
    """Start `konkord ARGS --batch` and kill -9 it once its batch is on record at the provider."""
    server.hold = True
    child = subprocess.Popen(
        [sys.executable, "-m", "konkord.cli", *args, "--batch"], cwd=project,
        env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, start_new_session=True,
    )
    batches = project / "runs" / "demo" / "batches.jsonl"
    deadline = time.monotonic() + 90
    while not (batches.exists() and b'"submitted"' in batches.read_bytes()):
        if child.poll() is not None or time.monotonic() > deadline:
            os.killpg(child.pid, signal.SIGKILL)
            pytest.fail(f"no batch was submitted: {child.stderr.read().decode()}")  # type: ignore[union-attr]
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def finish(server: BatchServer) -> None:
    """The provider finishes every batch (the fake moves one step per status read)."""
    server.hold = False
    for batch_id, batch in server.batches.items():
        while batch["status"] != "completed":
            server._poll(batch_id)


def statuses(project: Path) -> list[str]:
    return [r["status"] for r in EvidenceLog(project / "runs" / "demo").records("batches")]


def test_a_live_judge_after_a_killed_batch_collects_it_instead_of_paying_again(
    project: Path, server: BatchServer
) -> None:
    write_answers(resolve_run("demo"))
    kill_once_submitted(project, server, ["judge", "--run", "demo"])
    assert server.requests == []  # the batch is held at the provider: nothing answered yet

    running = CliRunner().invoke(cli, ["judge", "--run", "demo"])
    assert running.exit_code == 2, running.output
    [line] = [line for line in running.output.splitlines() if line.startswith("error:")]
    assert "requests for openai/test-judge, submitted by an earlier --batch run) is still " in line
    assert "rerun with --batch to wait for it and collect its replies, or cancel batch " in line
    assert line.endswith("nothing was called")
    assert server.requests == []  # not one prompt paid for twice
    assert statuses(project) == ["uploaded", "submitted"]

    finish(server)
    live = CliRunner().invoke(cli, ["judge", "--run", "demo"])
    assert live.exit_code == 0, live.output
    assert len(server.requests) == CALLS  # each prompt answered once, by the batch
    assert len(server.batch_creates) == 1
    log = EvidenceLog(project / "runs" / "demo")
    verdicts = log.records("verdicts")
    keys = Counter(record_key("verdicts", r) for r in verdicts)
    assert len(keys) == CALLS and set(keys.values()) == {1}
    assert statuses(project) == ["uploaded", "submitted", "collected"]
    # the batch's replies reach the evidence with what they cost (batch prices), once
    batch_cost = log.records("batches")[-1]["cost_usd"]
    assert batch_cost > 0
    assert sum(r["cost_usd"] for r in verdicts) == pytest.approx(batch_cost)


def test_a_later_batch_run_collects_an_open_batch_even_with_nothing_left_to_ask(
    project: Path, server: BatchServer
) -> None:
    server.responder = echo_responder  # the batch holds answers, not verdicts
    kill_once_submitted(project, server, ["run", "--run", "demo"])
    finish(server)
    write_answers(resolve_run("demo"))  # every answer recorded meanwhile: nothing to ask
    collected = CliRunner().invoke(cli, ["run", "--run", "demo", "--batch"])
    assert collected.exit_code == 0, collected.output
    log = EvidenceLog(project / "runs" / "demo")
    assert open_batches(log) == []  # it used to stay open for ever
    collected_batches = [r for r in log.records("batches") if r["status"] == "collected"]
    assert len(collected_batches) == len(server.batch_creates) >= 1  # nothing submitted again
    assert len(server.requests) == sum(r["requests"] for r in collected_batches)


def test_a_live_cascade_after_a_killed_batch_calls_nothing_while_the_batch_runs(
    project: Path, server: BatchServer
) -> None:
    import json

    write_answers(resolve_run("demo"))
    kill_once_submitted(project, server, ["judge", "--run", "demo"])
    runs = json.loads((project / "runs.json").read_text())
    runs["runs"][0]["cascade"] = {"first_pass": "openai/first-pass", "accept_at": 0.8}
    (project / "runs.json").write_text(json.dumps(runs))
    cascade = CliRunner().invoke(cli, ["judge", "--run", "demo"])
    assert cascade.exit_code == 2, cascade.output
    assert "submitted by an earlier --batch run) is still " in cascade.output
    assert server.requests == []
