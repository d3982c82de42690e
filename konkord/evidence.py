"""The run's evidence log: append-only JSONL files under runs/<run>/, one record per line.

Human labels cost hours and API calls cost money, so every record is written with one `write`
under an exclusive lock and fsynced before `append` returns. A crash mid-write can leave a torn
last line; it is reported on read and cut away (kept in a .torn file) on the next append.
Later records supersede earlier ones with the same key; nothing is rewritten in place.
"""

from __future__ import annotations

import fcntl
import json
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from konkord.errors import KonkordError

Record = dict[str, Any]
Key = tuple[Any, ...]

STREAM_KEYS: dict[str, tuple[str, ...]] = {
    "answers": ("task_id", "model", "settings_hash"),
    "verdicts": ("task_id", "model_a", "model_b", "order", "judge", "frame_hash"),
    "prompts": ("frame_hash",),
    "labels": ("task_id", "model_a", "model_b", "labeller"),
    "checks": ("task_id", "model", "check"),
}


class TornLineWarning(UserWarning):
    """A crash left half a record at the end of a log; it is ignored and repaired on next append."""


@dataclass(frozen=True)
class ReadResult:
    """Records read from one stream, and whether its last line was torn."""

    records: list[Record]
    torn: bool


def now_iso() -> str:
    """A UTC timestamp for records, to the second, so logs diff cleanly."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def record_key(stream: str, record: Record) -> Key:
    """The key under which a record supersedes earlier ones in its stream."""
    return tuple(record.get(field) for field in STREAM_KEYS[stream])


class EvidenceLog:
    """The evidence of one run: a directory of JSONL streams (answers, verdicts, labels, ...)."""

    def __init__(self, run_dir: Path | str) -> None:
        self.run_dir = Path(run_dir)

    @classmethod
    def for_run(cls, name: str, root: Path | str = "runs") -> EvidenceLog:
        """The log of run `name` under the runs directory."""
        return cls(Path(root) / name)

    def path(self, stream: str) -> Path:
        """The file holding one stream."""
        if stream not in STREAM_KEYS:
            raise ValueError(f"unknown evidence stream {stream!r}")
        return self.run_dir / f"{stream}.jsonl"

    def exists(self) -> bool:
        """Whether any evidence has been written for this run."""
        return self.run_dir.is_dir() and any(self.run_dir.glob("*.jsonl"))

    @contextmanager
    def _locked(self, stream: str) -> Iterator[int]:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path(stream), os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _repair_torn_tail(self, stream: str, fd: int) -> None:
        size = os.fstat(fd).st_size
        if size == 0:
            return
        os.lseek(fd, size - 1, os.SEEK_SET)
        if os.read(fd, 1) == b"\n":
            return
        with open(self.path(stream), "rb") as handle:
            content = handle.read()
        cut = content.rfind(b"\n") + 1
        with open(self.path(stream).with_suffix(".torn"), "ab") as torn:
            torn.write(content[cut:] + b"\n")
        os.ftruncate(fd, cut)
        os.fsync(fd)

    def append(self, stream: str, record: Record) -> None:
        """Append one record durably: locked, one write, fsynced before returning."""
        self.append_many(stream, [record])

    def append_many(self, stream: str, records: list[Record]) -> None:
        """Append several records, each its own line, under one lock and one fsync."""
        if not records:
            return
        payload = b"".join(
            json.dumps(r, ensure_ascii=False, sort_keys=True).encode() + b"\n" for r in records
        )
        with self._locked(stream) as fd:
            self._repair_torn_tail(stream, fd)
            written = 0
            while written < len(payload):
                written += os.write(fd, payload[written:])
            os.fsync(fd)

    def read(self, stream: str) -> ReadResult:
        """Every record of a stream in write order; a torn last line is skipped and reported."""
        path = self.path(stream)
        if not path.exists():
            return ReadResult([], False)
        content = path.read_bytes()
        lines = content.split(b"\n")
        torn = bool(lines[-1])
        body = lines[:-1]
        if torn:
            warnings.warn(
                f"{path}: the last line is incomplete (a crash mid-write?); it is ignored "
                "and will be repaired on the next append",
                TornLineWarning,
                stacklevel=2,
            )
        records: list[Record] = []
        for number, line in enumerate(body, start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                raise KonkordError(
                    f"{path}:{number}: not a JSON record; the evidence log was edited by hand? "
                    "Restore it from git"
                ) from None
        return ReadResult(records, torn)

    def records(self, stream: str) -> list[Record]:
        """Every record of a stream, in write order."""
        return self.read(stream).records

    def latest(
        self, stream: str, where: Callable[[Record], bool] | None = None
    ) -> dict[Key, Record]:
        """The newest record per key (later records supersede earlier ones)."""
        out: dict[Key, Record] = {}
        for record in self.records(stream):
            if where is None or where(record):
                out[record_key(stream, record)] = record
        return out
