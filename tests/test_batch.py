"""Batch mode through litellm's real batch functions, against a local fake of the OpenAI files and
batches endpoints: same verdicts and records as live, failures retried in a next batch, batch
prices, and a kill -9 between submit and collect that resumes by polling, never resubmitting."""

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_batch_server import BatchServer
from openai_server import Reply

from konkord.configuration.judge_frame import split_framed_answers
from konkord.configuration.runspec import RunSpec, resolve_run
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog, now_iso, record_key
from konkord.evidence.verdicts import combine_verdicts, load_verdicts
from konkord.providers.batch import BatchClient
from konkord.providers.batch_format import safe_base
from konkord.providers.llm import CallSettings, ModelClient
from konkord.stages.judge.judge import JudgeSummary, judge_run
from konkord.stages.run import answer_key_hash, answer_messages, generate_answers

REPO = Path(__file__).resolve().parent.parent
# litellm builds a new OpenAI client (with its own connection pool) for every file and batch call
# and never closes it; with several event loops in one test process, one of those pools can be
# collected after its loop is gone. That is litellm's leak and harmless for the one loop a
# command runs; it is not a failure of the behaviour tested here.
pytestmark = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning",
    "ignore:coroutine 'connect_tcp.<locals>.try_connect' was never awaited:RuntimeWarning",
)
MODELS = ["openai/model-a", "openai/model-b", "openai/model-c"]
QUALITY = {"openai/model-a": 3, "openai/model-b": 2, "openai/model-c": 1}
JUDGE = "openai/test-judge"
TASKS = ["t1", "t2", "t3", "t4"]
CALLS = len(TASKS) * 3 * 2  # 3 pairs per task, both orders


def write_project(root: Path, api_base: str) -> None:
    (root / "suites").mkdir(exist_ok=True)
    tasks = "\n".join(f"  - id: {t}\n    prompt: Solve problem {t}." for t in TASKS)
    (root / "suites" / "demo.yaml").write_text(
        f"name: demo\nrubric: Prefer the higher quality.\ntasks:\n{tasks}\n"
    )
    prices = {m: {"input_per_million": 1, "output_per_million": 2} for m in [*MODELS, JUDGE]}
    runs = {
        "runs": [
            {
                "name": "demo",
                "suite": "suites/demo.yaml",
                "models": MODELS,
                "judges": [JUDGE],
                "api_base": api_base,
                "prices": prices,
            }
        ]
    }
    (root / "runs.json").write_text(json.dumps(runs, indent=2))


def write_answers(spec: RunSpec) -> None:
    records = []
    for task in spec.suite.tasks:
        settings_hash = answer_key_hash(answer_messages(spec.suite, task), spec.settings)
        for model in spec.models:
            records.append(
                {
                    "kind": "answer",
                    "task_id": task.id,
                    "model": model,
                    "settings_hash": settings_hash,
                    "text": f"Solution to {task.id}.\nquality={QUALITY[model]}",
                    "error": None,
                    "finish_reason": "stop",
                    "created_at": now_iso(),
                }
            )
    EvidenceLog(spec.run_dir).append_many("answers", records)


def content_judge(body: dict[str, Any], n: int) -> Reply:
    first, second = split_framed_answers(body["messages"][1]["content"])
    q1, q2 = (int(re.search(r"quality=(\d+)", t).group(1)) for t in (first, second))  # type: ignore[union-attr]
    verdict = "1" if q1 > q2 else "2" if q2 > q1 else "TIE"
    return Reply(content=f"Answer {verdict} is better.\nVERDICT: {verdict}")


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


def batch_client(spec: RunSpec, **kwargs: Any) -> BatchClient:
    return BatchClient(
        log=EvidenceLog(spec.run_dir), prices=spec.prices, quiet_s=0.05, **kwargs
    )


def judge(spec: RunSpec, client: ModelClient) -> JudgeSummary:
    return asyncio.run(judge_run(spec, (JUDGE,), client, concurrency=10_000))


