"""A recognisable fake API key goes in; it must come out nowhere Konkord writes or prints.

The local server is hostile on purpose: it echoes the Authorization header it received into
error messages (as some real providers do, partly masked or not) and into one answer.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from conftest import FAKE_KEY, REPO
from openai_server import OpenAIServer, Reply, user_text

from konkord.cli import cli
from konkord.providers.llm import redact

SECOND_KEY = "sk-ant-konkord-test-SECOND-4be1a2"
WRITTEN = ("runs", "results", ".konkord", "public")


def _hostile(server: OpenAIServer, refuse: bool) -> Any:
    def respond(body: dict[str, Any], n: int) -> Reply:
        headers = server.headers[n - 1]
        auth = headers.get("Authorization") or headers.get("authorization") or ""
        text = user_text(body)
        if "VERDICT" in text:
            return Reply(f"Both fine; the first is tidier.\nVERDICT: {1 + n % 2}")
        if refuse and "Question two" in text:
            error = {"error": {"message": f"Incorrect API key provided: {auth}", "type": "auth"}}
            return Reply(status=401, raw_body=json.dumps(error).encode())
        if "Question three" in text:
            return Reply(f"I was called with {auth}, by the way.")
        return Reply(f"an answer to {text[-20:]}")

    return respond


def _ok(result: Result, *allowed: int) -> None:
    assert result.exit_code in (allowed or (0,)), result.output + result.stderr


def test_the_key_reaches_the_server_but_no_file_and_no_output(
    project: Path, openai_server: OpenAIServer, monkeypatch: Any
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECOND_KEY)
    monkeypatch.setenv("KONKORD_BACKOFF_BASE", "0.01")
    for folder in ("templates", "content"):  # the site's sources, for `konkord build`
        shutil.copytree(REPO / folder, project / folder)
    (project / "suites").mkdir()
    (project / "suites" / "keys.yaml").write_text(
        "name: keys\nrubric: Prefer correct answers.\ntasks:\n"
        "  - {id: one, prompt: Question one?}\n"
        "  - {id: two, prompt: Question two?}\n"
        "  - {id: three, prompt: Question three?}\n"
    )
    (project / "runs.json").write_text(
        json.dumps(
            {
                "runs": [
                    {
                        "name": "keys",
                        "suite": "suites/keys.yaml",
                        "models": ["openai/model-a", "openai/model-b"],
                        "judges": ["openai/judge"],
                        "api_base": openai_server.url,
                    }
                ]
            }
        )
    )
    runner = CliRunner()
    outputs: list[Result] = []

    openai_server.responder = _hostile(openai_server, refuse=True)
    outputs.append(runner.invoke(cli, ["run", "--run", "keys"]))
    _ok(outputs[-1], 1)  # task two refused: a failure is recorded with the server's message
    failures = [
        json.loads(line)
        for line in (project / "runs" / "keys" / "answers.jsonl").read_text().splitlines()
        if json.loads(line)["error"]
    ]
    assert len(failures) == 2
    assert "Incorrect API key provided: Bearer [OPENAI_API_KEY]" in failures[0]["error"]

    openai_server.responder = _hostile(openai_server, refuse=False)
    outputs.append(runner.invoke(cli, ["run", "--run", "keys"]))
    _ok(outputs[-1])
    outputs.append(runner.invoke(cli, ["judge", "--run", "keys"]))
    _ok(outputs[-1])
    outputs.append(runner.invoke(cli, ["report", "--run", "keys", "--resamples", "50"]))
    _ok(outputs[-1])
    outputs.append(runner.invoke(cli, ["build"]))
    _ok(outputs[-1])

    # the key really was used: every request carried it
    auths = {h.get("Authorization") or h.get("authorization") for h in openai_server.headers}
    assert auths == {f"Bearer {FAKE_KEY}"}

    written = [p for top in WRITTEN for p in (project / top).rglob("*") if p.is_file()]
    assert {p.relative_to(project).parts[0] for p in written} == set(WRITTEN)
    assert len(written) > 10
    for path in written:
        data = path.read_bytes()
        for secret in (FAKE_KEY, SECOND_KEY):
            assert secret.encode() not in data, f"{secret} written to {path}"
            assert json.dumps(secret)[1:-1].encode() not in data
    for result in outputs:
        for secret in (FAKE_KEY, SECOND_KEY):
            assert secret not in result.stdout and secret not in result.stderr


def test_redact_removes_secret_variables_and_key_shaped_strings(monkeypatch: Any) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567890")
    text = redact("auth tok-1234567890 and sk-abcdefghijklmnop and sk-short and a task-list")
    assert text == "auth [MY_SERVICE_TOKEN] and [redacted] and sk-short and a task-list"


def test_key_shaped_strings_in_an_answer_are_kept_as_written(
    project: Path, openai_server: OpenAIServer
) -> None:
    # An answer's code may hold "sk-" strings and URLs with a user: they are the answer, not
    # credentials of this run, so they go into the evidence unchanged (only the run's own
    # secret values are taken out of answers).
    written = (
        'API_KEY = "sk-abcdefghijklmnop0123456789"  # placeholder\n'
        "DB = 'https://user:hunter2@db.example.com/x'\n"
    )
    (project / "s.yaml").write_text(
        "name: s\nrubric: Prefer correct answers.\ntasks:\n  - {id: one, prompt: Question one?}\n"
    )
    openai_server.responder = lambda body, n: Reply(written)
    result = CliRunner().invoke(
        cli, ["run", "--suite", "s.yaml", "--models", "openai/model-a,openai/model-b",
              "--api-base", openai_server.url]
    )
    _ok(result)
    answers = [
        json.loads(line) for line in (project / "runs" / "s" / "answers.jsonl").read_text().splitlines()
    ]
    assert [a["text"] for a in answers] == [written, written]
