"""How `konkord` ends: the command's own status, its output whole, the exit hooks run, and
without the interpreter's teardown when no other thread is left (cli.main)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# `konkord ARGS`, as the console script runs it, with three spies: the exit hooks leave a mark,
# an object's __del__ (run by the teardown only) says TEARDOWN, and os._exit says FAST EXIT.
SCRIPT = """
import atexit, os, sys, threading
from pathlib import Path
leave = os._exit
def fast_exit(status):
    sys.stderr.write("FAST EXIT\\n")
    sys.stderr.flush()
    leave(status)
os._exit = fast_exit
mark = Path(sys.argv[1])
atexit.register(lambda: mark.write_text("hooks ran"))
class Teardown:
    def __del__(self):
        sys.stderr.write("TEARDOWN\\n")
held = Teardown()
if sys.argv[2] == "thread":
    threading.Thread(target=threading.Event().wait, args=(1.5,)).start()
if sys.argv[2] == "profiled":  # as pyinstrument or cProfile: they write their report after
    sys.setprofile(lambda *args: None)
from konkord.cli import main
sys.argv = ["konkord", *sys.argv[3:]]
main()
"""


def _konkord(tmp_path: Path, *args: str, mode: str = "-") -> subprocess.CompletedProcess[str]:
    mark = tmp_path / "mark"
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(mark), mode, *args],
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
    assert "TEARDOWN" not in done.stderr and "FAST EXIT" in done.stderr
    if status == 0:
        assert done.stdout.strip()
    else:
        assert "error" in done.stderr.lower()


def test_a_large_output_is_whole_through_a_pipe(tmp_path: Path) -> None:
    done = _konkord(tmp_path, "schema")
    assert done.returncode == 0
    assert done.stdout.rstrip().endswith("}")  # the whole JSON Schema, flushed before the end
    assert "TEARDOWN" not in done.stderr


@pytest.mark.parametrize("mode", ["thread", "profiled"])
def test_a_running_thread_or_a_profiler_gets_the_usual_exit(tmp_path: Path, mode: str) -> None:
    done = _konkord(tmp_path, "--version", mode=mode)
    assert done.returncode == 0
    assert (tmp_path / "mark").read_text() == "hooks ran"
    assert "FAST EXIT" not in done.stderr
