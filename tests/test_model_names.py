"""Model and judge names are checked against litellm's own map before anything is paid or
recorded; names litellm cannot list are left alone."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from konkord.cli import cli
from konkord.errors import KonkordError
from konkord.providers.model_names import check_model_names, is_known, model_map, nearest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def test_the_map_is_litellms_own_file_and_holds_the_common_names() -> None:
    known = model_map()
    assert len(known) > 1000
    assert known["gpt-4o-mini"]["litellm_provider"] == "openai"


@pytest.mark.parametrize(
    "name",
    [
        "gpt-4o-mini",
        "claude-haiku-4-5",
        "anthropic/claude-haiku-4-5",
        "gemini/gemini-2.5-flash",
        "sim/atlas:strength=1",
        "sim-judge/referee:accuracy=0.8",
        "ollama/llama3",
        "azure/my-deployment",
        "ft:gpt-4o-mini:acme::abc",
    ],
)
def test_known_and_unlistable_names_are_accepted(name: str) -> None:
    assert is_known(name)


@pytest.mark.parametrize(
    ("name", "suggested"),
    [
        ("gpt-4o-mni", "gpt-4o-mini"),
        ("anthropic/claude-haku-4-5", "anthropic/claude-haiku-4-5"),
        ("gemini/gemini-2.5-flsh", "gemini/gemini-2.5-flash"),
    ],
)
def test_a_typo_is_refused_with_the_nearest_names(name: str, suggested: str) -> None:
    assert not is_known(name)
    assert nearest(name)[0] == suggested
    with pytest.raises(KonkordError) as caught:
        check_model_names(["sim/a", name], "--models")
    message = str(caught.value)
    assert "\n" not in message
    assert f'"{name}"' in message and suggested in message


def test_any_name_behind_an_api_base_is_taken_as_written() -> None:
    check_model_names(["openai/my-local-model", "gpt-4o-mni"], "--models", "http://127.0.0.1:1")
    assert not is_known("openai/my-local-model")


def test_readme_names_every_model_by_a_name_litellm_knows() -> None:
    text = README.read_text()
    # `konkord simulate --models 6` takes a count, not names
    names = re.findall(r"^(?!.*konkord simulate).*?--(?:models|judge|first-pass) (\S+)", text, re.M)
    # runs.json snippets in prose; the ```json example is served from its api_base
    prose = re.sub(r"```json\n.*?```", "", text, flags=re.DOTALL)
    names += re.findall(r'"(?:first_pass|judges)": \[?"([^"]+)"', prose)
    assert names, "the README shows no --models or --judge"
    assert "gemini/gemini-2.5-pro" in names, "the cascade example is not read"
    for option in names:
        for name in option.split(","):
            if name.startswith(("NAME", "A,B")) or "my-model" in name:
                continue
            assert is_known(name), f"README names {name}, which litellm's map does not hold"


def test_run_with_a_typo_calls_and_records_nothing(tmp_path: Path) -> None:
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "s.yaml").write_text(
        "name: s\nrubric: Prefer correct answers.\ntasks:\n  - id: t1\n    prompt: Hi?\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "konkord.cli",
            "run",
            "--suite",
            "suites/s.yaml",
            "--models",
            "gpt-4o-mni,claude-haiku-4-5",
            "--run",
            "mine",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert '"gpt-4o-mni"' in lines[0] and "gpt-4o-mini" in lines[0]
    assert not (tmp_path / "runs").exists()


def test_the_check_does_not_import_litellm() -> None:
    code = (
        "import sys; from konkord.providers.model_names import is_known; "
        "assert not is_known('gpt-4o-mni'); print('litellm' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "False"


def test_judge_with_a_typo_calls_and_records_nothing(project: Path) -> None:
    (project / "s.yaml").write_text(
        "name: s\nrubric: Prefer correct answers.\ntasks:\n  - id: t1\n    prompt: Hi?\n"
    )
    runner = CliRunner()
    made = runner.invoke(cli, ["run", "--suite", "s.yaml", "--models", "sim/a,sim/b", "--run", "r"])
    assert made.exit_code == 0, made.output
    for option in (["--judge", "gemini/gemini-2.5-flsh"],
                   ["--judge", "gemini/gemini-2.5-pro", "--first-pass", "gemini/gemini-2.5-flsh"]):
        result = runner.invoke(cli, ["judge", "--run", "r", *option])
        assert result.exit_code == 2
        assert result.stderr.count("\n") == 1, result.stderr
        assert '"gemini/gemini-2.5-flsh"' in result.stderr
        assert "did you mean gemini/gemini-2.5-flash" in result.stderr
    assert not (project / "runs" / "r" / "verdicts.jsonl").exists()
