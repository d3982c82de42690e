"""How `konkord` ends: the command's own status, its output whole, the exit hooks run, and
without the interpreter's teardown when no other thread is left (cli.main)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# `konkord ARGS`, as the console script runs it, with two spies: the exit hooks leave a mark,
# and whether the teardown was skipped is told by an object whose __del__ only teardown runs.
SCRIPT = """
import atexit, sys, threading
from pathlib import Path
mark = Path(sys.argv[1])
atexit.register(lambda: mark.write_text("hooks ran"))
class Teardown:
    def __del__(self):
        sys.stderr.write("TEARDOWN\\n")
held = Teardown()
if sys.argv[2] == "thread":
    threading.Thread(target=threading.Event().wait, args=(1.5,)).start()
from konkord.cli import main
sys.argv = ["konkord", *sys.argv[3:]]
main()
"""


def _konkord(tmp_path: Path, *args: str, thread: bool = False) -> subprocess.CompletedProcess[str]:
    mark = tmp_path / "mark"
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(mark), "thread" if thread else "-", *args],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["--version"], 0),
        (["schema", "--no-such-option"], 2),  # click's usage error
        (["validate", "missing.yaml"], 2),
    ],
)
def test_the_status_and_output_stand_the_hooks_run_and_no_teardown(
    tmp_path: Path, args: list[str], status: int
) -> None:
    done = _konkord(tmp_path, *args)
    assert done.returncode == status, done.stderr
    assert (tmp_path / "mark").read_text() == "hooks ran"
    assert "TEARDOWN" not in done.stderr
    if status == 0:
        assert done.stdout.strip()
    else:
        assert "error" in done.stderr.lower()


def test_a_large_output_is_whole_through_a_pipe(tmp_path: Path) -> None:
    done = _konkord(tmp_path, "schema")
    assert done.returncode == 0
    assert done.stdout.rstrip().endswith("}")  # the whole JSON Schema, flushed before the end
    assert "TEARDOWN" not in done.stderr


def test_a_thread_still_running_is_waited_for_the_usual_way(tmp_path: Path) -> None:
    done = _konkord(tmp_path, "--version", thread=True)
    assert done.returncode == 0
    assert (tmp_path / "mark").read_text() == "hooks ran"
    assert "TEARDOWN" in done.stderr
