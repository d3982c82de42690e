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
    assert done.stderr == "error: --concurrency 0: expected a whole number from 1 to 10,000\n"


def edit_first(project: Path, stream: str, field: str, value: object) -> None:
    path = project / "runs" / "s" / f"{stream}.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[0])
    record[field] = value
    lines[0] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("stream", "field", "value", "problem"),
    [
        ("answers", "text", 5, 'field "text" is a number, expected text or null'),
        ("answers", "model", ["a"], 'field "model" is a list, expected text'),
        ("answers", "cost_usd", "0.3", 'field "cost_usd" is text, expected a number or null'),
        ("verdicts", "model_a", ["a"], 'field "model_a" is a list, expected text'),
        ("verdicts", "cost_usd", "abc", 'field "cost_usd" is text, expected a number or null'),
        ("verdicts", "winner", [1], 'field "winner" is a list, expected text or null'),
        ("verdicts", "retried", 1, 'field "retried" is a number, expected true or false or null'),
    ],
)
def test_a_hand_edited_record_is_one_line_naming_file_line_and_field(
    project: Path, stream: str, field: str, value: object, problem: str
) -> None:
    make_run(project)
    edit_first(project, stream, field, value)
    expected = (f"error: runs/s/{stream}.jsonl:1: {problem}; was the evidence log edited by "
                "hand? Restore it from git")
    for command in (["report", "--run", "s", "--resamples", "20"], ["calibrate", "--run", "s"],
                    ["judge", "--run", "s", "--judge", "sim-judge/referee"]):
        result = CliRunner().invoke(cli, command)
        assert result.exit_code == 2, (command, result.output)
        assert result.stderr.strip().splitlines()[-1] == expected, command


def test_a_folder_where_a_stream_should_be_is_one_line(project: Path) -> None:
    make_run(project)
    (project / "runs/s/answers.jsonl").unlink()
    (project / "runs/s/answers.jsonl").mkdir()
    for command in (["report", "--run", "s", "--resamples", "20"], ["judge", "--run", "s"]):
        result = CliRunner().invoke(cli, command)
        assert result.exit_code == 2, result.output
        assert result.stderr == "error: runs/s/answers.jsonl: cannot read (Is a directory)\n"


def test_a_lock_folder_that_is_a_file_is_one_line(project: Path) -> None:
    make_run(project)
    (project / ".konkord" / "locks").mkdir(parents=True, exist_ok=True)
    (project / ".konkord" / "locks").rename(project / "away")
    (project / ".konkord" / "locks").write_text("not a folder")
    for command in (["run", "--run", "s"], ["judge", "--run", "s"]):
        result = CliRunner().invoke(cli, command)
        assert result.exit_code == 2, result.output
        assert result.stderr == (
            "error: .konkord/locks/s.lock: cannot open the run's writer lock (.konkord/locks is "
            "a file); .konkord/locks must be a folder Konkord can write: move away what is "
            "there\n"
        )


@pytest.mark.parametrize("command", [["serve"], ["label", "--run", "s"]])
def test_a_port_out_of_range_is_refused(project: Path, command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command, "--port", "99999"])
    assert result.exit_code == 2
    assert result.stderr == "error: --port 99999: expected a whole number from 1 to 65,535\n"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{not json", "not a JSON record"),
        ('{"kind": "label", "task_id": "q1", "model_a": "a", "model_b": "b", "labeller": 7}',
         'field "labeller" is a number, expected text'),
    ],
)
def test_label_stops_first_on_a_corrupt_labels_file(
    project: Path, line: str, problem: str
) -> None:
    """The app started and showed the error only inside its page; the command stops first."""
    pytest.importorskip("streamlit")
    make_run(project)
    (project / "runs/s/labels.jsonl").write_text(line + "\n")
    done = subprocess.run([str(KONKORD), "label", "--run", "s", "--no-browser", "--port", "9"],
                          cwd=project, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: runs/s/labels.jsonl:1: {problem}")
    assert len(done.stderr.splitlines()) == 1
