"""Run untrusted Python inside bubblewrap, with limits, and say plainly why a run stopped.

The sandbox (bwrap): no network, a read-only system (/usr and the interpreter only), a fresh
size-limited tmpfs as working directory and /tmp, no home, no repository, a cleared environment,
a private pid namespace (so background processes die with the run), and no nested user namespaces.
Inside, a small launcher sets CPU, memory, process-count and file-size limits with setrlimit
before the answer runs; the parent enforces the wall-time and output-size limits.

As root, RLIMIT_NPROC is not enforced (the kernel exempts uid 0), so the sandbox is started as
the unprivileged `nobody` user; as any other user it runs as that user.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from konkord.errors import KonkordError

SANDBOXES = ("bwrap", "none")
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


LAUNCHER = r'''
import json, os, resource, sys, traceback

def main():
    launcher_pid = os.getpid()
    status_fd = int(sys.argv[1])
    for name, (soft, hard) in json.loads(sys.argv[2]).items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    here = os.path.dirname(os.path.abspath(__file__))
    sources = {}
    for name in ("answer.py", "tests.py"):
        with open(os.path.join(here, name)) as handle:
            sources[name] = handle.read()
    namespace = {"__name__": "__konkord_answer__"}
    stage = "answer.py"
    status = {"ok": True}
    try:
        exec(compile(sources["answer.py"], "answer.py", "exec"), namespace)
        stage = "tests.py"
        exec(compile(sources["tests.py"], "tests.py", "exec"), namespace)
    except BaseException as exc:
        if os.getpid() != launcher_pid:
            os._exit(1)  # a forked child of the answer: only the launcher reports
        line = None
        for frame in traceback.extract_tb(exc.__traceback__):
            if frame.filename == "tests.py":
                line = frame.lineno
        text = None
        if line is not None:
            text = sources["tests.py"].splitlines()[line - 1].strip()
        status = {"ok": False, "stage": stage, "error": type(exc).__name__,
                  "message": str(exc)[:300], "line": line, "text": text}
        try:
            traceback.print_exc()
        except BaseException:
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    if os.getpid() != launcher_pid:
        os._exit(0)
    os.write(status_fd, json.dumps(status).encode())
    os._exit(0 if status["ok"] else 1)

main()
'''


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


def _read_output(
    proc: subprocess.Popen[bytes], limits: Limits, deadline: float
) -> tuple[bytes, bool, bool]:
    """Read the program's output until it ends, killing it at the wall-time or output limit."""
    assert proc.stdout is not None
    chunks: list[bytes] = []
    size = 0
    timed_out = exceeded = False
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            if not selector.select(timeout=min(remaining, 1.0)):
                continue
            data = os.read(proc.stdout.fileno(), 65536)
            if not data:
                break
            keep = max(0, limits.output_bytes - size)
            chunks.append(data[:keep])
            size += len(data)
            if size > limits.output_bytes:
                exceeded = True
                break
    if timed_out or exceeded:
        _kill(proc)
    return b"".join(chunks), timed_out, exceeded


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the whole process group; bwrap's --die-with-parent takes the sandbox down with it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def run_program(answer: str, tests: str, limits: Limits, sandbox: str) -> ProgramRun:
    """Run `answer` then `tests` in one namespace, under `sandbox` ("bwrap" or "none")."""
    start = time.monotonic()
    deadline = start + limits.wall_s
    with tempfile.TemporaryDirectory(prefix="konkord-sandbox-") as tmp:
        program_dir = Path(tmp, "program")
        work_dir = Path(tmp, "work")
        program_dir.mkdir()
        work_dir.mkdir()
        for name, text in (("launcher.py", LAUNCHER), ("answer.py", answer), ("tests.py", tests)):
            Path(program_dir, name).write_text(text)
            Path(program_dir, name).chmod(0o644)
        os.chmod(tmp, 0o755)
        program_dir.chmod(0o755)
        status_read, status_write = os.pipe()
        info_read, info_write = os.pipe()
        rlimits = json.dumps(limits.rlimits())
        if sandbox == "bwrap":
            python, prefix = sandbox_python()
            launcher = f"{INSIDE_DIR}/launcher.py"
            command = [*bwrap_command(program_dir, python, prefix, limits),
                       "--info-fd", str(info_write),
                       python, "-I", "-B", launcher, str(status_write), rlimits]
            cwd = program_dir
        else:
            launcher = str(program_dir / "launcher.py")
            command = [sys.executable, "-I", "-B", launcher, str(status_write), rlimits]
            cwd = work_dir
        switch = sandbox == "bwrap" and _switch_user()
        try:
            proc = subprocess.Popen(
                command,
                cwd=cwd,
                env={"PATH": "/usr/bin:/bin", "HOME": str(work_dir), "TMPDIR": str(work_dir)},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(status_write, info_write),
                start_new_session=True,
                user=NOBODY if switch else None,
                group=NOBODY if switch else None,
                extra_groups=[] if switch else None,
            )
        finally:
            os.close(status_write)
            os.close(info_write)
        try:
            raw, timed_out, exceeded = _read_output(proc, limits, deadline)
            try:
                returncode: int | None = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill(proc)
                returncode = proc.wait()
            status = _read_status(status_read)
            if sandbox == "bwrap":
                _wait_for_sandbox_end(_read_pipe(info_read), program_dir)
        finally:
            os.close(status_read)
            os.close(info_read)
            if proc.stdout is not None:
                proc.stdout.close()
    return ProgramRun(
        status=status,
        output=raw.decode("utf-8", errors="replace"),
        returncode=returncode,
        timed_out=timed_out,
        output_exceeded=exceeded,
        duration_s=time.monotonic() - start,
    )


def _read_pipe(fd: int, limit: int = 65536) -> bytes:
    """What is waiting in a pipe, without blocking on writers that are still alive."""
    os.set_blocking(fd, False)
    data = b""
    try:
        while len(data) <= limit and (chunk := os.read(fd, 65536)):
            data += chunk
    except BlockingIOError:
        pass
    return data


def _wait_for_sandbox_end(info: bytes, program_dir: Path) -> None:
    """Make sure nothing of the sandbox is alive when the run returns.

    bwrap reports its exit as soon as the main program ends; the sandbox's init (the
    `child-pid` of --info-fd) is killed a moment later and takes every process of the pid
    namespace with it. Killing and waiting for it here makes that synchronous. Before a
    signal is sent, the pid is confirmed to be this sandbox's (its command line names this
    run's private directory), so a forged or reused pid is never killed."""
    try:
        pid = int(json.JSONDecoder().raw_decode(info.decode().lstrip())[0]["child-pid"])
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError):
        return
    marker = str(program_dir).encode()
    for _ in range(500):  # at most about 5 s
        try:
            state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, IndexError):
            return
        if state in (b"Z", b"X") or marker not in cmdline:
            return  # a dead init has already taken its namespace down (zap_pid_ns_processes)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def _read_status(fd: int) -> dict[str, object] | None:
    """The launcher's JSON report, or None when the program never got to write it."""
    data = _read_pipe(fd)
    if len(data) > 65536:
        return None
    try:
        status = json.loads(data)
    except ValueError:
        return None
    return status if isinstance(status, dict) else None
