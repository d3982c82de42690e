"""Every number a person gives is checked for finiteness and range, with one line naming it:
`--max-cost nan` used to turn the cap off, `--temperature nan` and `--timeout nan` were sent,
`max_tokens: 10**400` in runs.json was accepted, `--run ""` fell back to the suite's name,
`judge --concurrency 0` waited forever holding the run's lock, and `--port 99999` ended in a
traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from openai_server import OpenAIServer

from konkord.cli import cli

REPO = Path(__file__).resolve().parent.parent
MODELS = "openai/model-a,openai/model-b"


def write_suite(root: Path) -> None:
    (root / "s.yaml").write_text(
        "name: s\nrubric: Prefer correct answers.\ntasks:\n"
        "  - {id: one, prompt: Question one?}\n  - {id: two, prompt: Question two?}\n"
    )


def one_line_error(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("error: "), output
    assert "Traceback" not in output
    return lines[0]


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        (["--max-cost", "nan"], "error: --max-cost nan: expected a finite number of dollars, "
                                "0 or more"),
        (["--max-cost", "inf"], "error: --max-cost inf: expected a finite number of dollars"),
        (["--max-cost", "-1"], "error: --max-cost -1: expected a finite number of dollars"),
        (["--temperature", "nan"], "error: --temperature nan: expected a finite number from 0 "
                                   "to 2"),
        (["--temperature", "3"], "error: --temperature 3: expected a finite number from 0 to 2"),
        (["--timeout", "nan"], "error: --timeout nan: expected a finite number of seconds"),
        (["--timeout", "inf"], "error: --timeout inf: expected a finite number of seconds"),
        (["--max-tokens", "1" + "0" * 400], "error: --max-tokens " + "1" + "0" * 36 + "...: "
                                            "expected a whole number from 1 to 10,000,000"),
        (["--concurrency", "0"], "error: --concurrency 0: expected a whole number from 1"),
        (["--retries", "nan"], "error: --retries nan: expected a whole number from 0 to 100"),
        (["--seed", "1e3"], "error: --seed 1e3: expected a whole number that fits in 64 bits"),
        (["--run", ""], "error: --run: run name \"\" is not a slug"),
    ],
)
def test_run_refuses_a_bad_number_in_one_line_and_calls_nothing(
    project: Path, openai_server: OpenAIServer, option: list[str], expected: str
) -> None:
    write_suite(project)
    result = CliRunner().invoke(
        cli, ["run", "--suite", "s.yaml", "--models", MODELS, "--api-base", openai_server.url,
              *option],
    )
    assert result.exit_code == 2, result.output
    assert one_line_error(result.output).startswith(expected)
    assert openai_server.requests == []
    assert not (project / "runs").exists()


def test_a_nan_cap_no_longer_turns_the_cap_off(
    project: Path, openai_server: OpenAIServer
) -> None:
    """The audit's case: a cap of nan let every call through; now it is refused, while a real
    cap of 0 still launches nothing."""
    write_suite(project)
    base = ["run", "--suite", "s.yaml", "--models", MODELS, "--api-base", openai_server.url]
    prices = {m: {"input_per_million": 1, "output_per_million": 1} for m in MODELS.split(",")}
    (project / "runs.json").write_text(json.dumps({"runs": [
        {"name": "s", "suite": "s.yaml", "models": MODELS.split(","), "prices": prices,
         "api_base": openai_server.url}
    ]}))
    base = ["run", "--run", "s"]
    refused = CliRunner().invoke(cli, [*base, "--max-cost", "nan"])
    assert refused.exit_code == 2 and openai_server.requests == []
    capped = CliRunner().invoke(cli, [*base, "--max-cost", "0"])
    assert capped.exit_code == 1, capped.output
    assert "stopped at --max-cost $0" in capped.output
    assert openai_server.requests == []


def test_judge_with_no_parallel_calls_is_refused_instead_of_waiting_forever(
    project: Path,
) -> None:
    write_suite(project)
    made = CliRunner().invoke(cli, ["run", "--suite", "s.yaml", "--models", "sim/alpha,sim/beta"])
    assert made.exit_code == 0, made.output
    # a subprocess, so that a deadlock fails the test instead of hanging it
    judged = subprocess.run(
        [sys.executable, "-m", "konkord.cli", "judge", "--run", "s", "--judge",
         "sim-judge/fair", "--concurrency", "0"],
        cwd=project, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
        text=True, timeout=120,
    )
    assert judged.returncode == 2, judged.stderr
    assert one_line_error(judged.stderr) == (
        "error: --concurrency 0: expected a whole number from 1 to 10,000"
    )
    assert not (project / "runs" / "s" / "verdicts.jsonl").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--port", "99999"],
        ["serve", "--port", "0"],
        ["label", "--run", "s", "--port", "99999"],
        ["label", "--run", "s", "--overlap", "nan"],
        ["judge", "--run", "s", "--first-pass", "openai/f", "--accept-at", "nan"],
        ["report", "--run", "s", "--seed", "-1"],
        ["check", "--run", "s", "--concurrency", "0"],
        ["simulate", "--judge-accuracy", "nan"],
        ["simulate", "--spread", "inf"],
        ["simulate", "--win-rates", "80,nan,30"],
        ["report", "--run", ""],
    ],
)
def test_other_commands_refuse_bad_numbers_in_one_line(project: Path, args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    line = one_line_error(result.output)
    assert args[-2] in line or args[-1] in line, line
    assert list(project.iterdir()) == []  # nothing written, not even .konkord


@pytest.mark.parametrize(
    ("field", "raw", "message"),
    [
        ("max_tokens", "1" + "0" * 400, "generation.max_tokens must be at most 10000000"),
        ("temperature", "NaN", "generation.temperature should be a finite number, not nan"),
        ("temperature", "Infinity", "generation.temperature should be a finite number, not inf"),
        ("seed", "1" + "0" * 30, "generation.seed must be at most 9223372036854775807"),
    ],
)
def test_runs_json_numbers_are_checked_with_file_and_line(
    project: Path, openai_server: OpenAIServer, field: str, raw: str, message: str
) -> None:
    write_suite(project)
    (project / "runs.json").write_text(
        '{"runs": [{\n  "name": "s",\n  "suite": "s.yaml",\n  "models": ["openai/a", "openai/b"],\n'
        f'  "api_base": "{openai_server.url}",\n'
        f'  "generation": {{\n    "{field}": {raw}\n  }}\n}}]}}\n'
    )
    result = CliRunner().invoke(cli, ["run", "--run", "s"])
    assert result.exit_code == 2, result.output
    assert one_line_error(result.output) == f"error: runs.json:7: runs[0].{message}"
    assert openai_server.requests == []


def test_a_nan_timeout_in_the_environment_is_refused(
    project: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_suite(project)
    monkeypatch.setenv("KONKORD_TIMEOUT", "nan")
    result = CliRunner().invoke(
        cli, ["run", "--suite", "s.yaml", "--models", MODELS, "--api-base", openai_server.url]
    )
    assert result.exit_code == 2, result.output
    assert "KONKORD_TIMEOUT='nan': expected a finite number, 0 or more" in result.output
    assert openai_server.requests == []
