"""One hash of the verdict log per report (konkord/evidence/log_hashes.py): the check of its
saved columns and the digest of the report's inputs share it, whichever takes it first; it is
handed out only for the version of the file it was taken of, and a hash handed in is compared
with the saved columns' own, never trusted in their place."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_verdict_saved import RUN, assert_same_table, parsed, read_afresh, saving, write_log
from test_verdict_table import messy_records

from konkord.cli import cli
from konkord.configuration.runspec import resolve_run
from konkord.evidence import log_hashes, verdict_saved, verdict_table
from konkord.evidence.log import EvidenceLog
from konkord.evidence.parse import file_version
from konkord.stages.report.freshness import ReportOptions, inputs_digest, stored_digest

__all__ = ["saving"]  # the fixture, shared with test_verdict_saved


@pytest.fixture(autouse=True)
def no_hashes_kept() -> None:
    log_hashes.PROMISED.clear()
    verdict_table.EARLY.clear()


def sha256_of(path: Path) -> bytes:
    return hashlib.sha256(path.read_bytes()).digest()


def version_of(path: Path) -> tuple[int, ...]:
    fd = os.open(path, os.O_RDONLY)
    try:
        return file_version(fd)
    finally:
        os.close(fd)


def saved_log(records_kept: int = 400) -> EvidenceLog:
    log = write_log(messy_records(4)[:records_kept])
    read_afresh(log)  # parsed, and its columns saved
    log_hashes.PROMISED.clear()
    return log


def test_the_columns_check_hands_on_the_hash_of_the_whole_log(saving: list[int]) -> None:
    log = saved_log()
    path = log.path("verdicts")
    verdict_table.start_early(path)
    assert log_hashes.known_sha256(path) == sha256_of(path)
    with path.open("a") as handle:  # appended since: the hash is of another version
        handle.write(json.dumps(messy_records(5)[0], sort_keys=True) + "\n")
    assert log_hashes.known_sha256(path) is None


def test_columns_that_cover_part_of_the_log_hand_on_no_hash(saving: list[int]) -> None:
    log = saved_log()
    path = log.path("verdicts")
    with path.open("a") as handle:
        handle.write(json.dumps(messy_records(5)[0], sort_keys=True) + "\n")
    verdict_table.start_early(path)
    assert log_hashes.known_sha256(path) is None  # they hashed only the bytes they cover
    assert_same_table(read_afresh(log), parsed(log))


def test_a_hash_taken_first_spares_the_columns_check_hashing_again(
    saving: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    log = saved_log()
    path = log.path("verdicts")
    hashed: list[int] = []
    real = verdict_saved.prefix_sha256
    monkeypatch.setattr(verdict_saved, "prefix_sha256", lambda fd, n: hashed.append(n) or real(fd, n))
    log_hashes.record(path, version_of(path), sha256_of(path).hex())
    verdict_table.start_early(path)
    table = read_afresh(log)
    assert saving == [path.stat().st_size] and hashed == []  # read back, and not hashed again
    assert_same_table(table, parsed(log))


def test_a_wrong_hash_handed_in_does_not_pass_the_columns(saving: list[int]) -> None:
    log = saved_log()
    path = log.path("verdicts")
    log_hashes.record(path, version_of(path), hashlib.sha256(b"another log").hexdigest())
    verdict_table.start_early(path)
    table = read_afresh(log)
    assert saving == []  # the columns were refused: the log was parsed
    assert_same_table(table, parsed(log))


def test_the_reports_digest_is_the_same_whoever_hashed_the_log(saving: list[int]) -> None:
    tasks = "".join(f"  - id: t{k}\n    prompt: Question {k}?\n" for k in range(6))
    Path("suite.yaml").write_text(f"name: s\nrubric: Prefer correct answers.\ntasks:\n{tasks}")
    Path("runs.json").write_text(json.dumps({"runs": [RUN]}))
    runner = CliRunner()
    assert runner.invoke(cli, ["run", "--run", "sim"]).exit_code == 0
    assert runner.invoke(cli, ["judge", "--run", "sim"]).exit_code == 0
    spec = resolve_run("sim")
    path = EvidenceLog(spec.run_dir).path("verdicts")
    assert verdict_saved.saved_path(path).is_file()
    log_hashes.PROMISED.clear()
    options = ReportOptions(resamples=40)
    alone = inputs_digest(spec, options)  # every stream hashed here
    assert log_hashes.known_sha256(path) == sha256_of(path)  # and kept for later readers
    log_hashes.PROMISED.clear()
    verdict_table.start_early(path)
    assert inputs_digest(spec, options) == alone  # the log's hash taken from the columns check
    report = runner.invoke(cli, ["report", "--run", "sim", "--resamples", "40"])
    assert report.exit_code == 0, report.output
    assert stored_digest(Path("results/sim.json")) == alone
    with path.open("a") as handle:  # a verdict more: the digest changes with it
        handle.write(path.read_text().splitlines(keepends=True)[-1])
    assert inputs_digest(spec, options) != alone


def test_a_log_read_without_an_early_start_hands_on_its_hash(saving: list[int]) -> None:
    log = saved_log()
    path = log.path("verdicts")
    read_afresh(log)  # `konkord build` reads the table first, then takes the digest
    assert saving == [path.stat().st_size]
    assert log_hashes.known_sha256(path) == sha256_of(path)
    log_hashes.PROMISED.clear()
    log_hashes.record(path, version_of(path), sha256_of(path).hex())  # the digest first
    saving.clear()
    table = read_afresh(log)
    assert saving == [path.stat().st_size]
    assert_same_table(table, parsed(log))
