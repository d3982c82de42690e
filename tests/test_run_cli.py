"""`konkord run` as a user runs it: a kill -9 half-way, bad input, credentials, the summary."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import FAKE_KEY
from openai_server import OpenAIServer, Reply, user_text
from test_runs_config import BAD_RUNS
from test_suite_loading import BAD_SUITES

from konkord.cli import cli
from konkord.providers.llm import load_dotenv_file

BAD = Path(__file__).parent / "data" / "bad_inputs"
KONKORD = Path(sys.executable).parent / "konkord"


def _suite(path: Path, n_tasks: int) -> Path:
    lines = ["name: kill", "rubric: Prefer correct answers.", "tasks:"]
    for i in range(n_tasks):
        lines += [f"  - id: q{i:02d}", f"    prompt: Question number {i:02d}?"]
    path.write_text("\n".join(lines) + "\n")
    return path


def _key(body: dict[str, Any]) -> tuple[str, str]:
    """(task id, model) of a request, read from what the server received."""
    number = user_text(body).split("Question number ")[1][:2]
    return f"q{number}", f"openai/{body['model']}"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_kill_9_half_way_then_rerun_answers_everything_exactly_once(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.responder = lambda body, n: Reply(f"reply {n}", delay_s=0.05)
    _suite(tmp_path / "kill.yaml", 60)
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={FAKE_KEY}-from-dotenv\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["KONKORD_BACKOFF_BASE"] = "0.01"
    command = [
        str(KONKORD),
        "run",
        "--suite",
        "kill.yaml",
        "--models",
        "openai/one,openai/two",
        "--api-base",
        openai_server.url,
        "--concurrency",
        "2",
    ]
    log = tmp_path / "runs" / "kill" / "answers.jsonl"
    first = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if log.exists() and log.read_bytes().count(b"\n") >= 20:
            break
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert first.returncode == -signal.SIGKILL

    recorded_first = [json.loads(line) for line in log.read_text().splitlines()]
    assert 20 <= len(recorded_first) < 120, "the kill did not land half-way"
    before = len(openai_server.requests)
    # as if the kill had also cut a record in half
    with open(log, "ab") as handle:
        handle.write(b'{"kind": "answer", "task_id": "q3')

    second = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert "generated" in second.stdout
    assert "incomplete line" in second.stderr and "repaired:" in second.stderr

    records = [json.loads(line) for line in log.read_text().splitlines()]
    keys = Counter((r["task_id"], r["model"]) for r in records)
    expected = {(f"q{i:02d}", m) for i in range(60) for m in ("openai/one", "openai/two")}
    assert set(keys) == expected
    assert all(count == 1 for count in keys.values()), "an answer was recorded twice"
    assert all(r["error"] is None and r["text"] for r in records)

    recorded_keys = {(r["task_id"], r["model"]) for r in recorded_first}
    asked_again = {_key(b) for b in openai_server.requests[before:]}
    assert not asked_again & recorded_keys, "a recorded answer was requested again"
    # every request carried the key from .env (no key was set in the shell)
    auth = {h.get("Authorization") or h.get("authorization") for h in openai_server.headers}
    assert auth == {f"Bearer {FAKE_KEY}-from-dotenv"}
    assert (tmp_path / "runs" / "kill" / "answers.torn").read_bytes().startswith(b'{"kind"')


def test_a_variable_set_in_the_shell_wins_over_dotenv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("OPENAI_API_KEY=from-file\nKONKORD_TEST_ONLY_IN_FILE=file-value\n")
    monkeypatch.setenv("OPENAI_API_KEY", "from-shell")
    monkeypatch.delenv("KONKORD_TEST_ONLY_IN_FILE", raising=False)
    load_dotenv_file(dotenv)
    assert os.environ["OPENAI_API_KEY"] == "from-shell"
    assert os.environ["KONKORD_TEST_ONLY_IN_FILE"] == "file-value"
    monkeypatch.delenv("KONKORD_TEST_ONLY_IN_FILE")


@pytest.mark.parametrize("name", sorted(BAD_SUITES))
def test_run_with_a_bad_suite_fails_clearly_and_writes_nothing(project: Path, name: str) -> None:
    shutil.copy(BAD / name, project / name)
    before = _files(project)
    result = CliRunner().invoke(cli, ["run", "--suite", name, "--models", "sim/a,sim/b"])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {name}:{BAD_SUITES[name]}"
    assert _files(project) == before


@pytest.mark.parametrize("name", sorted(BAD_RUNS))
def test_run_with_a_bad_runs_json_fails_clearly_and_writes_nothing(
    project: Path, name: str
) -> None:
    shutil.copy(BAD / name, project / "runs.json")
    shutil.copytree(BAD / "ok", project / "ok")
    before = _files(project)
    result = CliRunner().invoke(cli, ["run", "--run", "demo"])
    assert result.exit_code == 2
    message = BAD_RUNS[name].replace(str(BAD / "suites"), "suites")
    assert result.stderr.strip() == f"error: runs.json:{message}"
    assert _files(project) == before


def test_run_from_runs_json_with_sim_models_and_its_summary(project: Path) -> None:
    shutil.copytree(BAD / "ok", project / "ok")
    (project / "runs.json").write_text(
        json.dumps(
            {"runs": [{"name": "demo", "suite": "ok/suite.yaml", "models": ["sim/a", "sim/b"]}]}
        )
    )
    result = CliRunner().invoke(cli, ["run", "--run", "demo"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "generated 4, cached 0, already recorded 0, failed 0; cost $0.0000\n"
    assert not (project / "runs" / "demo" / "run.json").exists()  # runs.json already says it
    again = CliRunner().invoke(cli, ["run", "--run", "demo"])
    assert again.stdout.startswith("generated 0, cached 0, already recorded 4, failed 0")

    other = CliRunner().invoke(cli, ["run", "--run", "demo", "--suite", "elsewhere.yaml"])
    assert other.exit_code == 2
    assert 'run "demo" uses ok/suite.yaml, not elsewhere.yaml' in other.stderr


def test_failures_exit_1_with_a_summary_and_unknown_prices(
    project: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KONKORD_BACKOFF_BASE", "0.01")
    openai_server.responder = lambda body, n: (
        Reply(status=500) if "Question number 01" in user_text(body) else Reply("fine")
    )
    _suite(project / "s.yaml", 3)
    args = ["run", "--suite", "s.yaml", "--models", "openai/x,openai/y"]
    result = CliRunner().invoke(
        cli, [*args, "--api-base", openai_server.url, "--retries", "1", "--timeout", "5"]
    )
    assert result.exit_code == 1
    assert result.stdout == (
        "generated 4, cached 0, already recorded 0, failed 2; cost $0.0000 + unknown "
        "(no price for openai/x, openai/y; add prices in runs.json)\n"
    )
    assert "failed: q01 / openai/x: InternalServerError" in result.stderr
    assert "rerun the same command to retry the failures" in result.stderr
    assert len(openai_server.requests) == 4 + 2 * 2  # the failing task: 1 try + 1 retry each
    manifest = json.loads((project / "runs" / "s" / "run.json").read_text())
    assert manifest["models"] == ["openai/x", "openai/y"]
    assert manifest["api_base"] == openai_server.url

    openai_server.responder = lambda body, n: Reply("recovered")
    rerun = CliRunner().invoke(cli, ["run", "--run", "s"])  # suite, models, server remembered
    assert rerun.exit_code == 0, rerun.stderr
    assert rerun.stdout.startswith("generated 2, cached 0, already recorded 4, failed 0")


def test_missing_credentials_stop_before_anything_is_called_or_written(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    _suite(project / "s.yaml", 2)
    before = _files(project)
    result = CliRunner().invoke(cli, ["run", "--suite", "s.yaml", "--models", "gpt-4o-mini,sim/b"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: run s, stage run: 2 answers from gpt-4o-mini need OPENAI_API_KEY. Set the key "
        "in the shell or in a .env file in this directory (see .env.example); nothing was called"
    )
    assert _files(project) == before


def test_an_empty_key_is_no_key(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README says `cp .env.example .env`; its empty `ANTHROPIC_API_KEY=` lines, or an
    empty variable in the shell, once let 58 calls go out and fail (litellm counts any
    variable present as a key)."""
    shutil.copy(Path(__file__).parent.parent / ".env.example", project / ".env")
    monkeypatch.setenv("OPENAI_API_KEY", "")
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    load_dotenv_file(project / ".env")  # as the first litellm import of a process does
    assert "ANTHROPIC_API_KEY" not in os.environ
    _suite(project / "s.yaml", 2)
    before = _files(project)
    result = CliRunner().invoke(
        cli, ["run", "--suite", "s.yaml", "--models", "gpt-4o-mini,claude-haiku-4-5"]
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        "error: run s, stage run: 2 answers from claude-haiku-4-5 need ANTHROPIC_API_KEY; "
        "2 answers from gpt-4o-mini need OPENAI_API_KEY. Set the key in the shell or in a .env "
        "file in this directory (see .env.example); nothing was called"
    )
    assert _files(project) == before
    assert os.environ["OPENAI_API_KEY"] == ""  # hidden for the check only