def verdict_view(log: EvidenceLog) -> dict[Any, tuple[Any, ...]]:
    """What a verdict says, without what differs by transport (time, latency, cost)."""
    return {
        record_key("verdicts", r): (r["kind"], r.get("winner"), r.get("raw"), r["message_sha"])
        for r in log.records("verdicts")
    }


def test_batch_judging_matches_live_judging(
    demo: RunSpec, batch_server: BatchServer, tmp_path: Path
) -> None:
    summary = judge(demo, batch_client(demo))
    tally = summary.tallies[JUDGE]
    assert (tally.judged, tally.failed, tally.flip_rate) == (CALLS, 0, 0.0)
    assert len(batch_server.batch_creates) == 1
    assert len(batch_server.requests) == CALLS
    # batch prices: half of runs.json's live price (10 tokens in at $1/M, 5 out at $2/M)
    assert tally.cost_usd == pytest.approx(CALLS * (10 * 1 + 5 * 2) / 1e6 / 2)
    log = EvidenceLog(demo.run_dir)
    batches = log.records("batches")
    assert [b["status"] for b in batches] == ["uploaded", "submitted", "collected"]
    assert batches[1]["requests"] == CALLS and batches[2]["failed"] == 0
    assert batches[1]["models"] == [JUDGE] and batches[1]["provider_model"] == "test-judge"
    assert batches[1]["batch_id"] == batches[2]["batch_id"]
    for body in batch_server.requests:
        assert body["model"] == "test-judge" and body["max_tokens"] == 8192
        assert body["temperature"] == 0.0 and body["seed"] == 0
    combined = combine_verdicts(load_verdicts(log, JUDGE))
    assert len(combined) == len(TASKS) * 3
    for verdict in combined:
        assert verdict.complete and not verdict.flipped
        assert verdict.winner == max((verdict.model_a, verdict.model_b), key=QUALITY.__getitem__)
    batched = verdict_view(log)

    # The same run judged live gives the same verdicts, record for record.
    live_dir = tmp_path / "live"
    live_dir.mkdir()
    os.chdir(live_dir)
    write_project(live_dir, batch_server.url)
    live_spec = resolve_run("demo")
    write_answers(live_spec)
    judge(live_spec, ModelClient(prices=live_spec.prices, cache_dir=None))
    assert verdict_view(EvidenceLog(live_spec.run_dir)) == batched

    # A rerun in batch mode finds everything recorded and submits nothing.
    os.chdir(demo.run_dir.parent.parent if demo.run_dir.is_absolute() else tmp_path)
    again = judge(demo, batch_client(demo))
    assert again.tallies[JUDGE].already_recorded == CALLS
    assert len(batch_server.batch_creates) == 1


def test_failed_lines_go_to_the_next_batch_and_unparseable_replies_get_the_reminder(
    demo: RunSpec, batch_server: BatchServer
) -> None:
    def flaky(body: dict[str, Any], n: int) -> Reply:
        if n <= 3:
            return Reply(status=429 if n % 2 else 500)
        if n == 4:
            return Reply(content="I cannot decide.")  # no verdict line: asked again with a reminder
        if n == 5:
            return Reply(status=400)  # permanent: recorded at once, never resubmitted
        return content_judge(body, n)

    batch_server.responder = flaky
    summary = judge(demo, batch_client(demo))
    tally = summary.tallies[JUDGE]
    assert tally.failed == 1
    log = EvidenceLog(demo.run_dir)
    records = log.records("verdicts")
    failures = [r for r in records if r["kind"] == "failure"]
    assert len(failures) == 1 and failures[0]["reason"] == "call_failed"
    assert "status 400" in failures[0]["detail"]
    retried = [r for r in records if r.get("retried")]
    assert len(retried) == 1 and retried[0]["first_raw"] == "I cannot decide."
    assert retried[0]["kind"] == "verdict"
    # batch 1: every call; then the three transient failures and the reminder (one batch, or
    # two when the reminder comes after the quiet interval of a loaded machine)
    sizes = [b["requests"] for b in log.records("batches") if b["status"] == "submitted"]
    assert sizes[0] == CALLS and sum(sizes[1:]) == 4
    assert len(batch_server.requests) == CALLS + 4
    assert Counter(record_key("verdicts", r) for r in records).most_common(1)[0][1] == 1


