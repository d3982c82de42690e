"""The verdict log's columns saved between commands (konkord/evidence/verdict_saved.py): read
back they are the table the parse makes; a log edited, replaced or cut is parsed again, one
appended to has only its new lines parsed (a bad one named by its line in the whole log); a
saved file that does not read back whole is ignored; a value JSON would not carry back means
nothing is saved; the judge saves them at its end and the report gives the same results from
them as from the log."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from test_verdict_table import messy_records

import konkord.evidence.parse as evidence_parse
from konkord.cli import cli
from konkord.errors import KonkordError
from konkord.evidence import verdict_saved, verdict_split, verdict_table
from konkord.evidence.log import EvidenceLog
from konkord.evidence.verdict_rows import MISSING, VerdictTable


@pytest.fixture
def saving(project: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Columns saved for any log, parsed in this process; the loads that found saved columns
    counted (by the bytes they covered)."""
    monkeypatch.setattr(verdict_saved, "SAVE_BYTES", 0)
    monkeypatch.setattr(verdict_split, "SPLIT_BYTES", 1 << 60)
    monkeypatch.setattr(evidence_parse, "CHUNK_BYTES", 4096)
    loads: list[int] = []
    real = verdict_table.load_saved

    def counted(at: Path, fd: int, size: int, whole_sha256: str | None = None) -> Any:
        found = real(at, fd, size, whole_sha256)
        if found is not None:
            loads.append(found[0])
        return found

    monkeypatch.setattr(verdict_table, "load_saved", counted)
    verdict_table.TABLES.clear()
    return loads


def write_log(records: list[dict[str, Any]]) -> EvidenceLog:
    log = EvidenceLog(Path("runs/r"))
    log.path("verdicts").parent.mkdir(parents=True, exist_ok=True)
    log.path("verdicts").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    return log


def read_afresh(log: EvidenceLog) -> VerdictTable:
    """The table as a new command makes it (nothing kept in this process), saves finished."""
    verdict_table.TABLES.clear()
    table = verdict_table.verdict_table(log)
    verdict_table.finish_saving()
    return table


def parsed(log: EvidenceLog) -> VerdictTable:
    """The table parsed from the log alone (its saved columns moved away and back)."""
    at = verdict_saved.saved_path(log.path("verdicts"))
    kept = at.read_bytes() if at.exists() else None
    at.unlink(missing_ok=True)
    original = verdict_saved.SAVE_BYTES
    verdict_saved.SAVE_BYTES = 1 << 60
    try:
        verdict_table.TABLES.clear()
        return verdict_table.verdict_table(log)
    finally:
        verdict_saved.SAVE_BYTES = original
        verdict_table.TABLES.clear()
        if kept is not None:
            at.write_bytes(kept)


def assert_same_table(got: VerdictTable, want: VerdictTable) -> None:
    assert len(got) == len(want)
    for name in want.coded:
        assert got.column(name) == want.column(name), name
    for name, (values, state) in want.nums.items():
        assert np.array_equal(got.nums[name][0], values), name
        assert np.array_equal(got.nums[name][1], state), name
    for name in want.flags:
        assert np.array_equal(got.flags[name], want.flags[name]), name
    for name, values in want.texts.items():
        assert [v is MISSING for v in got.texts[name]] == [v is MISSING for v in values]
        assert got.column(name) == want.column(name), name
    for name, (data, kinds) in want.hashes.items():
        assert np.array_equal(got.hashes[name][0], data) and np.array_equal(
            got.hashes[name][1], kinds), name  # fmt: skip
    for name in want.files:
        assert np.array_equal(got.files[name], want.files[name]), name
    assert got.extra == want.extra
    assert np.array_equal(got.offsets, want.offsets)
    assert np.array_equal(got.lengths, want.lengths)
    for index in range(len(want)):
        assert dict(got.row(index)) == dict(want.row(index))


@pytest.mark.parametrize("seed", [1, 2])
def test_saved_columns_read_back_as_the_parse_of_the_log(saving: list[int], seed: int) -> None:
    log = write_log(messy_records(seed))
    first = read_afresh(log)  # parsed, and saved
    assert verdict_saved.saved_path(log.path("verdicts")).is_file()
    assert saving == []
    again = read_afresh(log)
    assert saving == [log.path("verdicts").stat().st_size]  # read back, not parsed
    assert_same_table(again, first)
    assert_same_table(again, parsed(log))


def test_lines_appended_since_are_parsed_after_the_saved_columns(saving: list[int]) -> None:
    records = messy_records(3)
    log = write_log(records[:250])
    read_afresh(log)
    covered = log.path("verdicts").stat().st_size
    with log.path("verdicts").open("a") as handle:
        handle.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in records[250:]))
    table = read_afresh(log)  # the saved 250, then 150 parsed; all 400 saved again
    assert saving == [covered]
    assert_same_table(table, parsed(log))
    assert len(table) == 400
    read_afresh(log)
    assert saving == [covered, log.path("verdicts").stat().st_size]


def test_a_bad_line_after_the_saved_columns_is_named_by_its_line_in_the_log(
    saving: list[int],
) -> None:
    log = write_log(messy_records(1)[:100])
    read_afresh(log)
    with log.path("verdicts").open("a") as handle:
        handle.write('{"kind": "verdict", "tokens_in": "many"}\n')
    with pytest.raises(KonkordError) as info:
        read_afresh(log)
    assert f"{log.path('verdicts')}:101" in str(info.value)
    assert "tokens_in" in str(info.value)