def test_a_local_server_needs_no_key(
    project: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README: `--api-base http://127.0.0.1:8000/v1` and `openai/my-model`, with no key set
    (the OpenAI client would otherwise refuse every call, each retried as a server error)."""
    monkeypatch.delenv("OPENAI_API_KEY")
    _suite(project / "s.yaml", 2)
    result = CliRunner().invoke(
        cli,
        ["run", "--suite", "s.yaml", "--models", "openai/my-model,sim/b",
         "--api-base", openai_server.url],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("generated 4, cached 0, already recorded 0, failed 0")
    assert len(openai_server.requests) == 2


def test_no_key_is_needed_for_a_model_whose_answers_are_all_recorded(
    project: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _suite(project / "s.yaml", 2)
    (project / "runs.json").write_text(
        json.dumps(
            {"runs": [{"name": "s", "suite": "s.yaml", "models": ["openai/gpt-4o-mini", "sim/b"]}]}
        )
    )
    first = CliRunner().invoke(cli, ["run", "--run", "s", "--api-base", openai_server.url])
    assert first.exit_code == 0, first.stderr
    monkeypatch.delenv("OPENAI_API_KEY")
    missing = CliRunner().invoke(cli, ["run", "--run", "s", "--force"])
    assert "2 answers from openai/gpt-4o-mini need OPENAI_API_KEY" in missing.stderr
    again = CliRunner().invoke(cli, ["run", "--run", "s"])  # no server, no key: none needed
    assert again.exit_code == 0, again.stderr
    assert again.stdout.startswith("generated 0, cached 0, already recorded 4")
    assert len(openai_server.requests) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--models", "sim/a,sim/b"], "give --suite PATH --models A,B"),
        (["--suite", "s.yaml", "--models", "sim/a"], "needs at least two models"),
        (["--suite", "s.yaml", "--models", "sim/a,sim/a"], "lists a model twice"),
        (["--suite", "s.yaml", "--models", "sim/a,,sim/b"], '"" is not a model name'),
        (["--suite", "s.yaml"], 'run "s" is not in runs.json: give --suite PATH and --models'),
        (["--suite", "s.yaml", "--models", "sim/a,sim/b", "--run", "My Run"], "is not a slug"),
    ],
)
def test_option_mistakes_are_refused_before_anything_is_written(
    project: Path, args: list[str], message: str
) -> None:
    _suite(project / "s.yaml", 2)
    before = _files(project)
    result = CliRunner().invoke(cli, ["run", *args])
    assert result.exit_code == 2
    assert message in result.stderr
    assert _files(project) == before


def test_a_run_is_not_pointed_at_another_suite(project: Path, openai_server: OpenAIServer) -> None:
    """`run --suite B --models c,d --run r` on a run made from suite A used to rewrite its
    run.json (mixing two suites' evidence under one name) and exit 0."""
    _suite(project / "a.yaml", 2)
    _suite(project / "b.yaml", 3)
    base = ["--api-base", openai_server.url]
    made = CliRunner().invoke(
        cli, ["run", "--suite", "a.yaml", "--models", "openai/a,openai/b", "--run", "r", *base]
    )
    assert made.exit_code == 0, made.output
    manifest = project / "runs" / "r" / "run.json"
    before, sent = manifest.read_bytes(), len(openai_server.requests)
    other = CliRunner().invoke(
        cli, ["run", "--suite", "b.yaml", "--models", "openai/c,openai/d", "--run", "r", *base]
    )
    assert other.exit_code == 2, other.output
    assert other.output.strip() == (
        'error: run "r" was made from a.yaml with models openai/a,openai/b, not from b.yaml; '
        "continue it without --suite, or start a new run: `konkord run --suite b.yaml "
        "--models A,B --run NEW_NAME`"
    )
    assert manifest.read_bytes() == before
    assert len(openai_server.requests) == sent
    # the same suite, named again (even by another path to it), continues the run
    again = CliRunner().invoke(
        cli, ["run", "--suite", "./a.yaml", "--models", "openai/a,openai/b", "--run", "r", *base]
    )
    assert again.exit_code == 0, again.output
    assert len(openai_server.requests) == sent
