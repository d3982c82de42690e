"""The judge stage with its calls made in worker processes (`--processes`), against the local
OpenAI-compatible server: the same verdicts as one process, nothing lost or paid twice on
kill -9 of the parent or Ctrl-C, workers that die with their parent, and a dead worker that
fails the stage loudly with the evidence on disk kept."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from holding_judge import HoldingJudge
from openai_server import OpenAIServer, Reply
from processes import alive, all_gone
from test_judge_stage import (
    EXPECTED_CALLS,
    JUDGE,
    REPO,
    content_judge,
    write_answers,
    write_project,
)

from konkord.commands.large_run_options import POOL_FROM_CALLS, default_processes
from konkord.configuration.runspec import RunSpec, resolve_run
from konkord.evidence.log import EvidenceLog, record_key
from konkord.providers.call_pool import PoolBroken
from konkord.providers.llm import ModelClient
from konkord.stages.judge.judge import JudgeSummary, judge_run

# What a verdict says, without the fields that differ from one sending to the next.
SAME = ("task_id", "model_a", "model_b", "order", "judge", "kind", "winner", "raw", "message_sha")


@pytest.fixture
def demo(project: Path, openai_server: OpenAIServer) -> RunSpec:
    write_project(project, openai_server.url, [JUDGE])
    spec = resolve_run("demo")
    write_answers(spec)
    return spec


def judge(spec: RunSpec, processes: int) -> JudgeSummary:
    client = ModelClient(concurrency=4, max_retries=0, prices=spec.prices, cache_dir=None)
    client.processes = processes
    return asyncio.run(judge_run(spec, (JUDGE,), client, concurrency=4))


def verdict_set(spec: RunSpec) -> set[tuple[Any, ...]]:
    return {
        tuple(r.get(k) for k in SAME) for r in EvidenceLog(spec.run_dir).records("verdicts")
    }


def children_of(pid: int) -> set[int]:
    """The call workers among the children of `pid` (a zombie counts: it was not waited for).
    Other children are left out: the test process may hold others started by earlier tests,
    such as multiprocessing's resource tracker, which must never be taken for a worker."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "children").read_text().split()
        except FileNotFoundError:  # a thread that ended since the folder was listed
            continue
        found |= {int(t) for t in text}
    return {child for child in found if _is_worker(child)}


