"""Bad input that used to hang or print a traceback: a zero concurrency, hand-edited evidence,
a lock folder that is a file, a port out of range. Each is one line naming what to fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from konkord.cli import cli

KONKORD = Path(sys.executable).parent / "konkord"
SUITE = "name: s\nrubric: Prefer correct answers.\ntasks:\n  - {id: q1, prompt: One?}\n  - {id: q2, prompt: Two?}\n"


def make_run(project: Path) -> None:
    """A small finished run of two simulated models with answers and verdicts."""
    (project / "s.yaml").write_text(SUITE)
    made = CliRunner().invoke(cli, ["run", "--suite", "s.yaml", "--models",
                                    "sim/alpha:strength=1,sim/beta:strength=0"])
    assert made.exit_code == 0, made.output
    judged = CliRunner().invoke(cli, ["judge", "--run", "s", "--judge", "sim-judge/referee"])
    assert judged.exit_code == 0, judged.output


@pytest.mark.parametrize(
    "command", [["judge", "--run", "s", "--judge", "sim-judge/referee"], ["check", "--run", "s"]]
)
def test_a_concurrency_of_zero_is_refused_at_once(project: Path, command: list[str]) -> None:
    """`judge --concurrency 0` waited forever for a free slot while holding the run's lock."""
    make_run(project)
    (project / "runs/s/verdicts.jsonl").unlink()  # something left to judge
    done = subprocess.run([str(KONKORD), *command, "--concurrency", "0"], cwd=project,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "Invalid value for '--concurrency': 0 is not in the range x>=1" in done.stderr
