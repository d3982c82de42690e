"""Several deployments of one judge through litellm's Router: two local servers, one of them
answering 429 and 500; every call lands, each fallback is recorded by deployment name, and no
key reaches the evidence."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import FAKE_KEY
from openai_server import OpenAIServer, Reply
from test_batch import CALLS, JUDGE, content_judge, write_answers, write_project

from konkord.cli import cli
from konkord.configuration.deployments import Deployment
from konkord.configuration.runs_config import load_runs
from konkord.configuration.runspec import resolve_run
from konkord.errors import SuiteError
from konkord.evidence.log import EvidenceLog
from konkord.providers.call_pool import CallPool
from konkord.providers.deployments import Deployments
from konkord.providers.door import make_client
from konkord.stages.judge.judge import judge_run

EAST_KEY = "sk-east-KEY-0123456789abcdef"


def add_deployments(root: Path, deployments: Any) -> None:
    path = root / "runs.json"
    runs = json.loads(path.read_text())
    runs["runs"][0]["deployments"] = deployments
    path.write_text(json.dumps(runs, indent=2))


@pytest.fixture
def servers() -> Any:
    good = OpenAIServer(content_judge).start()
    flaky = OpenAIServer(lambda body, n: Reply(status=429 if n % 2 else 500)).start()
    yield good, flaky
    good.stop()
    flaky.stop()


@pytest.mark.parametrize("processes", [1, 2])
def test_every_call_lands_and_fallbacks_are_recorded(
    project: Path,
    servers: tuple[OpenAIServer, OpenAIServer],
    monkeypatch: pytest.MonkeyPatch,
    processes: int,
) -> None:
    """With --processes 2 too: a routed judge's calls stay in this process, where the Router's
    rate limits and cooldowns are (a call sent to the pool would fail here)."""
    good, flaky = servers
    pooled: list[str] = []

    async def no_pool(self: CallPool, kwargs: dict[str, Any], attempts: int) -> Any:
        pooled.append(kwargs["model"])
        raise AssertionError("a routed call went to the call pool")

    monkeypatch.setattr(CallPool, "call", no_pool)
    monkeypatch.setenv("KONKORD_BACKOFF_BASE", "0.01")
    monkeypatch.setenv("EAST_KEY", EAST_KEY)
    write_project(project, good.url)
    add_deployments(
        project,
        {
            JUDGE: [
                {"name": "flaky-west", "api_base": flaky.url},
                {"name": "east", "api_base": good.url, "api_key_env": "EAST_KEY", "rpm": 6000},
            ]
        },
    )
    spec = resolve_run("demo")
    write_answers(spec)
    client = make_client(spec, concurrency=4, retries=6)
    client.processes = processes
    assert client.deployments is not None
    summary = asyncio.run(judge_run(spec, (JUDGE,), client, concurrency=4))
    assert not pooled

    tally = summary.tallies[JUDGE]
    assert (tally.judged, tally.failed) == (CALLS, 0)
    records = EvidenceLog(spec.run_dir).records("verdicts")
    assert len(records) == CALLS and {r["kind"] for r in records} == {"verdict"}
    assert {r["deployment"] for r in records} == {"east"}
    fallbacks = [name for r in records for name in r["fallbacks"]]
    assert fallbacks and set(fallbacks) == {"flaky-west"}
    # every failed attempt at the flaky deployment is on record, none more
    assert len(fallbacks) == len(flaky.requests)
    assert len(good.requests) == CALLS
    auth = {v for h in good.headers for k, v in h.items() if k.lower() == "authorization"}
    assert auth == {f"Bearer {EAST_KEY}"}
    evidence = "".join(p.read_text() for p in spec.run_dir.glob("*.jsonl"))
    assert EAST_KEY not in evidence and FAKE_KEY not in evidence


def test_the_cli_refuses_a_missing_deployment_key_before_calling(
    project: Path, servers: tuple[OpenAIServer, OpenAIServer]
) -> None:
    good, _ = servers
    write_project(project, good.url)
    add_deployments(project, {JUDGE: [{"name": "east", "api_key_env": "NOT_SET_KEY_18"}]})
    write_answers(resolve_run("demo"))
    result = CliRunner().invoke(cli, ["judge", "--run", "demo"])
    assert result.exit_code != 0
    assert "NOT_SET_KEY_18" in result.output and "nothing was called" in result.output
    assert good.requests == []


def test_a_key_in_the_file_is_refused_with_its_line(project: Path) -> None:
    write_project(project, "http://127.0.0.1:9/v1")
    add_deployments(project, {JUDGE: [{"name": "east", "api_key": "sk-oops-123456789"}]})
    with pytest.raises(SuiteError, match=r"runs\.json:\d+: .*keys never go in a file"):
        load_runs(project / "runs.json")


def test_a_password_in_a_deployments_api_base_is_refused_with_its_line(project: Path) -> None:
    write_project(project, "http://127.0.0.1:9/v1")
    add_deployments(project, {JUDGE: [{"name": "east",
                                       "api_base": "http://me:pw-0123456789@127.0.0.1:9/v1"}]})
    result = CliRunner().invoke(cli, ["judge", "--run", "demo"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: runs.json:")
    assert "api_base" in result.stderr and "holds credentials" in result.stderr
    assert "pw-0123456789" not in result.output


@pytest.mark.parametrize("where", ["../outside.json", "/etc/passwd", "folder"])
def test_the_deployments_file_is_under_the_path_rule_of_runs_json(
    project: Path, where: str
) -> None:
    (project / "inner").mkdir()
    write_project(project / "inner", "http://127.0.0.1:9/v1")
    (project / "outside.json").write_text(json.dumps({JUDGE: [{"name": "a"}]}))
    (project / "inner" / "folder").mkdir()
    add_deployments(project / "inner", where)
    os.chdir(project / "inner")
    result = CliRunner().invoke(cli, ["judge", "--run", "demo"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: runs.json:") and "deployments" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert "root:" not in result.output


def test_deployments_of_a_model_the_run_does_not_use_are_refused(project: Path) -> None:
    write_project(project, "http://127.0.0.1:9/v1")
    add_deployments(project, {"openai/other": [{"name": "east"}]})
    with pytest.raises(SuiteError, match='"openai/other" is neither a model nor a judge'):
        load_runs(project / "runs.json")


def test_deployments_from_a_file_named_in_runs_json(project: Path) -> None:
    write_project(project, "http://127.0.0.1:9/v1")
    (project / "deployments.json").write_text(
        json.dumps({JUDGE: [{"name": "a", "rpm": 100}, {"name": "b", "rpm": 50, "tpm": 9000}]})
    )
    add_deployments(project, "deployments.json")
    spec = resolve_run("demo")
    found = Deployments(spec.deployments)
    assert found.serves(JUDGE) and not found.serves("openai/model-a")
    assert found.rpm(JUDGE) == 150 and found.tpm(JUDGE) is None
    listed = found.model_list()
    assert [d["model_info"]["id"] for d in listed] == ["a", "b"]
    assert [d["litellm_params"]["rpm"] for d in listed] == [100, 50]
    assert listed[1]["litellm_params"]["tpm"] == 9000


def test_a_deployments_file_with_a_bad_field_names_its_line(project: Path) -> None:
    write_project(project, "http://127.0.0.1:9/v1")
    (project / "deployments.json").write_text(
        '{\n  "openai/test-judge": [\n    {"name": "a", "rpm": 0}\n  ]\n}\n'
    )
    add_deployments(project, "deployments.json")
    with pytest.raises(Exception, match=r"deployments\.json:3: .*rpm"):
        resolve_run("demo")


def test_unlimited_deployment_means_no_total_rate() -> None:
    found = Deployments({"m": (Deployment(name="a", rpm=10), Deployment(name="b"))})
    assert found.rpm("m") is None


def test_build_calls_through_the_deployments_too(
    project: Path, servers: tuple[OpenAIServer, OpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    from konkord.stages.pipeline import ensure_run

    good, _ = servers
    monkeypatch.setenv("KONKORD_BACKOFF_BASE", "0.01")
    write_project(project, "http://127.0.0.1:9/v1")  # nothing listens here: only the Router works
    add_deployments(project, {JUDGE: [{"name": "east", "api_base": good.url}]})
    spec = resolve_run("demo")
    write_answers(spec)
    ensure_run(spec, offline=False, echo=lambda _: None)
    records = EvidenceLog(spec.run_dir).records("verdicts")
    assert len(records) == CALLS and {r["deployment"] for r in records} == {"east"}
    assert len(good.requests) == CALLS