def _is_worker(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return b"konkord.providers.call_worker" in command or state == "Z"


def test_two_processes_give_the_verdicts_of_one(
    demo: RunSpec, openai_server: OpenAIServer, project: Path
) -> None:
    openai_server.responder = content_judge
    one = judge(demo, 1)
    alone = verdict_set(demo)
    assert one.tallies[JUDGE].judged == EXPECTED_CALLS
    EvidenceLog(demo.run_dir).path("verdicts").unlink()
    before = len(openai_server.requests)
    two = judge(demo, 2)
    assert two.tallies[JUDGE].judged == EXPECTED_CALLS
    assert len(openai_server.requests) - before == EXPECTED_CALLS
    assert verdict_set(demo) == alone
    assert len(alone) == EXPECTED_CALLS
    assert not children_of(os.getpid()), "the stage left worker processes behind"


def test_failures_cross_as_konkord_records(demo: RunSpec, openai_server: OpenAIServer) -> None:
    """A permanent error (400) in a worker is recorded as the same failure as in one process."""
    openai_server.responder = lambda body, n: Reply(content="no", status=400)
    summary = judge(demo, 2)
    assert summary.tallies[JUDGE].judged == 0
    records = list(EvidenceLog(demo.run_dir).records("verdicts"))
    assert len(records) == EXPECTED_CALLS
    assert {r["reason"] for r in records} == {"call_failed"}
    assert all("BadRequestError" in r["detail"] and "1 attempt" in r["detail"] for r in records)


def start_cli(project: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "KONKORD_BACKOFF_BASE": "0"}
    return subprocess.Popen(
        [sys.executable, "-m", "konkord.cli", "judge", "--run", "demo", "--concurrency", "3",
         "--processes", "2", *extra],
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,
    )


def wait_for(what: Any, child: subprocess.Popen[bytes], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the judge never reached the point"
        time.sleep(0.05)


def test_kill_9_of_the_parent_takes_the_workers_and_a_rerun_pays_nothing_twice(
    demo: RunSpec, openai_server: OpenAIServer, project: Path
) -> None:
    gate = HoldingJudge(5, content_judge)
    openai_server.responder = gate
    verdicts = EvidenceLog(demo.run_dir).path("verdicts")
    child = start_cli(project)
    try:
        wait_for(
            lambda: verdicts.exists() and verdicts.read_bytes().count(b"\n") >= gate.quick
            and len(openai_server.requests) > gate.quick,
            child,
        )
        workers = children_of(child.pid)
        assert len(workers) == 2
        os.kill(child.pid, signal.SIGKILL)  # the parent alone: its workers must follow
        child.wait()
        assert all_gone(workers, 10), "a worker outlived its parent"
    finally:
        gate.release.set()
    lines = verdicts.read_bytes()
    assert lines.endswith(b"\n") and lines.count(b"\n") == gate.quick  # whole lines only

    summary = judge(demo, 1)
    assert summary.tallies[JUDGE].already_recorded == gate.quick
    assert summary.tallies[JUDGE].judged == EXPECTED_CALLS - gate.quick
    assert set(gate.paid.values()) == {1} and sum(gate.paid.values()) == EXPECTED_CALLS
    keys = Counter(record_key("verdicts", r) for r in EvidenceLog(demo.run_dir).records("verdicts"))
    assert len(keys) == EXPECTED_CALLS and set(keys.values()) == {1}


def test_ctrl_c_lands_the_calls_in_flight(
    demo: RunSpec, openai_server: OpenAIServer, project: Path
) -> None:
    """Ctrl-C reaches the whole process group (as at a terminal): the workers ignore it, the
    calls they hold come back and are written, nothing new is sent."""
    gate = HoldingJudge(5, content_judge)
    openai_server.responder = gate
    child = start_cli(project)
    try:
        wait_for(lambda: len(openai_server.requests) >= gate.quick + 3, child)
        held = len(openai_server.requests)
        workers = children_of(child.pid)
        os.killpg(child.pid, signal.SIGINT)
        time.sleep(1.0)
        assert all(alive(w) for w in workers), "a worker died of Ctrl-C"
        gate.answer_held = True
        gate.release.set()
        _, err = child.communicate(timeout=60)
    finally:
        gate.release.set()
    assert child.returncode == 130, err.decode()
    assert len(openai_server.requests) == held  # nothing sent after Ctrl-C
    records = list(EvidenceLog(demo.run_dir).records("verdicts"))
    assert len(records) == held and {r["kind"] for r in records} == {"verdict"}
    assert not any(alive(w) for w in workers)


def test_a_dead_worker_fails_the_stage_loudly_and_keeps_the_evidence(
    demo: RunSpec, openai_server: OpenAIServer
) -> None:
    gate = HoldingJudge(4, content_judge)
    victims: list[int] = []

    def kill_a_worker() -> None:
        if not victims:
            victims.append(min(children_of(os.getpid())))
            os.kill(victims[0], signal.SIGKILL)
            threading.Timer(1.0, gate.release.set).start()  # the other worker's calls end

    gate.on_hold = kill_a_worker
    gate.answer_held = True
    openai_server.responder = gate
    with pytest.raises(PoolBroken, match=r"call worker process \d of 2 \(pid \d+\) died with exit"):
        judge(demo, 2)
    gate.release.set()
    assert not children_of(os.getpid()), "the stage left a worker behind"
    verdicts = EvidenceLog(demo.run_dir).path("verdicts")
    kept = verdicts.read_bytes()
    assert kept.count(b"\n") >= 1
    openai_server.responder = content_judge
    summary = judge(demo, 1)
    assert verdicts.read_bytes().startswith(kept)  # what was on disk stays
    # Every verdict kept is taken as it is; a call the dead worker held may have been kept as
    # a failure (as the kill falls), and a failure is asked again.
    kinds = [json.loads(line)["kind"] for line in kept.splitlines()]
    assert summary.tallies[JUDGE].already_recorded == kinds.count("verdict")
    records = list(EvidenceLog(demo.run_dir).records("verdicts"))
    keys = Counter(record_key("verdicts", r) for r in records)
    assert len(keys) == EXPECTED_CALLS and set(keys.values()) == {1}


def test_the_default_is_one_process_below_the_threshold_and_a_worker_per_core_above() -> None:
    assert default_processes(POOL_FROM_CALLS - 1) == 1
    assert default_processes(POOL_FROM_CALLS) == max(2, len(os.sched_getaffinity(0)))
