"""A current `konkord report` run again prints what it printed, without reading the results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from evidence_factory import add_verdict
from fresh_imports import run_fresh
from test_freshness import _report, _run

REPORTED = "results/r.json is up to date with the evidence; nothing recomputed"


def _stamps(root: Path) -> list[Path]:
    return sorted((root / ".konkord" / "report").glob("*.json"))


def _mark_stamps(root: Path) -> None:
    """Make every kept text tell itself apart, to see whether a report replays it."""
    for path in _stamps(root):
        stamp = json.loads(path.read_text())
        stamp["output"] = "REPLAYED\n"
        path.write_text(json.dumps(stamp))


def test_a_current_report_keeps_what_it_printed_and_prints_it_again(project: Path) -> None:
    _run(project)
    computed = _report()
    assert _stamps(project) == []  # a report that computed keeps nothing: it read no file back
    current = _report()
    assert current.splitlines()[-1] == REPORTED
    assert computed.splitlines()[:-1] == current.splitlines()[:-1]
    [stamp] = _stamps(project)
    assert json.loads(stamp.read_text())["output"] == current
    assert _report() == current  # replayed: the same bytes
    _mark_stamps(project)
    assert _report() == "REPLAYED\n"


@pytest.mark.parametrize(
    "change",
    ["evidence", "new stream", "suite", "runs.json", "results", "options", "width"],
)
def test_any_change_to_what_it_read_or_where_it_prints_is_not_replayed(
    project: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    texts = _run(project)
    _report()
    _report()
    _mark_stamps(project)
    extra: tuple[str, ...] = ()
    if change == "evidence":
        add_verdict(project, "r", texts, "t00", "m/b", "m/a", ("2", "1"))
    elif change == "new stream":
        (project / "runs" / "r" / "labels.jsonl").write_text("")
    elif change == "suite":
        with (project / "suites" / "tiny.yaml").open("a") as handle:
            handle.write("# an edit\n")
    elif change == "runs.json":
        (project / "runs.json").write_text((project / "runs.json").read_text() + "\n")
    elif change == "results":
        path = project / "results" / "r.json"
        path.write_text(path.read_text() + "\n")
    elif change == "options":
        extra = ("--seed", "1")
    else:
        monkeypatch.setenv("COLUMNS", "61")
    output = _report(*extra)
    assert "REPLAYED" not in output
    assert "m/a" in output


def test_a_replay_imports_neither_pydantic_nor_rich(project: Path) -> None:
    _run(project)
    _report()
    _report()
    env = {**os.environ, "COLUMNS": "80"}
    command = [sys.executable, "-c", "import sys; from konkord.cli import main; main()", "report"]
    for _ in range(2):  # the first, under another terminal shape, keeps its own stamp
        subprocess.run(
            [*command, "--run", "r", "--resamples", "50"], cwd=project, env=env, check=True
        )
    code = "from konkord.cli import cli\ncli(['report', '--run', 'r', '--resamples', '50'])\n"
    printed, imported = run_fresh(project, code, ("pydantic", "rich", "numpy", "yaml"), env)
    assert printed[-1] == REPORTED
    assert imported == []