def test_large_runs_split_into_batches_within_the_limit(
    demo: RunSpec, batch_server: BatchServer
) -> None:
    summary = judge(demo, batch_client(demo, max_requests=10))
    assert summary.tallies[JUDGE].judged == CALLS
    sizes = [b["requests"] for b in EvidenceLog(demo.run_dir).records("batches")
             if b["status"] == "submitted"]
    assert sorted(sizes) == sorted([10, 10, CALLS - 20])
    assert len(batch_server.batch_creates) == 3


def test_an_expired_batch_resubmits_only_what_it_did_not_answer(
    demo: RunSpec, batch_server: BatchServer
) -> None:
    batch_server.expire_after = CALLS - 5
    client = batch_client(demo)

    async def both() -> JudgeSummary:
        task = asyncio.ensure_future(judge_run(demo, (JUDGE,), client, concurrency=10_000))
        while len(batch_server.batch_creates) < 1:
            await asyncio.sleep(0.01)
        while not batch_server.batches or any(
            b["status"] != "expired" for b in batch_server.batches.values()
        ):
            await asyncio.sleep(0.01)
        batch_server.expire_after = None
        return await task

    summary = asyncio.run(both())
    assert summary.tallies[JUDGE].judged == CALLS
    assert [c["input_file_id"] for c in batch_server.batch_creates].__len__() == 2
    assert len(batch_server.requests) == CALLS


def test_answers_in_batch_mode(demo: RunSpec, batch_server: BatchServer) -> None:
    batch_server.responder = lambda body, n: Reply(content=f"answer {n}")
    log = EvidenceLog(demo.run_dir)
    log.path("answers").unlink()
    client = batch_client(demo)
    summary = asyncio.run(
        generate_answers(log, demo.suite, demo.models, demo.settings, client)
    )
    assert (summary.generated, summary.failed) == (len(TASKS) * len(MODELS), 0)
    # one batch per model: a batch file names one model
    assert len(batch_server.batch_creates) == len(MODELS)
    answers = log.records("answers")
    assert len(answers) == len(TASKS) * len(MODELS)
    assert all(a["cost_usd"] == pytest.approx((10 + 10) / 1e6 / 2) for a in answers)


def test_a_model_without_a_batch_api_is_refused_before_anything_is_sent(
    demo: RunSpec, batch_server: BatchServer
) -> None:
    client = batch_client(demo)
    with pytest.raises(KonkordError, match="sim/alpha is a simulated model"):
        asyncio.run(client.complete("sim/alpha", [{"role": "user", "content": "x"}],
                                    CallSettings()))
    assert batch_server.uploads == 0


def test_safe_base_drops_credentials() -> None:
    assert safe_base("https://user:pw@host:8000/v1?key=abc") == "https://host:8000/v1"


def start_judge_and_wait_for_submission(
    spec: RunSpec, server: BatchServer, project: Path
) -> subprocess.Popen[bytes]:
    """`konkord judge --batch` in a child process, returned once its batch is on record."""
    server.hold = True
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-m", "konkord.cli", "judge", "--run", "demo", "--batch"],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    batches = EvidenceLog(spec.run_dir).path("batches")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if batches.exists() and b'"submitted"' in batches.read_bytes():
            return child
        if child.poll() is not None:
            pytest.fail(f"the judge ended early: {child.stderr.read().decode()}")  # type: ignore[union-attr]
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGKILL)
    pytest.fail("the batch was never recorded")


