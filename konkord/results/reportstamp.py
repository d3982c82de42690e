"""An up-to-date `konkord report` in a tenth of a second: what it printed, and from what.

Reading a results file back means importing pydantic, building the results schema's models and
validating every answer and verdict, then laying the tables out with rich: most of a second for
output that is the same bytes as last time. After a report found its results file current (the
inputs digest checked as before), it keeps in .konkord/report/ a hash of every file it read
(runs.json, the run's manifest, suite, deployments, evidence folder and results file, and
konkord's own code) beside the exact text it printed. The next identical command in the same
terminal shape hashes the same files and, when none changed, prints that text again without
importing any of it. Any difference takes the full path.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout, suppress
from pathlib import Path
from typing import Any, TextIO

from konkord.results.buildstamp import fingerprint, walk_tree

__all__ = ["captured", "fingerprint", "inputs", "record", "replay", "report_key"]

STAMP_DIR = Path(".konkord") / "report"
STAMP_FORMAT = 1
# What rich reads to choose the width, the colours and whether to emit control codes.
_RENDER_ENV = (
    "COLUMNS",
    "LINES",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "FORCE_COLOR",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
    "JUPYTER_COLUMNS",
    "JUPYTER_LINES",
)


def _terminal() -> dict[str, Any]:
    """The shape of the output the report is printed to: a replay must match it exactly."""
    size = None
    for fd in (0, 1, 2):  # where rich looks for the terminal's size
        try:
            size = list(os.get_terminal_size(fd))
            break
        except OSError:
            continue
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):
        tty = False
    return {
        "tty": tty,
        "size": size,
        "encoding": getattr(sys.stdout, "encoding", None),
        "env": {name: os.environ.get(name) for name in _RENDER_ENV},
    }


def report_key(run: str, out: Path | None, options: tuple[int, int, str]) -> dict[str, Any]:
    """The command (run, --out, resampling options) and the terminal it prints to."""
    return {
        "run": run,
        "out": None if out is None else os.path.normpath(out),
        "options": list(options),
        "terminal": _terminal(),
    }


def _stamp_path(key: dict[str, Any]) -> Path:
    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return STAMP_DIR / f"{name}.json"


def replay(key: dict[str, Any]) -> str | None:
    """The text an identical report printed, if nothing it read has changed since; else None."""
    try:
        stamp = json.loads(_stamp_path(key).read_text(encoding="utf-8"))
        if stamp.get("format") != STAMP_FORMAT or stamp["key"] != key:
            return None
        if fingerprint(key, stamp["files"], stamp["folders"]) != stamp["fingerprint"]:
            return None
        text = stamp["output"]
        return text if isinstance(text, str) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def inputs(
    runs_file: Path,
    manifest: Path,
    suite: Path,
    deployments: Path | None,
    evidence: Path,
    results: Path,
) -> tuple[list[str], list[str]]:
    """Every file and folder a report reads to decide that its results file is current."""
    files, folders = walk_tree(evidence)
    files += [str(runs_file), str(manifest), str(suite), str(results)]
    if deployments is not None:
        files.append(str(deployments))
    return sorted(set(files)), sorted(set(folders))


def record(
    key: dict[str, Any], files: list[str], folders: list[str], digest: str, output: str
) -> None:
    """Keep what a current report printed, with the `digest` of its inputs taken before it read
    them; the caller has checked that they were the same after printing."""
    from konkord.evidence.atomic import write_bytes_if_changed

    stamp = {
        "format": STAMP_FORMAT,
        "key": key,
        "fingerprint": digest,
        "files": files,
        "folders": folders,
        "output": output,
    }
    with suppress(OSError):  # a stamp only saves time; a report without one is still right
        write_bytes_if_changed(_stamp_path(key), (json.dumps(stamp) + "\n").encode())


class _Tee(io.TextIOBase):
    """Passes writes through to the real stdout and keeps a copy; asks it about the terminal."""

    def __init__(self, target: TextIO) -> None:
        self.target = target
        self.copy = io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.target.write(text)

    def flush(self) -> None:
        self.target.flush()

    def isatty(self) -> bool:
        return self.target.isatty()

    def fileno(self) -> int:
        return self.target.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.target, "encoding", "utf-8")


@contextmanager
def captured() -> Iterator[io.StringIO]:
    """Everything printed to stdout inside the block, printed as usual as well."""
    tee = _Tee(sys.stdout)
    with redirect_stdout(tee):  # type: ignore[type-var]
        yield tee.copy
    tee.flush()