@pytest.mark.parametrize("edit", ["change", "cut", "replace"])
def test_a_log_that_no_longer_begins_with_the_saved_bytes_is_parsed_again(
    saving: list[int], edit: str
) -> None:
    records = messy_records(2)
    log = write_log(records)
    read_afresh(log)
    path = log.path("verdicts")
    if edit == "change":  # a forged verdict: same length, another winner
        data = path.read_bytes()
        at = data.index(b'"winner": "') + len(b'"winner": "')
        path.write_bytes(data[:at] + b"X" + data[at + 1 :])
    elif edit == "cut":
        write_log(records[:300])
    else:
        write_log(list(reversed(records)))
    table = read_afresh(log)
    assert saving == []
    assert_same_table(table, parsed(log))


@pytest.mark.parametrize(
    "damage", ["truncated", "flipped", "empty", "other", "long_code", "bad_dtype"]
)
def test_saved_columns_that_do_not_read_back_whole_are_ignored(
    saving: list[int], damage: str
) -> None:
    log = write_log(messy_records(1))
    read_afresh(log)
    at = verdict_saved.saved_path(log.path("verdicts"))
    data = at.read_bytes()
    start = len(verdict_saved.MAGIC) + 8
    length = int.from_bytes(data[len(verdict_saved.MAGIC) : start], "little")
    header = json.loads(data[start : start + length])
    body = data[start + length :]
    if damage == "truncated":
        data = data[:-100]
    elif damage == "flipped":
        data = data[:-50] + bytes([data[-50] ^ 1]) + data[-49:]
    elif damage == "empty":
        data = b""
    elif damage == "other":
        data = b'{"covers": 1}'
    else:  # a header that is consistent with its body but not with itself
        if damage == "long_code":
            header["pool"] = header["pool"][:1]  # codes now point past the pool
        else:
            header["arrays"][0][1] = "object"
        encoded = json.dumps(header).encode()
        data = b"".join((verdict_saved.MAGIC, len(encoded).to_bytes(8, "little"), encoded, body))
    at.write_bytes(data)
    table = read_afresh(log)
    assert saving == []
    assert_same_table(table, parsed(log))


def test_a_value_json_would_not_carry_back_is_not_saved(saving: list[int]) -> None:
    records = messy_records(1)
    records[5]["probs"] = {"1": math.nan}  # a field no column holds, kept as written
    log = write_log(records)
    read_afresh(log)
    assert not verdict_saved.saved_path(log.path("verdicts")).exists()
    assert math.isnan(read_afresh(log).row(5)["probs"]["1"])


def test_two_logs_keep_their_own_columns(saving: list[int]) -> None:
    first = write_log(messy_records(1))
    second = EvidenceLog(Path("runs/other"))
    second.path("verdicts").parent.mkdir(parents=True)
    second.path("verdicts").write_bytes(first.path("verdicts").read_bytes()[:5000].rsplit(
        b"\n", 1)[0] + b"\n")  # fmt: skip
    read_afresh(first)
    read_afresh(second)
    assert verdict_saved.saved_path(first.path("verdicts")) != verdict_saved.saved_path(
        second.path("verdicts"))  # fmt: skip
    assert len(read_afresh(second)) < len(read_afresh(first))
    assert_same_table(read_afresh(second), parsed(second))


RUN = {
    "name": "sim",
    "suite": "suite.yaml",
    "models": ["sim/strong:strength=1.0", "sim/mid:strength=0.2", "sim/weak:strength=-0.8"],
    "judges": ["sim-judge/ref:accuracy=0.85,position_bias=0.6,tie_rate=0.15"],
}


def test_the_judge_saves_the_columns_and_the_report_reads_the_same_results_from_them(
    saving: list[int],
) -> None:
    tasks = "".join(f"  - id: t{k}\n    prompt: Question {k}?\n" for k in range(8))
    Path("suite.yaml").write_text(f"name: s\nrubric: Prefer correct answers.\ntasks:\n{tasks}")
    Path("runs.json").write_text(json.dumps({"runs": [RUN]}))
    runner = CliRunner()
    assert runner.invoke(cli, ["run", "--run", "sim"]).exit_code == 0
    judged = runner.invoke(cli, ["judge", "--run", "sim"])
    assert judged.exit_code == 0, judged.output
    log = EvidenceLog(Path("runs/sim"))
    at = verdict_saved.saved_path(log.path("verdicts"))
    assert at.is_file()  # saved by the judge, at its end
    verdict_table.TABLES.clear()
    report = runner.invoke(cli, ["report", "--run", "sim", "--resamples", "60"])
    assert report.exit_code == 0, report.output
    assert saving == [log.path("verdicts").stat().st_size]  # the report read them back
    from_columns = Path("results/sim.json").read_bytes()
    at.unlink()
    Path("results/sim.json").unlink()
    verdict_table.TABLES.clear()
    report = runner.invoke(cli, ["report", "--run", "sim", "--resamples", "60"])
    assert report.exit_code == 0, report.output
    assert len(saving) == 1  # parsed from the log this time
    assert Path("results/sim.json").read_bytes() == from_columns
