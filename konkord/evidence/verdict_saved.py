"""A verdict log's columns kept on disk between commands (.konkord/columns/), so that a command
after the judge reads them back instead of parsing the log again.

At 20 models x 1,000 tasks the log is 300 MB of JSON: parsing it into columns takes about 4 s
of CPU (two processes, 2.5-3 s of wall time), every time `konkord report` or `build` runs. Its
columns (`verdict_table.py`) are a few dozen MB of arrays and one pool of distinct strings;
read back from a file they take a fraction of a second.

The log stays the evidence: the saved columns say which bytes of it they were made from (how
many, and their sha256), and are used only where the log still begins with exactly those bytes:
a log edited anywhere, replaced or cut is parsed again whole, and one appended to since has only
its new lines parsed. The file holds no pickle (nothing in it is run): a header of JSON (the
pool, the texts, what no column holds, where each array lies) and the arrays' bytes, with the
sha256 of both; any file that does not read back whole and consistent is ignored. A value JSON
would not carry back exactly (NaN, a number too large) means the columns are not saved.

What is saved is what the parse made; what a command makes of it is unchanged, byte for byte
(checked against the parse by test). `.konkord/` is Konkord's own state, trusted as its response
cache is; the saved columns are derived, and deleting them only costs the next parse.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from konkord.evidence.atomic import write_atomic
from konkord.evidence.paths import STATE_DIR, outside_problem
from konkord.evidence.verdict_rows import (
    CODED,
    FLAGS,
    FLOATS,
    FROM_FILE,
    HASHES,
    INTS,
    MISSING,
    TEXTS,
    VerdictTable,
)

__all__ = ["SAVE_BYTES", "Saved", "load_saved", "save_table", "saved_path"]

# Logs smaller than this parse in well under a second: their columns are not saved (tests make
# it small).
SAVE_BYTES = 48 << 20
MAGIC = b"KONKORD-VERDICT-COLUMNS 1\n"
# Read and hashed this much at a time: the thread doing it (`verdict_table.start_early`) takes
# the interpreter back between chunks, and may wait up to a switch interval (5 ms) each time
# while the command's imports hold it; with 4 MB chunks that held the report up 0.3 s.
_HASH_CHUNK = 16 << 20
# The kinds of array a saved file may hold: nothing else is read.
_DTYPES = {"int8", "int32", "int64", "float64", "bool"}


class Saved(msgspec.Struct, frozen=True):
    """The header of a saved file: which bytes of the log the columns were made from, the
    columns' values that are not arrays, and where each array lies in the body."""

    covers: int  # bytes of the log, from its start, ending with a whole line
    log_sha256: str
    count: int  # records
    body_sha256: str
    pool: list[Any]  # the pool past absent and null
    texts: dict[str, list[Any]]  # each text field's distinct values (its array indexes them)
    extra: dict[int, dict[str, Any]]  # fields no column holds, by record
    arrays: list[tuple[str, str, int, int]]  # (name, dtype, length, offset into the body)


_HEADER = msgspec.json.Decoder(Saved)


def saved_path(log_path: Path) -> Path:
    """Where the columns of the log at `log_path` are kept: by its full path, so two runs'
    logs never share a file."""
    key = hashlib.sha256(str(log_path.resolve()).encode()).hexdigest()[:20]
    return STATE_DIR / "columns" / f"{key}.verdicts"


def _arrays(table: VerdictTable) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {f"coded/{k}": v for k, v in table.coded.items()}
    for name, (values, state) in table.nums.items():
        out[f"nums/{name}/values"], out[f"nums/{name}/state"] = values, state
    out.update({f"flags/{k}": v for k, v in table.flags.items()})
    for name, (data, kinds) in table.hashes.items():
        out[f"hashes/{name}/kinds"] = kinds
        out[f"hashes/{name}/data"] = data
    out.update({f"files/{k}": v for k, v in table.files.items()})
    out["offsets"], out["lengths"] = table.offsets, table.lengths
    return out


def _text_codes(values: list[Any]) -> tuple[list[Any], np.ndarray]:
    """A text column as its distinct values and an index into them per record (-1: absent).
    Values are told apart by type too (1, 1.0 and True are equal in Python, not in the log)."""
    codes: dict[tuple[type, Any], int] = {}
    distinct: list[Any] = []
    index = np.empty(len(values), dtype=np.int32)
    for n, value in enumerate(values):
        if value is MISSING:
            index[n] = -1
            continue
        key = (type(value), value)
        code = codes.get(key)
        if code is None:
            code = codes[key] = len(distinct)
            distinct.append(value)
        index[n] = code
    return distinct, index


