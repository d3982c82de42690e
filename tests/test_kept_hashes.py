"""The hash of a large evidence file kept between commands (`log_hashes.kept_sha256`): taken
where the file has exactly the stamp it had (device, inode, size, modification and change
times), never where it was written since, or was changed just before it was hashed; and a kept
hash that is wrong only costs a parse, never passes columns that are not the log's."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from test_verdict_saved import assert_same_table, parsed, read_afresh, saving, write_log
from test_verdict_table import messy_records

from konkord.evidence import log_hashes, verdict_saved, verdict_table

__all__ = ["saving"]  # the fixture, shared with test_verdict_saved


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing known in this process; every file's hash may be kept."""
    log_hashes.PROMISED.clear()
    verdict_table.EARLY.clear()
    monkeypatch.setattr(log_hashes, "KEEP_BYTES", 0)


def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written by the test count as settled (else only after two seconds)."""
    monkeypatch.setattr(log_hashes, "SETTLED_NS", 0)


def kept_records() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in log_hashes.KEPT_DIR.glob("*.json")]


def new_command() -> None:
    log_hashes.PROMISED.clear()
    verdict_table.EARLY.clear()
    verdict_table.TABLES.clear()


def test_a_kept_hash_is_taken_only_for_the_file_as_it_was(
    saving: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    settled(monkeypatch)
    path = Path("big.jsonl")
    path.write_bytes(b'{"a": 1}\n' * 1000)
    true = hashlib.sha256(path.read_bytes()).digest()
    assert log_hashes.sha256_of(path) == true
    [record] = kept_records()
    assert record["sha256"] == true.hex() and record["path"] == str(path.resolve())
    # The next command takes the kept hash without reading the file: a kept hash altered
    # on purpose shows it was taken as kept.
    forged = "ab" * 32
    kept_file = next(log_hashes.KEPT_DIR.glob("*.json"))
    kept_file.write_text(json.dumps({**record, "sha256": forged}))
    new_command()
    assert log_hashes.sha256_of(path) == bytes.fromhex(forged)
    # Rewritten in place, the same size and modification time put back: the change time
    # moved, and the file is hashed again.
    before = path.stat()
    with path.open("r+b") as handle:
        handle.write(b'{"a": 2}\n')
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    new_command()
    assert log_hashes.sha256_of(path) == hashlib.sha256(path.read_bytes()).digest() != true
    # A copy put in its place is another inode.
    kept_file.write_text(json.dumps({**kept_records()[0], "sha256": forged}))
    copy = Path("copy.jsonl")
    copy.write_bytes(path.read_bytes())
    os.utime(copy, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))
    os.replace(copy, path)
    new_command()
    assert log_hashes.sha256_of(path) == hashlib.sha256(path.read_bytes()).digest()


def test_a_file_changed_just_before_it_was_hashed_has_no_hash_kept(saving: list[int]) -> None:
    """Written within the file system clock's tick of the hash, a later write could leave
    the stamp as it was (git's racy case): nothing is kept for two seconds."""
    path = Path("big.jsonl")
    path.write_bytes(b'{"a": 1}\n' * 1000)
    assert log_hashes.sha256_of(path) == hashlib.sha256(path.read_bytes()).digest()
    assert kept_records() == []


def test_small_files_keep_no_hash(saving: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    settled(monkeypatch)
    monkeypatch.setattr(log_hashes, "KEEP_BYTES", 1 << 20)
    path = Path("small.jsonl")
    path.write_bytes(b'{"a": 1}\n')
    log_hashes.sha256_of(path)
    assert kept_records() == []


def test_the_columns_check_keeps_the_logs_hash_and_the_next_takes_it(
    saving: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    settled(monkeypatch)
    log = write_log(messy_records(4)[:400])
    path = log.path("verdicts")
    read_afresh(log)  # parsed, its columns saved (and the hash of the log kept with them)
    true = hashlib.sha256(path.read_bytes()).hexdigest()
    assert [r["sha256"] for r in kept_records()] == [true]
    hashed: list[int] = []
    real = verdict_saved.prefix_sha256

    def counted(fd: int, size: int) -> str:
        hashed.append(size)
        return real(fd, size)

    monkeypatch.setattr(verdict_saved, "prefix_sha256", counted)
    for early in (True, False):  # `konkord report` (read early) and `konkord build`
        new_command()
        saving.clear()
        if early:
            verdict_table.start_early(path)
        table = read_afresh(log)
        assert saving == [path.stat().st_size]  # the saved columns were used
        assert hashed == []  # without hashing the log
        assert log_hashes.known_sha256(path) == bytes.fromhex(true)  # the digest's, too
        assert_same_table(table, parsed(log))


def test_a_wrong_kept_hash_never_passes_the_saved_columns(
    saving: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept hash is compared with the one the saved columns were made from: where it is
    wrong, the columns are not used and the log is parsed whole, into the same table."""
    settled(monkeypatch)
    log = write_log(messy_records(4)[:400])
    path = log.path("verdicts")
    read_afresh(log)
    [kept_file] = log_hashes.KEPT_DIR.glob("*.json")
    kept_file.write_text(json.dumps({**json.loads(kept_file.read_text()), "sha256": "cd" * 32}))
    new_command()
    saving.clear()
    verdict_table.start_early(path)
    table = read_afresh(log)
    assert saving == []  # the columns were refused
    assert_same_table(table, parsed(log))
    # and the kept hash forgotten: the digest hashes the log itself
    assert log_hashes.sha256_of(path) == hashlib.sha256(path.read_bytes()).digest()


def test_a_kept_record_that_is_not_one_is_ignored(
    saving: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder, a huge file or broken JSON where a kept hash should be: the file is hashed
    (and nothing past a few kilobytes of the record is read)."""
    settled(monkeypatch)
    path = Path("big.jsonl")
    path.write_bytes(b'{"a": 1}\n' * 1000)
    true = hashlib.sha256(path.read_bytes()).digest()
    log_hashes.sha256_of(path)
    [kept_file] = log_hashes.KEPT_DIR.glob("*.json")
    record = json.loads(kept_file.read_text())
    forged = json.dumps({**record, "sha256": "ab" * 32})
    for bad in (forged + " " * 5000, '{"path": ', "[]", json.dumps({**record, "sha256": 7})):
        kept_file.write_text(bad)
        new_command()
        assert log_hashes.sha256_of(path) == true
        kept_file.write_text(bad)  # (the hash taken is kept again, over it)
    kept_file.unlink()
    kept_file.mkdir()
    new_command()
    assert log_hashes.sha256_of(path) == true
