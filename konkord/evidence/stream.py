"""A stream folded a chunk of records at a time, for a pass that keeps a few fields of each.

`EvidenceLog.read` keeps every record of a stream for the process (report, calibrate and build
share them); a pass that needs only a few fields of each (the judge's closing tally) folds the
records here instead, chunk by chunk as they are parsed, and nothing else of them is kept: a
380,000-verdict log is never held whole, rationales and all.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from konkord.evidence.log import EvidenceLog, ParsedStreams, Record


class _Fold:
    """A collector that hands each parsed chunk on and keeps nothing."""

    def __init__(self, each: Callable[[list[Record]], None]) -> None:
        self.each = each

    def add(self, records: list[Record], chunk: bytes, start: int) -> None:
        self.each(records)

    def result(self, path: Path, torn: bool) -> None:
        return None


def fold_stream(log: EvidenceLog, stream: str, each: Callable[[list[Record]], None]) -> None:
    """Hand every record of a stream, in write order, to `each` a parsed chunk at a time, as
    `read` parses it (the same lock, the same line named for a bad record, the same warning
    for a torn last line), keeping none of them."""
    log.read_into(stream, lambda: _Fold(each), ParsedStreams())
