"""Files Konkord rewrites are replaced whole: a kill -9 at any write leaves old bytes or new.

The kills are real: strace injects SIGKILL at a system call of the running `konkord`, as the
issue's audit did. A file from an older version that a kill left empty or cut gets a message
that says how to recover, and the recovery works.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from konkord.cli import cli
from konkord.evidence.atomic import write_atomic
from konkord.results.schema import read_results

KONKORD = Path(sys.executable).parent / "konkord"
STRACE = shutil.which("strace")
needs_strace = pytest.mark.skipif(STRACE is None, reason="strace is not installed")
RUN = ["run", "--suite", "s.yaml", "--models", "sim/alpha,sim/beta"]


def _suite(root: Path) -> None:
    (root / "s.yaml").write_text(
        "name: s\nrubric: Prefer correct answers.\ntasks:\n"
        "  - {id: one, prompt: Question one?}\n  - {id: two, prompt: Question two?}\n"
    )


def _strace(root: Path, inject: str, *args: str, path: Path | None = None) -> int:
    assert STRACE is not None
    syscall = inject.split(":")[0]
    command = [STRACE, "-f", "-qq", "-o", os.devnull, "-e", f"trace={syscall}"]
    command += ["-e", f"inject={inject}"]
    if path is not None:  # (--seccomp-bpf would be faster, but it miscounts when=N)
        command += ["-P", str(path)]
    env = os.environ | {"PYTHONDONTWRITEBYTECODE": "1"}
    # The timeout only guards against a hang: ptrace stops at every syscall, and on a loaded
    # 2-core machine one traced `konkord run` took over 120 s.
    done = subprocess.run([*command, *args], cwd=root, env=env, capture_output=True, timeout=900)
    return done.returncode


@needs_strace
def test_a_kill_at_any_write_to_run_json_cannot_empty_it(tmp_path: Path) -> None:
    _suite(tmp_path)
    manifest = tmp_path / "runs" / "s" / "run.json"
    manifest.parent.mkdir(parents=True)
    # the trap works: a program writing run.json in place is killed and leaves it empty
    writer = "open('runs/s/run.json', 'w').write('{}')"
    code = _strace(tmp_path, "write:signal=KILL", sys.executable, "-c", writer, path=manifest)
    assert code == -9 or code == 137
    assert manifest.read_bytes() == b""
    manifest.unlink()
    # konkord never writes run.json in place (temp file, fsync, rename): nothing to kill
    code = _strace(tmp_path, "write:signal=KILL", str(KONKORD), *RUN, path=manifest)
    assert code == 0
    assert json.loads(manifest.read_text())["models"] == ["sim/alpha", "sim/beta"]


@needs_strace
def test_a_kill_before_the_rename_leaves_no_file_and_the_rerun_finishes(tmp_path: Path) -> None:
    _suite(tmp_path)
    # the first fsync of `konkord run` is the one of run.json's temporary file
    code = _strace(tmp_path, "fsync:signal=KILL:when=1", str(KONKORD), *RUN)
    assert code in (-9, 137)
    run_dir = tmp_path / "runs" / "s"
    assert not (run_dir / "run.json").exists()
    assert next(p.name for p in run_dir.iterdir()).startswith(".run.json.")  # the temp file
    again = subprocess.run([str(KONKORD), *RUN], cwd=tmp_path, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert json.loads((run_dir / "run.json").read_text())["name"] == "s"
    # the killed process's temporary file is removed by the next writer (issue 24)
    assert not [p.name for p in run_dir.iterdir() if p.name.endswith(".tmp")]


def test_stale_temporary_files_are_removed_by_the_next_build_in_public_too(
    tmp_path: Path,
) -> None:
    """A kill at the rename left `.*.tmp` files that were never removed, in public/ too, where
    they would be deployed. Only Konkord's own naming, and only a dead writer's, goes."""
    from fixtures_site import build_standard_site

    runs = build_standard_site(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])  # a pid that no longer runs
    dead.wait()
    public = tmp_path / "public"
    run_pages = public / runs[0].run
    stale = [public / f".index.html.{dead.pid}.0badf00d.tmp",
             run_pages / f".index.html.{dead.pid}.deadbeef.tmp"]
    kept = [run_pages / ".index.html.1.cafecafe.tmp",  # pid 1 runs: a live writer's file
            run_pages / "notes.tmp", run_pages / f".index.html.{dead.pid}.tmp"]
    for path in stale + kept:
        path.write_text("half a page")
    os.chdir(tmp_path)
    try:
        built = CliRunner().invoke(cli, ["build", "--offline"])
    finally:
        os.chdir(Path(__file__).parent)
    assert built.exit_code == 0, built.output
    assert [p for p in stale if p.exists()] == []
    assert all(p.exists() for p in kept)


# run.json as a crash could leave it (an older konkord wrote it in place): corpus file ->
# the problem named after "runs/s/run.json:"
BAD_MANIFESTS = {
    "empty.json": "1: the file is empty",
    "torn.json": "4: invalid JSON (Unterminated string starting at)",
    "zeros.json": "1: this is a binary file, not text",  # delayed allocation after a power cut
}
MANIFESTS = Path(__file__).parent / "data" / "bad_inputs" / "manifests"


def test_the_manifest_corpus_is_all_covered() -> None:
    assert {p.name for p in MANIFESTS.iterdir()} == set(BAD_MANIFESTS)


@pytest.mark.parametrize("name", sorted(BAD_MANIFESTS))
def test_an_empty_or_torn_run_json_says_how_to_recover(project: Path, name: str) -> None:
    _suite(project)
    assert CliRunner().invoke(cli, RUN).exit_code == 0
    shutil.copy(MANIFESTS / name, project / "runs" / "s" / "run.json")
    judged = CliRunner().invoke(cli, ["judge", "--run", "s", "--judge", "sim-judge/fair"])
    assert judged.exit_code == 2
    message = judged.stderr.strip()
    assert message.count("\n") == 0
    assert message.startswith(f"error: runs/s/run.json:{BAD_MANIFESTS[name]}; if a crash")
    assert "Traceback" not in judged.output
    assert "konkord run --run s --suite SUITE --models A,B" in message
    # the way out it names works, and pays nothing again
    again = CliRunner().invoke(cli, [*RUN, "--run", "s"])
    assert again.exit_code == 0, again.stderr
    assert again.stdout.startswith("generated 0, cached 0, already recorded 4")
    judged = CliRunner().invoke(cli, ["judge", "--run", "s", "--judge", "sim-judge/fair"])
    assert judged.exit_code == 0, judged.stderr


@pytest.mark.parametrize(
    ("content", "problem"),
    [(b"", "the file is empty"), (b'{"schema_version": 3, "run": "s", "ju', "not valid JSON")],
)
def test_an_empty_or_torn_results_file_says_how_to_recover(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(content)
    with pytest.raises(Exception) as caught:
        read_results(path)
    assert problem in str(caught.value)
    assert "konkord report --run NAME" in str(caught.value)


def test_write_atomic_replaces_whole_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "f.json"
    write_atomic(target, "old")
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert [p.name for p in target.parent.iterdir()] == ["f.json"]
    assert oct(target.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def test_a_failed_write_removes_its_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    target.mkdir()  # the rename onto a directory fails after the temp file was written
    with pytest.raises(OSError):
        write_atomic(target, "new")
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]
    assert target.is_dir() and list(target.iterdir()) == []


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old
