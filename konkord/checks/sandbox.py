"""Run untrusted Python inside bubblewrap, with limits, and say plainly why a run stopped.

The sandbox (bwrap): no network, a read-only system (/usr and the interpreter only), a fresh
size-limited tmpfs as working directory and /tmp, no home, no repository, a cleared environment,
a private pid namespace (so background processes die with the run), and no nested user namespaces.
Inside, the worker (worker.py) sets CPU, memory, process-count and file-size limits with
setrlimit before the answer runs; the parent enforces the wall-time and output-size limits.
The tests run outside, in the harness (harness.py), which alone decides pass or fail: the
answer's code can change anything in its own process and still only send plain data (wire.py).

As root, RLIMIT_NPROC is not enforced (the kernel exempts uid 0), so the sandbox is started as
the unprivileged `nobody` user; as any other user it runs as that user.
"""

from __future__ import annotations

import functools
import json
import os
import py_compile
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from konkord.checks.processes import (
    kill_group,
    read_outputs,
    read_pipe,
    read_status,
    wait_for_sandbox_end,
)
from konkord.errors import KonkordError

SANDBOXES = ("bwrap", "none")
WORKER = Path(__file__).resolve().parent / "worker.py"
WIRE = Path(__file__).resolve().parent / "wire.py"
PLAIN = Path(__file__).resolve().parent / "plain.py"
REMOTE = Path(__file__).resolve().parent / "remote.py"
HARNESS = Path(__file__).resolve().parent / "harness.py"
NOBODY = 65534
INSIDE_DIR = "/run/konkord"  # the program, read-only; the working directory is /tmp
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
INSTALL_BWRAP = (
    "the tests check runs answers inside bubblewrap (bwrap), which is not installed: install it "
    "with `sudo apt-get install bubblewrap` (Debian/Ubuntu) or `sudo dnf install bubblewrap` "
    "(Fedora), then run the same command again; only on a throwaway machine, --sandbox none "
    "runs model-written code without isolation"
)


@dataclass(frozen=True)
class Limits:
    """Resource limits for one program run; the defaults are stated in `konkord check --help`."""

    wall_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 512
    processes: int = 32
    output_bytes: int = 1_000_000
    disk_mb: int = 64

    def rlimits(self) -> dict[str, tuple[int, int]]:
        """The setrlimit values the launcher applies: (soft, hard) per resource name."""
        memory = self.memory_mb * 1024 * 1024
        disk = self.disk_mb * 1024 * 1024
        return {
            # soft < hard so the process gets SIGXCPU (recognisable) before SIGKILL.
            "RLIMIT_CPU": (self.cpu_s, self.cpu_s + 1),
            "RLIMIT_AS": (memory, memory),
            "RLIMIT_NPROC": (self.processes, self.processes),
            "RLIMIT_FSIZE": (disk, disk),
            "RLIMIT_CORE": (0, 0),
            "RLIMIT_NOFILE": (256, 256),
        }


@dataclass(frozen=True)
class ProgramRun:
    """What happened to one sandboxed program: its status report, output and how it ended."""

    status: dict[str, object] | None
    output: str
    returncode: int | None
    timed_out: bool
    output_exceeded: bool
    duration_s: float


def bwrap_path() -> str | None:
    """The bubblewrap executable on PATH, if any."""
    return shutil.which("bwrap")


def _switch_user() -> bool:
    return os.geteuid() == 0


def _readable_by_others(path: Path) -> bool:
    """Whether `nobody` can reach and read `path` (every parent searchable by others)."""
    try:
        if not path.stat().st_mode & stat.S_IROTH:
            return False
        return all(parent.stat().st_mode & stat.S_IXOTH for parent in path.parents)
    except OSError:
        return False


def _under_usr(path: Path) -> bool:
    """Whether a path is inside /usr, which the sandbox mounts read-only anyway."""
    return path == Path("/usr") or Path("/usr") in path.parents


