"""Failed calls are reported so a person can act: one line per cause that many calls share,
naming the server when it could not be reached, never 48 copies of litellm's message."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from konkord.cli import cli
from konkord.providers.failures import failure_lines

REFUSED = (
    "InternalServerError: litellm.InternalServerError: InternalServerError: OpenAIException - "
    "Connection error."
)


def test_an_unreachable_server_is_one_line_with_its_address_and_the_count() -> None:
    failures = [f"t{k} / openai/{m}: {REFUSED}" for k in range(24) for m in "ab"]
    assert failure_lines(failures, "http://user:pw@10.0.0.7:8000/v1") == [
        "48 calls could not reach http://10.0.0.7:8000/v1 (OpenAIException - Connection "
        "error.): is the server running, and is that its address?"
    ]


def test_a_shared_error_is_counted_and_a_rare_one_listed() -> None:
    failures = [f"t{k} / m/a: RateLimitError: slow down" for k in range(5)] + [
        "t9 / m/b: BadRequestError: prompt too long",
        "t8 / m/b: BadRequestError: prompt too long",
    ]
    assert failure_lines(failures) == [
        "5 calls (t0 / m/a and 4 more): RateLimitError: slow down",
        "t9 / m/b: BadRequestError: prompt too long",
        "t8 / m/b: BadRequestError: prompt too long",
    ]
    many = [f"t{k} / m/a: error {k}" for k in range(12)]
    assert failure_lines(many)[-1] == "... and 2 more" and len(failure_lines(many)) == 11


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_run_against_a_server_that_is_not_there_says_so_in_one_line(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KONKORD_BACKOFF_BASE", "0.01")
    lines = ["name: s", "rubric: Prefer correct answers.", "tasks:"]
    for k in range(4):
        lines += [f"  - id: q{k}", f"    prompt: Question {k}?"]
    (project / "s.yaml").write_text("\n".join(lines) + "\n")
    base = f"http://127.0.0.1:{closed_port()}/v1"
    result = CliRunner().invoke(
        cli,
        ["run", "--suite", "s.yaml", "--models", "openai/x,openai/y", "--api-base", base,
         "--retries", "1", "--timeout", "5"],
    )
    assert result.exit_code == 1
    failed = [line for line in result.stderr.splitlines() if "failed:" in line]
    assert failed == [
        f"  failed: 8 calls could not reach {base} (OpenAIException - Connection error.): is "
        "the server running, and is that its address?"
    ], result.stderr
