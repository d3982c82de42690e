"""The hostile-code corpus: each answer tries one harmful thing inside the bwrap sandbox.

Every item must be contained: a limit or the sandbox stops it, the check fails with a reason
that names what happened, nothing outside the sandbox changes, no secret is seen, and the next
answer runs normally. Limits are small so the whole file stays quick on a shared machine.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import FAKE_KEY, REPO

from konkord.checks import CheckResult
from konkord.checks.runner import run_tests
from konkord.checks.sandbox import Limits, bwrap_path, require_sandbox
from konkord.errors import KonkordError

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap (bwrap) is not installed"),
]

# memory_mb=251 is a fingerprint: it appears in every sandboxed worker's command line, so
# a process left over from these tests can be found without confusing it with anyone else's.
# A wall limit far above any healthy run, even on a loaded machine: an answer that should run
# normally never meets it. The tests of the time limits themselves use SHORT_WALL: their
# answers never finish, so when the kill comes cannot change the outcome.
LIMITS = Limits(wall_s=120.0, cpu_s=2, memory_mb=251, processes=16, output_bytes=200_000, disk_mb=8)
SHORT_WALL = replace(LIMITS, wall_s=4.0)
FINGERPRINT = str(251 * 1024 * 1024)
GOOD = "def add(a, b):\n    return a + b\n"
GOOD_TESTS = "assert add(2, 3) == 5\n"


@pytest.fixture(autouse=True, scope="module")
def working_sandbox() -> None:
    """bwrap is installed: it must also work, or every test here fails with the reason."""
    try:
        require_sandbox("bwrap")
    except KonkordError as exc:
        pytest.fail(str(exc))


def leftover_processes() -> list[str]:
    """Command lines of processes started by these tests' sandboxes that are still alive."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "worker.py" in cmdline and FINGERPRINT in cmdline:
            found.append(f"{entry.name}: {cmdline[:120]}")
    return found


def run(answer: str, tests: str = "pass\n", limits: Limits = LIMITS) -> CheckResult:
    """Run one hostile answer, then check that the sandbox still runs a good one afterwards."""
    result = run_tests(answer, tests, limits, "bwrap")
    follow_up = run_tests(GOOD, GOOD_TESTS, LIMITS, "bwrap")
    assert follow_up.passed, f"the next answer did not run normally: {follow_up.reason}"
    assert result.sandbox == "bwrap"
    return result


@pytest.fixture
def outside() -> Iterator[Path]:
    """A world-writable directory outside the sandbox, with a canary file anyone may delete.

    File permissions would not stop the sandbox user here; only the sandbox can."""
    path = Path(tempfile.mkdtemp(prefix="konkord-outside-", dir="/tmp"))
    path.chmod(0o777)
    canary = path / "canary.txt"
    canary.write_text("still here")
    canary.chmod(0o666)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_infinite_loop_is_stopped_by_a_time_limit() -> None:
    result = run("while True:\n    pass\n", limits=SHORT_WALL)
    assert not result.passed
    assert result.reason is not None
    assert result.reason.startswith(("CPU-time limit", "wall-time limit")), result.reason


def test_cpu_time_limit_is_named_when_it_is_the_one_hit() -> None:
    # A generous wall limit, so that even on a loaded machine the CPU limit comes first.
    limits = Limits(wall_s=60.0, cpu_s=1, memory_mb=251, processes=16)
    result = run_tests("while True:\n    pass\n", "pass\n", limits, "bwrap")
    assert result.reason == "CPU-time limit: used more than 1 s of CPU, killed"


def test_sleeping_forever_hits_the_wall_time_limit() -> None:
    result = run("import time\ntime.sleep(600)\n", limits=SHORT_WALL)
    assert not result.passed
    assert result.reason == "wall-time limit: still running after 4 s, killed"