def sandbox_python() -> tuple[str, str]:
    """The interpreter that runs answers, and the prefix to mount read-only for it.

    The Python running Konkord is preferred; when the sandbox user cannot reach it (a pyenv
    install in root's home) or its prefix would expose home or the project, the system's
    /usr/bin/python3 is used instead.
    """
    base = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    prefix = Path(sys.base_prefix).resolve()
    # Mounting the prefix must not expose the home directory or the project as a whole.
    private = {Path.home().resolve(), Path.cwd().resolve()}
    exposes = not _under_usr(prefix) and (
        prefix == Path("/") or any(p == prefix or prefix in p.parents for p in private)
    )
    reachable = not _switch_user() or (
        _readable_by_others(base) and _readable_by_others(prefix / "lib")
    )
    if reachable and not exposes:
        return str(base), str(prefix)
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if Path(candidate).exists():
            real = Path(os.path.realpath(candidate))
            return str(real), str(real.parent.parent)
    raise KonkordError(
        f"the sandbox user cannot read {base}; install a system python3 (/usr/bin/python3)"
    )


def bwrap_command(program_dir: Path, python: str, prefix: str, limits: Limits) -> list[str]:
    """The bwrap command line that runs the launcher in `program_dir` with nothing else visible."""
    bwrap = bwrap_path()
    if bwrap is None:
        raise KonkordError(INSTALL_BWRAP)
    args = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
            "--new-session", "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    if not _under_usr(Path(prefix)):
        args += ["--ro-bind", prefix, prefix]
    for path in ETC_FILES:
        args += ["--ro-bind-try", path, path]
    args += [
        "--proc", "/proc",
        "--dev", "/dev", "--remount-ro", "/dev",
        "--size", str(limits.disk_mb * 1024 * 1024), "--tmpfs", "/tmp",
        "--ro-bind", str(program_dir), INSIDE_DIR,
        "--remount-ro", "/",
        "--chdir", "/tmp",
        "--clearenv",
        "--setenv", "PATH", "/usr/bin:/bin",
        "--setenv", "HOME", "/tmp",
        "--setenv", "TMPDIR", "/tmp",
        "--setenv", "LANG", "C.UTF-8",
    ]
    return args


def require_sandbox(sandbox: str) -> None:
    """Refuse early, with the fix, when the chosen sandbox cannot run here."""
    if sandbox not in SANDBOXES:
        raise KonkordError(f"unknown sandbox {sandbox!r} (valid: {', '.join(SANDBOXES)})")
    if sandbox == "none":
        return
    if bwrap_path() is None:
        raise KonkordError(INSTALL_BWRAP)
    run = run_program("pass\n", "pass\n", Limits(), "bwrap")
    if run.status != {"ok": True}:
        raise KonkordError(
            "bubblewrap is installed but could not start a sandbox (are unprivileged user "
            f"namespaces disabled?): {run.output.strip()[:300]}"
        )


