"""Credentials inside a server address (?api-key=..., user:password@) are refused before any
call, and whatever is stripped from a URL stays out of what Konkord writes and prints."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import FAKE_KEY
from openai_server import OpenAIServer, Reply, user_text

from konkord.cli import cli
from konkord.configuration import credentials
from konkord.configuration.credentials import redact, strip_url_credentials

URL_KEY = "urlkey-3f9a7c1e5d2b"
URL_PASSWORD = "urlpass-8e6d4c2a0f"


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


def test_credentials_in_the_url_are_refused_in_one_line_before_anything_is_sent(
    project: Path, openai_server: OpenAIServer
) -> None:
    """Issue 24: litellm cannot send them (user:password@ collides with the key's header; a
    query string lands inside the request path), so they are refused, never half-used."""
    (project / "s.yaml").write_text(
        "name: s\nrubric: Prefer correct answers.\ntasks:\n"
        "  - {id: one, prompt: Question one?}\n  - {id: two, prompt: Question two?}\n"
    )
    openai_server.responder = _respond
    host = openai_server.url.split("//")[1]
    keyed = f"{openai_server.url}?api-key={URL_KEY}&deployment=main"
    userinfo = f"http://konkord:{URL_PASSWORD}@{host}"
    runner = CliRunner()
    outputs: list[Result] = []
    for url, shown in ((keyed, f"{openai_server.url}?deployment=main"),
                       (userinfo, openai_server.url)):
        outputs.append(runner.invoke(cli, ["run", "--suite", "s.yaml", "--models",
                                           "openai/a,openai/b", "--api-base", url]))
        assert outputs[-1].exit_code == 2, outputs[-1].output
        assert outputs[-1].stderr == (
            f"error: --api-base {shown} {credentials.URL_CREDENTIALS_PROBLEM}\n")
    assert openai_server.requests == [] and not (project / "runs").exists()

    made = runner.invoke(cli, ["run", "--suite", "s.yaml", "--models", "openai/a,openai/b",
                               "--api-base", openai_server.url])
    assert made.exit_code == 0, made.stderr
    asked = len(openai_server.requests)
    for url in (keyed, userinfo):
        outputs.append(runner.invoke(cli, ["judge", "--run", "s", "--judge", "openai/j",
                                           "--api-base", url]))
        assert outputs[-1].exit_code == 2, outputs[-1].output
        assert credentials.URL_CREDENTIALS_PROBLEM in outputs[-1].stderr
        assert len(outputs[-1].stderr.splitlines()) == 1
    assert len(openai_server.requests) == asked

    (project / "runs.json").write_text(json.dumps({"runs": [
        {"name": "s", "suite": "s.yaml", "models": ["openai/a", "openai/b"],
         "judges": ["openai/j"], "api_base": keyed}]}, indent=1))
    for command in (["build"], ["validate", "runs.json"], ["judge", "--run", "s"]):
        outputs.append(runner.invoke(cli, command))
        assert outputs[-1].exit_code == 2, outputs[-1].output
        assert outputs[-1].stderr.startswith("error: runs.json:"), outputs[-1].stderr
        assert "api_base" in outputs[-1].stderr
        assert credentials.URL_CREDENTIALS_PROBLEM in outputs[-1].stderr
    assert len(openai_server.requests) == asked
    for result in outputs:
        for secret in (URL_KEY, URL_PASSWORD, FAKE_KEY):
            assert secret not in result.stdout + result.stderr
    for path in (project / "runs").rglob("*"):
        if path.is_file():
            assert URL_KEY.encode() not in path.read_bytes()


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
