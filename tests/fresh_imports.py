"""What a piece of Python leaves imported, run in a fresh interpreter: the tests that hold a
quick path (a freshness check, a stamp replayed, a complete run checked) to not importing the
heavy modules the full path needs."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

_MARK = "IMPORTED "


def run_fresh(
    project: Path, code: str, heavy: Sequence[str], env: Mapping[str, str] | None = None
) -> tuple[list[str], list[str]]:
    """Run `code` in a fresh interpreter in `project` (a SystemExit it raises is its end):
    the lines it printed, and which of `heavy` were imported when it ended."""
    prologue = (
        "import atexit, sys\n"
        f"atexit.register(lambda: print({_MARK!r} + repr(sorted(m for m in {tuple(heavy)!r}"
        " if m in sys.modules))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", prologue + code],
        cwd=project, env=None if env is None else dict(env), capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines and lines[-1].startswith(_MARK), out.stdout
    imported: list[str] = ast.literal_eval(lines[-1][len(_MARK) :])
    return lines[:-1], imported