def run_program(answer: str, tests: str, limits: Limits, sandbox: str) -> ProgramRun:
    """Run the answer's code under `sandbox` ("bwrap" or "none") and the tests against it.

    Two processes: the worker runs the answer (sandboxed, with the limits) and serves calls;
    the harness runs the tests outside the sandbox, calls the answer across two pipes, and
    writes the verdict to a third pipe that only it holds. tests.py never enters the sandbox."""
    start = time.monotonic()
    deadline = start + limits.wall_s
    with tempfile.TemporaryDirectory(prefix="konkord-sandbox-") as tmp:
        program_dir, trusted_dir, work_dir = Path(tmp, "program"), Path(tmp, "trusted"), \
            Path(tmp, "work")
        for folder in (program_dir, trusted_dir, work_dir):
            folder.mkdir()
        for name, text in (("worker.py", WORKER.read_text()), ("wire.py", WIRE.read_text()),
                           ("plain.py", PLAIN.read_text()), ("remote.py", REMOTE.read_text()),
                           ("answer.py", answer)):
            Path(program_dir, name).write_text(text)
            Path(program_dir, name).chmod(0o644)
        _write_wire_pyc(program_dir)
        Path(trusted_dir, "tests.py").write_text(tests)
        os.chmod(tmp, 0o755)
        program_dir.chmod(0o755)
        trusted_dir.chmod(0o700)
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        status_read, status_write = os.pipe()
        info_read, info_write = os.pipe()
        rlimits = json.dumps(limits.rlimits())
        worker_args = ["-I", "-B", "", str(requests_read), str(replies_write), rlimits]
        if sandbox == "bwrap":
            python, prefix = sandbox_python()
            worker_args[2] = f"{INSIDE_DIR}/worker.py"
            command = [*bwrap_command(program_dir, python, prefix, limits),
                       "--info-fd", str(info_write), python, *worker_args]
            cwd = program_dir
        else:
            worker_args[2] = str(program_dir / "worker.py")
            command = [sys.executable, *worker_args]
            cwd = work_dir
        switch = sandbox == "bwrap" and _switch_user()
        env = {"PATH": "/usr/bin:/bin", "HOME": str(work_dir), "TMPDIR": str(work_dir)}
        procs: list[subprocess.Popen[bytes]] = []
        try:
            procs.append(subprocess.Popen(
                command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, start_new_session=True,
                pass_fds=(requests_read, replies_write, info_write),
                user=NOBODY if switch else None, group=NOBODY if switch else None,
                extra_groups=[] if switch else None,
            ))  # fmt: skip
            procs.append(subprocess.Popen(
                [sys.executable, "-I", "-S", str(HARNESS), str(requests_write),
                 str(replies_read), str(status_write), str(trusted_dir / "tests.py")],
                cwd=trusted_dir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, start_new_session=True,
                pass_fds=(requests_write, replies_read, status_write),
            ))  # fmt: skip
        finally:
            for fd in (requests_read, requests_write, replies_read, replies_write,
                       status_write, info_write):
                os.close(fd)
        worker = procs[0]
        harness = procs[-1]
        try:
            if len(procs) < 2:
                raise OSError("could not start the test harness")
            outputs, timed_out, exceeded = read_outputs(
                procs, harness, limits.output_bytes, deadline)
            if timed_out or exceeded:
                for proc in procs:
                    kill_group(proc)
            elif _wait(harness, deadline) is None:
                timed_out = True
                kill_group(harness)
            status = read_status(status_read)
            # The worker ends once the harness closed its pipe; its exit status explains a
            # worker that ended early (a limit's signal).
            returncode = _wait(worker, min(deadline, time.monotonic() + 1.0))
            kill_group(worker)
            if returncode is None:
                returncode = worker.wait()
            if not exceeded and worker.stdout is not None:  # what it wrote after the harness
                room = max(0, limits.output_bytes - len(outputs[0]) - len(outputs[1]))
                outputs[0] += read_pipe(worker.stdout.fileno(), room)[:room]
            if sandbox == "bwrap":
                wait_for_sandbox_end(read_pipe(info_read), program_dir)
        finally:
            for proc in procs:
                kill_group(proc)
                proc.wait()
                if proc.stdout is not None:
                    proc.stdout.close()
            os.close(status_read)
            os.close(info_read)
    return ProgramRun(
        status=status,
        output=(outputs[0] + outputs[1]).decode("utf-8", errors="replace"),
        returncode=returncode,
        timed_out=timed_out,
        output_exceeded=exceeded,
        duration_s=time.monotonic() - start,
    )


def _wait(proc: subprocess.Popen[bytes], until: float) -> int | None:
    """The process's exit status once it ends, or None if it still runs at `until`."""
    try:
        return proc.wait(timeout=max(0.0, until - time.monotonic()))
    except subprocess.TimeoutExpired:
        return None


@functools.cache
def _compiled(source: Path) -> bytes:
    """A module compiled once per process, as a .pyc the worker may load without checking
    its source's date (each check copies the module afresh; compiling it costs every check)."""
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp, "module.pyc")
        py_compile.compile(str(source), cfile=str(target), doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
        return target.read_bytes()


def _write_wire_pyc(program_dir: Path) -> None:
    """Put compiled wire.py, plain.py and remote.py where the worker's Python looks; another
    Python version has another cache tag and ignores them."""
    cache = program_dir / "__pycache__"
    cache.mkdir()
    for source in (WIRE, PLAIN, REMOTE):
        pyc = cache / f"{source.stem}.{sys.implementation.cache_tag}.pyc"
        pyc.write_bytes(_compiled(source))
        pyc.chmod(0o644)
    cache.chmod(0o755)
