"""A run's verdict log as columns: one row per record, held as small integers and shared text.

At 20 models x 1,000 tasks a run holds 380,000 verdict records. As a dict each they take about
700 bytes apiece (270 MB) before anything is computed from them; here each is a few dozen bytes:
its names, hashes and outcome as codes into one pool of distinct strings (a judge's name, a task
id or an answer's hash is stored once however often it recurs), its numbers in numpy arrays, its
rationale as one shared reference. The raw replies (`raw`, `first_raw`) are not held: a row reads
them back from its line in the file when asked, which no figure of the report does.

A row (`VerdictRow`) reads like the record it came from (a read-only mapping with the same keys
and values), so code written for records works on rows; the hot paths (the latest record per
key, freshness, combining orders, counting) work on the columns directly.

This module keeps one table per process and version of the file; it is built while the log is
parsed, a chunk at a time (`verdict_build.py`), by two processes where the log is large
(`verdict_split.py`); the table and its rows live in `verdict_rows.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from konkord.evidence.log import EvidenceLog, ParsedStreams
from konkord.evidence.verdict_build import ColumnBuilder
from konkord.evidence.verdict_rows import RowList, VerdictRow, VerdictTable, rows_of_one_table
from konkord.evidence.verdict_split import read_split

__all__ = ["TABLES", "RowList", "VerdictRow", "VerdictTable", "rows_of_one_table", "verdict_table"]


# The tables made in this process, each kept until its log changes (as `log.PARSED` keeps
# parsed records): report, calibrate, judges and build share one.
TABLES = ParsedStreams()


def verdict_table(log: EvidenceLog) -> VerdictTable:
    """The run's verdict log as columns, parsed once per process and version of the file."""
    return log.read_into("verdicts", _TrimmedBuilder, TABLES)


class _TrimmedBuilder(ColumnBuilder):
    """The builder, handing the memory the parsed records took back to the system when done."""

    def read_stream(self, path: Path, handle: BinaryIO, size: int) -> bool:
        """The log parsed in two processes where it is large (`verdict_split`)."""
        return read_split(self, path, handle, size)

    def result(self, path: Path, torn: bool) -> VerdictTable:
        table = super().result(path, torn)
        self.__dict__.clear()
        _trim_heap()
        return table


def _trim_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's malloc_trim): the chunks of
    records parsed and dropped leave holes that numpy's later arrays (mapped on their own) do
    not reuse, and that would otherwise count in the process's memory to the end. Found among
    the symbols the interpreter already has: `ctypes.util.find_library` would start
    `ldconfig`, a process forked from this one (200 MB by then; its peak is what a parent's
    count of its children's memory shows)."""
    import contextlib
    import ctypes

    with contextlib.suppress(OSError, AttributeError, TypeError):  # not glibc: nothing to do
        ctypes.CDLL(None).malloc_trim(0)
