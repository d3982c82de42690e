"""One writer per run, and a Ctrl-C that keeps what was paid for.

Real processes against the local server: two `konkord judge` on one run, together and 1 s
apart; a judge refused while another process holds the run; Ctrl-C once (the calls in flight
land in the log and are not paid again on rerun) and twice (abort at once).
"""

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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from openai_server import OpenAIServer, Reply
from test_judge_stage import EXPECTED_CALLS, JUDGE, REPO, content_judge, judge
from test_judge_stage import demo as demo_fixture  # noqa: F401 (a fixture)

from konkord.cli import cli
from konkord.configuration.runspec import RunSpec
from konkord.evidence.log import EvidenceLog, now_iso, record_key


@pytest.fixture
def spec(request: pytest.FixtureRequest) -> RunSpec:
    """The demo run of test_judge_stage: three models' answers written, no verdict yet."""
    demo: RunSpec = request.getfixturevalue("demo_fixture")
    return demo


@contextmanager
def run_held(project: Path, run: str, stage: str) -> Iterator[subprocess.Popen[str]]:
    """Another process holding `run` as `konkord <stage>` does, until the block ends."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import time; from pathlib import Path; from konkord.evidence.stopping import run_lock\n"
         f"with run_lock(Path('runs') / {run!r}, {stage!r}):\n"
         "    print('held', flush=True); time.sleep(120)"],
        cwd=project, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait()


JUDGE_CMD = [sys.executable, "-m", "konkord.cli", "judge", "--run", "demo", "--concurrency", "3"]


class Paying:
    """A judge that bills every prompt it answers; `hold_after` requests are answered, later
    ones wait (still billed when released) so a test can act while they are in flight."""

    def __init__(self, delay_s: float = 0.0, hold_after: int | None = None) -> None:
        self.delay_s = delay_s
        self.hold_after = hold_after
        self.release = threading.Event()
        self.paid: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any], n: int) -> Reply:
        if self.hold_after is not None and n > self.hold_after:
            self.release.wait(60)
        with self.lock:
            self.paid[json.dumps(body["messages"], sort_keys=True)] += 1
        reply = content_judge(body, n)
        reply.delay_s = self.delay_s
        return reply


def _start(project: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        JUDGE_CMD,
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _no_duplicate_verdicts(spec: RunSpec) -> None:
    keys = Counter(record_key("verdicts", r) for r in EvidenceLog(spec.run_dir).records("verdicts"))
    assert len(keys) == EXPECTED_CALLS
    assert set(keys.values()) == {1}, "a verdict was recorded twice"


@pytest.mark.parametrize("apart_s", [0.0, 1.0], ids=["together", "1s-apart"])
def test_two_judges_on_one_run_pay_each_prompt_once(
    spec: RunSpec, openai_server: OpenAIServer, project: Path, apart_s: float
) -> None:
    server = Paying(delay_s=0.4)
    openai_server.responder = server
    first = _start(project)
    time.sleep(apart_s)
    second = _start(project)
    outs = [p.communicate(timeout=120) for p in (first, second)]
    codes = [first.returncode, second.returncode]
    assert sorted(codes) in ([0, 0], [0, 2]), outs
    for code, (_, err) in zip(codes, outs, strict=True):
        if code == 2:  # refused before any call, naming the process that holds the run
            last = err.strip().splitlines()[-1]
            assert last.startswith('error: run "demo" is being written by `konkord judge` (pid ')
    assert sum(server.paid.values()) == EXPECTED_CALLS == len(openai_server.requests)
    assert set(server.paid.values()) == {1}, "a prompt was paid twice"
    _no_duplicate_verdicts(spec)


def test_a_held_run_is_refused_by_name_while_labels_still_go_in(
    spec: RunSpec, openai_server: OpenAIServer, project: Path
) -> None:
    openai_server.responder = content_judge
    with run_held(project, "demo", "run") as holder:
        refused = CliRunner().invoke(cli, ["judge", "--run", "demo"])
        assert refused.exit_code == 2
        assert f"`konkord run` (pid {holder.pid} on " in refused.stderr
        assert "Nothing was called" in refused.stderr
        assert openai_server.requests == []
        # a person labelling the same run is not held up by the lock
        EvidenceLog(spec.run_dir).append("labels", {
            "kind": "label", "task_id": "t1", "model_a": spec.models[0],
            "model_b": spec.models[1], "labeller": "ana", "winner": "tie",
            "created_at": now_iso(),
        })
    judged = CliRunner().invoke(cli, ["judge", "--run", "demo"])  # the kernel freed the lock
    assert judged.exit_code == 0, judged.stderr
    assert len(openai_server.requests) == EXPECTED_CALLS
    assert len(EvidenceLog(spec.run_dir).records("labels")) == 1


def _wait_for(condition: Any, child: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 90
    while not condition():
        assert child.poll() is None, f"the judge ended before {what}: {child.communicate()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_first_ctrl_c_waits_for_the_calls_in_flight_and_a_rerun_pays_none_twice(
    spec: RunSpec, openai_server: OpenAIServer, project: Path
) -> None:
    server = Paying(hold_after=4)
    openai_server.responder = server
    child = _start(project)
    try:
        _wait_for(lambda: len(openai_server.requests) >= 4 + 3, child, "3 calls were in flight")
        child.send_signal(signal.SIGINT)
        assert child.stderr is not None
        line = child.stderr.readline()
        while "stopping:" not in line:
            assert line, "no countdown was shown"
            line = child.stderr.readline()
        assert "waiting for 3 calls in flight to land in the log" in line
        assert "Ctrl-C again to abort" in line
        time.sleep(0.5)
        assert child.poll() is None  # still waiting for the calls it paid for
    finally:
        server.release.set()
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert "stopped: every call in flight landed in the log" in err
    recorded = EvidenceLog(spec.run_dir).records("verdicts")
    assert len(recorded) == len(openai_server.requests) == 7  # all it sent, nothing more

    summary = judge(spec)
    assert summary.tallies[JUDGE].already_recorded == 7
    assert sum(server.paid.values()) == EXPECTED_CALLS
    assert set(server.paid.values()) == {1}, "a call in flight at Ctrl-C was paid again"
    _no_duplicate_verdicts(spec)


def test_second_ctrl_c_aborts_at_once(
    spec: RunSpec, openai_server: OpenAIServer, project: Path
) -> None:
    server = Paying(hold_after=2)
    openai_server.responder = server
    child = _start(project)
    try:
        _wait_for(lambda: len(openai_server.requests) >= 2 + 3, child, "3 calls were in flight")
        child.send_signal(signal.SIGINT)
        assert child.stderr is not None
        while "stopping:" not in child.stderr.readline():
            pass
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)  # the held calls are never released before
        assert child.returncode == 130
        assert "aborted: calls in flight were dropped" in err
        assert "Traceback" not in err
    finally:
        server.release.set()
    assert len(EvidenceLog(spec.run_dir).records("verdicts")) == 2


def test_two_stages_side_by_side_in_one_process_contend_as_two_processes_do(
    spec: RunSpec, openai_server: OpenAIServer
) -> None:
    from konkord.evidence.stopping import RunBusy
    from konkord.providers.llm import ModelClient
    from konkord.stages.judge.judge import judge_run

    server = Paying(delay_s=0.1)
    openai_server.responder = server

    async def both() -> list[Any]:
        runs = [judge_run(spec, [JUDGE], ModelClient(max_retries=0)) for _ in range(2)]
        return await asyncio.gather(*runs, return_exceptions=True)

    outcomes = asyncio.run(both())
    assert sum(isinstance(o, RunBusy) for o in outcomes) == 1
    assert sum(server.paid.values()) == EXPECTED_CALLS
    assert set(server.paid.values()) == {1}
    _no_duplicate_verdicts(spec)


def _answer_slowly(body: dict[str, Any], n: int) -> Reply:
    return Reply(content=f"an answer to {body['messages'][-1]['content'][-24:]}", delay_s=0.4)


@pytest.mark.parametrize("apart_s", [0.0, 1.0], ids=["together", "1s-apart"])
def test_two_runs_on_one_run_pay_each_prompt_once(
    openai_server: OpenAIServer, project: Path, apart_s: float
) -> None:
    tasks = "\n".join(f"  - {{id: q{i}, prompt: Question number {i}?}}" for i in range(6))
    (project / "s.yaml").write_text(f"name: s\nrubric: Prefer correct answers.\ntasks:\n{tasks}\n")
    openai_server.responder = _answer_slowly
    command = [sys.executable, "-m", "konkord.cli", "run", "--suite", "s.yaml", "--models",
               "openai/x,openai/y", "--api-base", openai_server.url, "--concurrency", "3"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    time.sleep(apart_s)
    second = subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    outs = [p.communicate(timeout=300) for p in (first, second)]
    codes = [first.returncode, second.returncode]
    assert sorted(codes) in ([0, 0], [0, 2]), outs
    for code, (_, err) in zip(codes, outs, strict=True):
        if code == 2:
            last = err.strip().splitlines()[-1]
            assert last.startswith('error: run "s" is being written by `konkord run` (pid ')
    paid = Counter(json.dumps(b["messages"]) + b["model"] for b in openai_server.requests)
    assert len(paid) == 12 and set(paid.values()) == {1}, "a prompt was paid twice"
    answers = EvidenceLog(project / "runs" / "s").records("answers")
    keys = Counter(record_key("answers", r) for r in answers)
    assert len(keys) == 12 and set(keys.values()) == {1}, "an answer was recorded twice"


def test_two_people_label_one_run_at_once_while_a_judge_holds_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("streamlit")
    from label_fixtures import make_run
    from test_label_app import click, progress_text, start

    from konkord.stages.label.labels import current_labels

    labelled = make_run(project, n_tasks=25)
    with run_held(project, "demo", "judge"):
        sessions = {}
        for name in ("ana", "ben"):  # each session reads its labeller once, at its start
            for key, value in {"RUN": "demo", "LABELLER": name, "SEED": "0", "N": "6"}.items():
                monkeypatch.setenv(f"KONKORD_LABEL_{key}", value)
            sessions[name] = start()
        for step, key in enumerate(["choice_1", "choice_2", "choice_tie", "choice_1"], 1):
            for at in sessions.values():  # turn about: each label lands between the other's
                click(at, key)
                assert progress_text(at).startswith(f"{step} of 6")
    labels = current_labels(EvidenceLog(labelled.run_dir))
    assert Counter(key[3] for key in labels) == {"ana": 4, "ben": 4}


def test_a_refused_run_or_cascade_leaves_run_json_as_it_was(
    openai_server: OpenAIServer, project: Path
) -> None:
    (project / "s.yaml").write_text(
        "name: s\nrubric: Prefer correct answers.\ntasks:\n  - {id: one, prompt: Question one?}\n"
    )
    openai_server.responder = _answer_slowly
    base = ["--api-base", openai_server.url]
    made = CliRunner().invoke(cli, ["run", "--suite", "s.yaml", "--models", "openai/x,openai/y",
                                    *base])
    assert made.exit_code == 0, made.stderr
    manifest = project / "runs" / "s" / "run.json"
    before = manifest.read_bytes()
    sent = len(openai_server.requests)
    with run_held(project, "s", "run") as holder:
        other_models = ["run", "--suite", "s.yaml", "--models", "openai/x,openai/y,openai/z", *base]
        cascade = ["judge", "--run", "s", "--judge", "openai/strong", "--first-pass", "openai/f",
                   *base]
        for args in (other_models, cascade):
            refused = CliRunner().invoke(cli, args)
            assert refused.exit_code == 2, refused.output
            assert f"`konkord run` (pid {holder.pid} on " in refused.stderr
            assert manifest.read_bytes() == before, f"{args[0]} rewrote run.json"
    assert len(openai_server.requests) == sent


def test_a_ctrl_c_after_the_work_is_done_leaves_the_status_alone(project: Path) -> None:
    (project / "s.yaml").write_text(
        "name: s\nrubric: Prefer correct answers.\ntasks:\n  - {id: one, prompt: Question one?}\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-m", "konkord.cli", "run", "--suite", "s.yaml", "--models",
         "sim/alpha,sim/beta"],
        cwd=project, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert child.stdout is not None
    assert child.stdout.readline().startswith("generated 2,")  # the summary: the work is done
    time.sleep(0.2)  # the interpreter is unloading litellm (half a second on this machine)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    # not killed by the signal (-2): the command's own status, or 130 had it still been running
    assert child.returncode in (0, 130), (child.returncode, err)
    assert "Traceback" not in err


def test_the_writer_lock_lives_under_konkord_not_in_the_evidence(tmp_path: Path) -> None:
    from konkord.evidence.stopping import run_lock

    run_dir = tmp_path / "runs" / "demo"
    run_dir.mkdir(parents=True)
    with run_lock(run_dir, "run"):
        lock = tmp_path / ".konkord" / "locks" / "demo.lock"
        assert lock.is_file() and "`konkord run` (pid" in lock.read_text()
        assert list(run_dir.iterdir()) == []  # the committed evidence folder stays clean
