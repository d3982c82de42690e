"""Static checks: compiles, ruff_clean, mypy_clean. They read the answer's code, never run it.

ruff and mypy run as subprocesses on a private copy of the code with no project configuration,
so a result depends on the answer alone and not on where `konkord check` was started.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from konkord.checks import CheckResult
from konkord.errors import KonkordError

# ruff's default rule set, named so a ruff upgrade or a user config cannot change the meaning.
RUFF_RULES = "E4,E7,E9,F"
TOOL_TIMEOUT_S = 120.0


def tool_command(name: str) -> list[str] | None:
    """How to start ruff or mypy: as a module of this Python, else from PATH, else None."""
    if importlib.util.find_spec(name) is not None:
        return [sys.executable, "-m", name]
    path = shutil.which(name)
    return [path] if path else None


def require_tool(check: str) -> list[str]:
    """The command for the tool a static check needs, or a KonkordError saying how to install it."""
    name = {"ruff_clean": "ruff", "mypy_clean": "mypy"}[check]
    command = tool_command(name)
    if command is None:
        raise KonkordError(
            f"the {check} check needs {name}, which is not installed: "
            f"pip install {name} (into the environment that runs konkord)"
        )
    return command


def check_compiles(code: str) -> CheckResult:
    """Whether the code parses and compiles as Python (compiling does not execute it)."""
    start = time.monotonic()
    try:
        compile(code, "answer.py", "exec", dont_inherit=True)
    except SyntaxError as exc:
        reason = f"syntax error at line {exc.lineno}: {exc.msg}"
        return CheckResult("compiles", False, reason, reason, time.monotonic() - start, "static")
    except (ValueError, RecursionError, MemoryError) as exc:
        reason = f"does not compile: {type(exc).__name__}: {exc}"
        return CheckResult("compiles", False, reason, reason, time.monotonic() - start, "static")
    return CheckResult("compiles", True, None, "", time.monotonic() - start, "static")


def _run_tool(check: str, args: list[str], code: str) -> CheckResult:
    command = require_tool(check)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="konkord-static-") as tmp:
        Path(tmp, "answer.py").write_text(code)
        Path(tmp, "mypy.ini").write_text("[mypy]\n")
        try:
            proc = subprocess.run(
                [*command, *args],
                cwd=tmp,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=TOOL_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            reason = f"{check} did not finish within {TOOL_TIMEOUT_S:.0f} s"
            return CheckResult(check, False, reason, "", time.monotonic() - start, "static")
    duration = time.monotonic() - start
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode == 0:
        return CheckResult(check, True, None, output, duration, "static")
    problems = [line for line in output.splitlines() if line.startswith("answer.py:")]
    if proc.returncode in (1, 2) and problems:
        noun = "problem" if len(problems) == 1 else "problems"
        reason = f"{len(problems)} {noun}, first: {problems[0].removeprefix('answer.py:')}"
    else:
        reason = f"{check} failed to run (exit {proc.returncode}): {output[:200]}"
    return CheckResult(check, False, reason, output, duration, "static")


def check_ruff(code: str) -> CheckResult:
    """Whether ruff's default rules find nothing in the code."""
    args = ["check", "--isolated", "--no-cache", "--output-format", "concise",
            "--select", RUFF_RULES, "answer.py"]
    return _run_tool("ruff_clean", args, code)


def mypy_cache_dir() -> str:
    """A cache shared by this user's mypy runs (typeshed analysed once: ~1.3 s -> ~0.3 s each).

    mypy replaces cache files atomically, so parallel checks may share it; a directory that is
    not this user's own is not trusted, and each run then gets a private cache instead."""
    path = Path(tempfile.gettempdir()) / f"konkord-mypy-cache-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = path.lstat()
    except OSError:
        return ".mypy_cache"
    if path.is_symlink() or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return ".mypy_cache"
    return str(path)


def check_mypy(code: str) -> CheckResult:
    """Whether mypy (default strictness, missing imports ignored) reports no error."""
    args = ["--config-file", "mypy.ini", "--cache-dir", mypy_cache_dir(), "--no-error-summary",
            "--no-color-output", "--hide-error-context", "--ignore-missing-imports", "answer.py"]
    return _run_tool("mypy_clean", args, code)