def assert_resumed_without_resubmitting(spec: RunSpec, server: BatchServer) -> None:
    server.hold = False
    log = EvidenceLog(spec.run_dir)
    assert not log.path("verdicts").exists() or not log.records("verdicts")
    assert len(server.batch_creates) == 1
    summary = judge(spec, batch_client(spec))
    assert len(server.batch_creates) == 1  # polled, never resubmitted
    assert len(server.requests) == CALLS  # every request answered (paid) once
    assert summary.tallies[JUDGE].judged == CALLS
    keys = Counter(record_key("verdicts", r) for r in log.records("verdicts"))
    assert len(keys) == CALLS and set(keys.values()) == {1}
    assert [b["status"] for b in log.records("batches")] == [
        "uploaded", "submitted", "collected"
    ]


def test_kill_9_between_submit_and_collect_resumes_by_polling(
    demo: RunSpec, batch_server: BatchServer, project: Path
) -> None:
    child = start_judge_and_wait_for_submission(demo, batch_server, project)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    assert_resumed_without_resubmitting(demo, batch_server)


def test_ctrl_c_while_a_batch_runs_stops_at_once_and_leaves_it_to_collect(
    demo: RunSpec, batch_server: BatchServer, project: Path
) -> None:
    child = start_judge_and_wait_for_submission(demo, batch_server, project)
    os.killpg(child.pid, signal.SIGINT)
    try:
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert child.returncode == 130
    assert b"left running; the same command collects it later" in err
    assert_resumed_without_resubmitting(demo, batch_server)


def test_a_batch_created_but_never_recorded_is_found_by_its_file_not_resubmitted(
    demo: RunSpec, batch_server: BatchServer
) -> None:
    class DiesAfterCreate(BatchClient):
        """The process dies the instant the provider created the batch, before recording it."""

        def _record(self, fields: dict[str, Any]) -> None:
            if fields["status"] == "submitted":
                raise SystemExit("killed")
            super()._record(fields)

    with pytest.raises(SystemExit):
        judge(demo, DiesAfterCreate(log=EvidenceLog(demo.run_dir), prices=demo.prices,
                                    quiet_s=0.05))
    assert len(batch_server.batch_creates) == 1
    log = EvidenceLog(demo.run_dir)
    assert [b["status"] for b in log.records("batches")] == ["uploaded"]

    summary = judge(demo, batch_client(demo))
    assert summary.tallies[JUDGE].judged == CALLS
    assert len(batch_server.batch_creates) == 1  # found among the provider's batches
    assert len(batch_server.requests) == CALLS
    assert [b["status"] for b in log.records("batches")] == [
        "uploaded", "submitted", "collected"
    ]


def test_an_upload_whose_batch_never_came_to_exist_is_abandoned_and_asked_again(
    demo: RunSpec, batch_server: BatchServer
) -> None:
    log = EvidenceLog(demo.run_dir)
    log.append("batches", {"kind": "batch", "input_file_id": "file-gone", "status": "uploaded",
                           "models": [JUDGE], "provider": "openai",
                           "provider_model": "test-judge", "api_base": batch_server.url})
    summary = judge(demo, batch_client(demo))
    assert summary.tallies[JUDGE].judged == CALLS
    statuses = {b["input_file_id"]: b["status"] for b in log.latest("batches").values()}
    assert statuses.pop("file-gone") == "abandoned"
    assert set(statuses.values()) == {"collected"}


def test_batch_prices_come_from_litellms_batch_rates() -> None:
    from konkord.providers.loading import load_litellm

    info = load_litellm().model_cost["gpt-4o-mini"]
    rate_in, rate_out = info["input_cost_per_token_batches"], info["output_cost_per_token_batches"]
    assert rate_in < info["input_cost_per_token"]  # a real discount, not the live price
    client = BatchClient(cache_dir=None)
    assert client.batch_cost("gpt-4o-mini", 1000, 200) == pytest.approx(
        1000 * rate_in + 200 * rate_out
    )
    assert client.batch_cost("openai/no-such-model-18", 1000, 200) is None  # unknown, not free