def test_fork_bomb_is_stopped_by_the_process_limit_and_leaves_nothing_behind() -> None:
    bomb = "import os\nwhile True:\n    os.fork()\n"
    result = run(bomb)
    assert not result.passed
    assert result.reason is not None and result.reason.startswith("process-count limit")
    assert leftover_processes() == []


def test_stubborn_fork_bomb_is_killed_at_a_time_limit() -> None:
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    result = run(bomb, limits=SHORT_WALL)
    assert not result.passed
    assert result.reason is not None
    assert result.reason.startswith(("CPU-time limit", "wall-time limit")), result.reason
    assert leftover_processes() == []


def test_allocating_10_gb_hits_the_memory_limit() -> None:
    result = run("data = bytearray(10 * 1024 ** 3)\n")
    assert not result.passed
    assert result.reason == "memory limit: the answer's code ran out of its 251 MB (MemoryError)"


def test_growing_memory_step_by_step_hits_the_memory_limit() -> None:
    result = run("chunks = []\nwhile True:\n    chunks.append(bytearray(10 ** 7))\n")
    assert not result.passed
    assert result.reason is not None and result.reason.startswith("memory limit")


def test_writing_1_gb_to_stdout_hits_the_output_limit() -> None:
    flood = "import sys\nchunk = 'x' * 1_000_000\nfor _ in range(1000):\n    sys.stdout.write(chunk)\n"
    result = run(flood)
    assert not result.passed
    assert result.reason == "output limit: wrote more than 200000 bytes, killed"
    assert len(result.to_record()["output"]) < 5000


def test_writing_1_gb_to_stderr_hits_the_output_limit() -> None:
    flood = "import os\nchunk = b'y' * 1_000_000\nfor _ in range(1000):\n    os.write(2, chunk)\n"
    result = run(flood)
    assert result.reason is not None and result.reason.startswith("output limit")


def test_filling_the_disk_stops_at_the_work_dir_size() -> None:
    fill = "chunk = b'z' * 1_000_000\nwith open('big', 'wb') as f:\n    for _ in range(1000):\n        f.write(chunk)\n"
    result = run(fill)
    assert not result.passed
    assert result.reason is not None
    assert "OSError" in result.reason or "killed by signal 25" in result.reason, result.reason


def test_network_connections_fail_and_reach_nothing() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        answer = (
            "import socket\n"
            f"socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'leak')\n"
        )
        result = run(answer)
        assert not result.passed
        assert result.reason is not None and "ConnectionRefusedError" in result.reason
        with pytest.raises(BlockingIOError):
            listener.accept()
        outbound = run("import socket\nsocket.create_connection(('93.184.216.34', 80), timeout=2)\n")
        assert outbound.reason is not None and "Network is unreachable" in outbound.reason
    finally:
        listener.close()


def test_the_api_key_in_the_callers_environment_is_never_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("KONKORD_SECRET", FAKE_KEY)
    answer = (
        "import os\n"
        "seen = [f'{k}={v}' for k, v in os.environ.items()]\n"
        "for pid in os.listdir('/proc'):\n"
        "    if pid.isdigit():\n"
        "        try:\n"
        "            seen.append(open(f'/proc/{pid}/environ', 'rb').read().decode(errors='replace'))\n"
        "        except OSError:\n"
        "            pass\n"
        "print('\\n'.join(seen))\n"
        "found = any('OPENAI_API_KEY' in s or 'sk-' in s for s in seen)\n"
    )
    result = run(answer, "assert found, 'no key in the environment'\n")
    assert not result.passed
    assert result.reason is not None and "no key in the environment" in result.reason
    assert FAKE_KEY not in result.output
    assert "PATH=/usr/bin:/bin" in result.output  # the answer did read its environment