def save_table(table: VerdictTable, covers: int, log_sha256: str, at: Path) -> bool:
    """Keep `table`, made from the first `covers` bytes of its log (sha256 `log_sha256`), in
    the file `at`; returns whether it was kept (not when a value would not read back exactly,
    or the file cannot be written: the next command then parses the log, as before)."""
    arrays = _arrays(table)
    texts: dict[str, list[Any]] = {}
    for name, values in table.texts.items():
        texts[name], arrays[f"texts/{name}"] = _text_codes(values)
    layout: list[tuple[str, str, int, int]] = []
    parts: list[memoryview | bytes] = []  # the arrays' own bytes: nothing copied or joined
    body_sha256 = hashlib.sha256()
    offset = 0
    for name, array in arrays.items():
        data = np.ascontiguousarray(array).data.cast("B")
        dtype = array.dtype.str if array.dtype.kind == "S" else array.dtype.name
        layout.append((name, dtype, len(array), offset))
        pad = b"\0" * (-len(data) % 8)
        parts += [data, pad]
        body_sha256.update(data)
        body_sha256.update(pad)
        offset += len(data) + len(pad)
    header = Saved(
        covers=covers,
        log_sha256=log_sha256,
        count=len(table),
        body_sha256=body_sha256.hexdigest(),
        pool=table.pool[2:],
        texts=texts,
        extra=table.extra,
        arrays=layout,
    )
    try:
        encoded = msgspec.json.encode(header)
        back = _HEADER.decode(encoded)
    except (msgspec.MsgspecError, OverflowError, TypeError, ValueError):
        return False
    if (back.pool, back.texts, back.extra) != (header.pool, header.texts, header.extra):
        return False  # NaN, or a value JSON carries back as another
    if outside_problem(at.parent, Path(".")) is not None:  # .konkord leads out of the project
        return False
    try:
        write_atomic(at, [MAGIC, len(encoded).to_bytes(8, "little"), encoded, *parts],
                     durable=False)
    except OSError:
        return False
    return True


def prefix_sha256(fd: int, size: int) -> str:
    """The sha256 of the first `size` bytes of the open file `fd` (hashing lets go of the
    interpreter: another thread runs meanwhile)."""
    digest = hashlib.sha256()
    at = 0
    while at < size:
        data = os.pread(fd, min(_HASH_CHUNK, size - at), at)
        if not data:
            break
        digest.update(data)
        at += len(data)
    return digest.hexdigest()


def read_header(at: Path) -> tuple[Saved, memoryview] | None:
    """A saved file's header and body, if it reads back whole; None otherwise."""
    try:
        with open(at, "rb") as handle:
            data = bytearray(os.fstat(handle.fileno()).st_size)
            if handle.readinto(data) != len(data):
                return None
    except OSError:
        return None
    view = memoryview(data)
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 8:
        return None
    start = len(MAGIC) + 8
    length = int.from_bytes(view[len(MAGIC) : start], "little")
    try:
        header = _HEADER.decode(view[start : start + length])
    except msgspec.MsgspecError:
        return None
    body = view[start + length :]
    if hashlib.sha256(body).hexdigest() != header.body_sha256:
        return None
    return header, body


def load_saved(
    at: Path, fd: int, size: int, whole_sha256: str | None = None
) -> tuple[int, dict[str, Any]] | None:
    """The columns saved in `at` for the log open as `fd` (its first `size` bytes seen), as a
    builder's message (`ColumnBuilder.merge`) with the bytes they cover; None where there are
    none, they do not read back whole, or the log no longer begins with the bytes they were
    made from. `whole_sha256`, the hash (hex) of those `size` bytes where the caller has it,
    spares hashing them again when the columns cover all of them."""
    found = read_header(at)
    if found is None:
        return None
    header, body = found
    if not 0 < header.covers <= size:
        return None
    if whole_sha256 is not None and header.covers == size:
        begins = whole_sha256
    else:
        begins = prefix_sha256(fd, header.covers)
    if begins != header.log_sha256:
        return None
    try:
        return header.covers, _message(header, body)
    except (ValueError, KeyError, IndexError, TypeError):
        return None  # arrays missing, of another kind or length, or codes out of range


def _message(header: Saved, body: memoryview) -> dict[str, Any]:
    count = header.count
    arrays: dict[str, np.ndarray] = {}
    for name, dtype, length, offset in header.arrays:
        kind = np.dtype(dtype)
        if dtype not in _DTYPES and not (kind.kind == "S" and kind.itemsize <= 64):
            raise ValueError(dtype)
        if length != count or offset < 0 or offset + length * kind.itemsize > len(body):
            raise ValueError(name)
        arrays[name] = np.frombuffer(body, dtype=kind, count=length, offset=offset)
    pool_size = len(header.pool) + 2
    coded = {name: arrays[f"coded/{name}"] for name in CODED}
    for column in coded.values():
        if column.dtype != np.int32 or (count and not 0 <= column.min() <= column.max() < pool_size):
            raise IndexError("code out of the pool")
    texts: dict[str, tuple[list[Any], list[int]]] = {}
    for name in TEXTS:
        distinct, index = header.texts[name], arrays[f"texts/{name}"]
        if count and not -1 <= index.min() <= index.max() < len(distinct):
            raise IndexError("text out of range")
        shown = list(map([*distinct, None].__getitem__, index.tolist()))  # -1: None
        texts[name] = (shown, np.flatnonzero(index == -1).tolist())
    extra = header.extra
    if any(not 0 <= index < count for index in extra):
        raise IndexError("record out of range")
    return {
        "count": count,
        "pool": header.pool,
        "coded": coded,
        "nums": {k: (arrays[f"nums/{k}/values"], arrays[f"nums/{k}/state"]) for k in (*INTS, *FLOATS)},
        "flags": {k: arrays[f"flags/{k}"] for k in FLAGS},
        "texts": texts,
        "distinct": header.texts,
        "hashes": {k: (arrays[f"hashes/{k}/data"], arrays[f"hashes/{k}/kinds"]) for k in HASHES},
        "files": {k: arrays[f"files/{k}"] for k in FROM_FILE},
        "extra": dict(extra),
        "offsets": arrays["offsets"],
        "lengths": arrays["lengths"],
        "log_sha256": header.log_sha256,  # of the log's first `covers` bytes, as checked
    }
