"""A stream read a chunk of lines at a time, for a pass that keeps a few fields of each record.

`EvidenceLog.read` keeps every record of a stream for the process (report, calibrate and build
share them); a pass that needs only a few fields of each (the judge's closing tally) reads them
here instead, so a 380,000-verdict log is never held whole, rationales and all.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator

from konkord.errors import KonkordError
from konkord.evidence.log import PARSED, EvidenceLog, Record, parse_stream, warn_torn

CHUNK_BYTES = 1 << 23


def stream_records(
    log: EvidenceLog, stream: str, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[Record]:
    """Every record of a stream in write order, parsed a chunk of lines at a time and kept by
    no one. A parse this process already holds is used as it is; a chunk that does not read
    names its line through `read` (the whole file's line numbers)."""
    path = log.path(stream)
    try:
        with open(path, "rb") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH)  # no write half done: the end is a record's
            stat = os.fstat(handle.fileno())
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            cached = PARSED.get(path, (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns))
            if cached is not None:
                yield from cached.records
                return
            left, rest = stat.st_size, b""
            while left > 0:
                block = handle.read(min(chunk_bytes, left))
                if not block:
                    break
                left -= len(block)
                content = rest + block
                end = len(content) if left <= 0 else content.rfind(b"\n") + 1
                content, rest = content[:end], content[end:]
                try:
                    parsed = parse_stream(path, content)
                except KonkordError:
                    log.read(stream)  # names the line at fault in the whole file
                    raise
                if parsed.torn:
                    warn_torn(path)
                yield from parsed.records
    except FileNotFoundError:
        return
    except OSError as exc:
        raise KonkordError(f"{path}: cannot read ({exc.strerror or exc})") from None
