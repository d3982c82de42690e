"""The README is the front door: its commands and its command reference must stay true."""

from __future__ import annotations

import re
from pathlib import Path

import click

from konkord.cli import COMMANDS, cli

README = Path(__file__).resolve().parent.parent / "README.md"
CI_SCRIPT = Path(__file__).resolve().parent.parent / ".ci" / "run"


def summary(command: click.Command) -> str:
    """The first paragraph of a command's help, on one line: what `--help` opens with."""
    text = (command.help or "").strip()
    first = re.split(r"\n\s*\n", text, maxsplit=1)[0]
    return " ".join(first.replace("\b", "").split())


def reference_lines() -> dict[str, str]:
    lines = {}
    for match in re.finditer(r"^- `konkord (\S+)`: (.+)$", README.read_text(), re.MULTILINE):
        lines[match.group(1)] = match.group(2)
    return lines


def test_command_reference_matches_the_help_of_every_command() -> None:
    documented = reference_lines()
    assert sorted(documented) == sorted(COMMANDS), "README command reference and COMMANDS differ"
    ctx = click.Context(cli)
    for name, line in documented.items():
        command = cli.get_command(ctx, name)
        assert command is not None
        assert line == summary(command), f"README line for `konkord {name}` drifted from --help"


def test_readme_starts_with_the_two_commands_and_ci_runs_the_test_one() -> None:
    blocks = re.findall(r"```sh\n(.*?)\n```", README.read_text(), re.DOTALL)
    main_job, tests = blocks[0].strip(), blocks[1].strip()
    assert "konkord build" in main_job
    assert "pytest" in tests
    assert tests in CI_SCRIPT.read_text(), ".ci/run must run the README's test command word for word"