def test_home_and_repository_files_cannot_be_read(outside: Path) -> None:
    secret = outside / "secret.txt"
    secret.write_text("top secret")
    secret.chmod(0o644)
    targets = [
        str(REPO / "pyproject.toml"),
        str(REPO / "konkord" / "__init__.py"),
        os.path.expanduser("~/.bashrc"),
        str(Path.home()),
        str(secret),
    ]
    answer = (
        "import os\n"
        f"targets = {targets!r}\n"
        "read = []\n"
        "for t in targets:\n"
        "    try:\n"
        "        read.append(os.listdir(t) if os.path.isdir(t) else open(t).read())\n"
        "    except OSError as exc:\n"
        "        print(t, type(exc).__name__)\n"
    )
    result = run(answer, "assert read, 'nothing outside could be read'\n")
    assert not result.passed
    assert result.reason is not None and "nothing outside could be read" in result.reason
    assert "top secret" not in result.output
    assert "[project]" not in result.output


def test_files_outside_the_work_dir_cannot_be_deleted_or_written(outside: Path) -> None:
    before = sorted(p.name for p in outside.iterdir())
    answer = (
        "import os, shutil\n"
        f"outside = {str(outside)!r}\n"
        "done = []\n"
        "for action in (\n"
        "    lambda: os.remove(os.path.join(outside, 'canary.txt')),\n"
        "    lambda: shutil.rmtree(outside),\n"
        "    lambda: open(os.path.join(outside, 'planted.txt'), 'w').write('x'),\n"
        "    lambda: open('/usr/planted.txt', 'w').write('x'),\n"
        "    lambda: open('/planted.txt', 'w').write('x'),\n"
        "):\n"
        "    try:\n"
        "        action()\n"
        "        done.append(action)\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__, exc)\n"
        "open('inside.txt', 'w').write('the work dir is writable')\n"
    )
    result = run(answer, "assert done, 'nothing outside could be changed'\n")
    assert not result.passed
    assert result.reason is not None and "nothing outside could be changed" in result.reason
    assert sorted(p.name for p in outside.iterdir()) == before
    assert (outside / "canary.txt").read_text() == "still here"
    assert not Path("/usr/planted.txt").exists() and not Path("/planted.txt").exists()


def test_a_background_process_does_not_outlive_the_run() -> None:
    answer = (
        "import os, subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],"
        " start_new_session=True)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        while True:\n"
        "            time.sleep(1)\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\n"
    )
    result = run(answer, "assert add_missing(), 'the tests fail on purpose'\n")
    assert not result.passed
    assert result.reason is not None and "NameError" in result.reason
    # The sandbox's pid namespace ends with the run: nothing it started is left.
    assert leftover_processes() == []
    time.sleep(0.5)
    assert leftover_processes() == []


def test_exit_before_the_tests_is_a_failure_not_a_pass() -> None:
    assert run("import sys\nsys.exit(0)\n").reason == (
        "the answer's code called exit(0) before the tests finished"
    )
    assert run("import os\nos._exit(0)\n").reason == "exited (status 0) before the tests finished"


def test_a_failing_assert_names_the_test_line() -> None:
    result = run("def add(a, b):\n    return a - b\n", "x = 1\nassert add(2, 3) == 5\n")
    assert result.reason == "test failed at tests.py line 2: assert add(2, 3) == 5"


def test_missing_bwrap_refuses_with_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("konkord.checks.sandbox.shutil.which", lambda name: None)
    with pytest.raises(KonkordError, match=r"apt-get install bubblewrap.*--sandbox none"):
        require_sandbox("bwrap")
    require_sandbox("none")  # explicitly unsandboxed: allowed


def test_control_without_a_sandbox_the_same_answers_do_reach_outside(outside: Path) -> None:
    """The containment tests above can fail: unconfined, these answers succeed."""
    secret = outside / "secret.txt"
    secret.write_text("top secret")
    answer = (
        f"print(open({str(secret)!r}).read())\n"
        f"import os\nos.remove({str(outside / 'canary.txt')!r})\n"
    )
    result = run_tests(answer, "pass\n", LIMITS, "none")
    assert result.passed and result.sandbox == "none"
    assert "top secret" in result.output
    assert not (outside / "canary.txt").exists()
