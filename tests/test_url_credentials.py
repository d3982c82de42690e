"""Credentials inside a server address (?api-key=..., user:password@) reach the server but no
file Konkord writes and nothing it prints."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import FAKE_KEY, REPO
from openai_server import OpenAIServer, Reply, user_text

from konkord.cli import cli
from konkord.configuration import credentials
from konkord.configuration.credentials import redact, strip_url_credentials

URL_KEY = "urlkey-3f9a7c1e5d2b"
URL_PASSWORD = "urlpass-8e6d4c2a0f"
WRITTEN = ("runs", "results", ".konkord", "public")


@pytest.fixture(autouse=True)
def _forget_url_secrets() -> Iterator[None]:
    """Stripped values are remembered for the life of the process; a test's must not leak."""
    before = dict(credentials._url_secrets)
    yield
    credentials._url_secrets.clear()
    credentials._url_secrets.update(before)


def _respond(body: dict[str, Any], n: int) -> Reply:
    text = user_text(body)
    if "VERDICT" in text:
        return Reply(f"The first is tidier.\nVERDICT: {1 + n % 2}")
    return Reply(f"an answer to {text[-20:]}")


def _written(project: Path, inputs: dict[Path, bytes]) -> list[Path]:
    """Every file under the project but the test's own inputs, left as the test wrote them."""
    return [
        p for p in project.rglob("*")
        if p.is_file() and not (p in inputs and p.read_bytes() == inputs[p])
    ]


def test_credentials_in_the_url_are_used_but_never_stored_or_printed(
    project: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KONKORD_BACKOFF_BASE", "0.01")
    for folder in ("templates", "content"):
        shutil.copytree(REPO / folder, project / folder)
    (project / "s.yaml").write_text(
        "name: s\nrubric: Prefer correct answers.\ntasks:\n"
        "  - {id: one, prompt: Question one?}\n  - {id: two, prompt: Question two?}\n"
    )
    openai_server.responder = _respond
    keyed = f"{openai_server.url}?api-key={URL_KEY}&deployment=main"
    outputs: list[Result] = []
    runner = CliRunner()
    args = ["run", "--suite", "s.yaml", "--models", "openai/a,openai/b", "--api-base", keyed]
    outputs.append(runner.invoke(cli, args))
    assert outputs[-1].exit_code == 0, outputs[-1].stderr
    assert "credentials in --api-base are used but not stored" in outputs[-1].stderr
    manifest = json.loads((project / "runs" / "s" / "run.json").read_text())
    assert manifest["api_base"] == f"{openai_server.url}?deployment=main"
    outputs.append(runner.invoke(cli, ["judge", "--run", "s", "--judge", "openai/j",
                                       "--api-base", keyed]))
    assert outputs[-1].exit_code == 0, outputs[-1].stderr
    # user:password@ fails in the HTTP client; its error message is stored, without the password
    host = openai_server.url.split("//")[1]
    userinfo = f"http://konkord:{URL_PASSWORD}@{host}"
    outputs.append(runner.invoke(cli, ["run", "--suite", "s.yaml", "--models", "openai/c,openai/d",
                                       "--run", "t", "--api-base", userinfo, "--retries", "0"]))
    assert outputs[-1].exit_code == 1
    assert "failed: one / openai/c" in outputs[-1].stderr
    outputs.append(runner.invoke(cli, ["report", "--run", "s", "--resamples", "50"]))
    assert outputs[-1].exit_code == 0, outputs[-1].stderr
    (project / "runs.json").write_text(json.dumps({"runs": [
        {"name": "s", "suite": "s.yaml", "models": ["openai/a", "openai/b"],
         "judges": ["openai/j"], "api_base": keyed}]}))
    inputs = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    inputs = {p: data for p, data in inputs.items() if p.parts[len(project.parts)] not in WRITTEN}
    assert project / "runs.json" in inputs  # the user's own file, key and all
    outputs.append(runner.invoke(cli, ["build"]))
    assert outputs[-1].exit_code == 0, outputs[-1].stderr

    # the key did reach the server, in the query string, with the key from the environment
    assert len(openai_server.requests) >= 4 + 4
    headers = openai_server.headers
    assert {h.get("authorization") or h.get("Authorization") for h in headers} == {
        f"Bearer {FAKE_KEY}"
    }
    written = _written(project, inputs)
    assert {p.relative_to(project).parts[0] for p in written} >= set(WRITTEN)
    for path in written:
        data = path.read_bytes()
        for secret in (URL_KEY, URL_PASSWORD, FAKE_KEY):
            assert secret.encode() not in data, f"{secret} written to {path}"
    for result in outputs:
        for secret in (URL_KEY, URL_PASSWORD, FAKE_KEY):
            assert secret not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("url", "stripped"),
    [
        ("http://h:1/v1?api-key=abcdefgh12&x=1", "http://h:1/v1?x=1"),
        ("http://h/v1?access_token=zzzzzzzz9&key=k&sig=s", "http://h/v1"),
        ("https://user:secretpw99@h/v1", "https://h/v1"),
        ("https://tokentokentoken@h/v1", "https://h/v1"),
        ("http://h/v1?q=sk-abcdefghijklmn", "http://h/v1"),
        ("http://h:8000/v1", "http://h:8000/v1"),
        ("http://[::1/v1?key=abc", "http://[::1/v1"),
    ],
)
def test_strip_url_credentials(url: str, stripped: str) -> None:
    assert strip_url_credentials(url) == stripped


def test_redact_strips_urls_in_error_text_and_the_values_wherever_they_appear() -> None:
    strip_url_credentials("http://u:pw-removed-77@h/v1")
    text = redact("Cannot reach http://u:pw-removed-77@h/v1 (sent pw-removed-77)")
    assert text == "Cannot reach http://h/v1 (sent [credential from a URL])"
