"""The verdict columns check each field's type while they take the records apart
(konkord/evidence/verdict_build.py), instead of the reader's record-by-record check
(konkord/evidence/fields.py): the same logs must be refused with the same one line, naming the
same line and field, and the same logs accepted with the same rows. Odd records: every wrong
type in every checked field, unicode and lone surrogates, failures, blank lines, and forged
lines (two records on one line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_verdict_table import messy_records

import konkord.evidence.parse as evidence_parse
from konkord.errors import KonkordError
from konkord.evidence import verdict_split
from konkord.evidence.fields import FIELD_TYPES
from konkord.evidence.log import PARSED, EvidenceLog
from konkord.evidence.verdict_table import TABLES, verdict_table

WRONG: list[Any] = [5, 2.5, True, "text", ["a"], {"k": 1}, None]


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many chunks, each parsed in one process (the split has tests of its own)."""
    monkeypatch.setattr(evidence_parse, "CHUNK_BYTES", 3000)
    monkeypatch.setattr(verdict_split, "SPLIT_BYTES", 1 << 60)


def write(root: Path, lines: list[str]) -> EvidenceLog:
    log = EvidenceLog(root)
    log.path("verdicts").write_text("".join(line + "\n" for line in lines))
    PARSED.clear()
    TABLES.clear()
    return log


def outcomes(log: EvidenceLog) -> tuple[str | list[dict[str, Any]], str | list[dict[str, Any]]]:
    """What the record reader and the columns make of a log: its rows, or the error."""
    made: list[str | list[dict[str, Any]]] = []
    for read in (
        lambda: log.records("verdicts"),
        lambda: [dict(row) for row in map(verdict_table(log).row, range(len(verdict_table(log))))],
    ):
        try:
            made.append(read())
        except KonkordError as exc:
            made.append(str(exc))
    return made[0], made[1]


def lines_of(records: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(record, sort_keys=True) for record in records]


@pytest.mark.parametrize("field", sorted(FIELD_TYPES["verdicts"]))
def test_every_wrong_type_in_every_field_is_refused_as_the_record_check_does(
    tmp_path: Path, field: str
) -> None:
    allowed = FIELD_TYPES["verdicts"][field]
    tried = 0
    for value in WRONG:
        wrong = type(value) not in allowed  # (true is not taken for a number)
        records = messy_records(7)
        records[250][field] = value
        records[320]["tokens_in"] = "later"  # a second wrong field: the first is named
        by_records, by_columns = outcomes(write(tmp_path, lines_of(records)))
        assert isinstance(by_records, str)
        assert by_columns == by_records
        if wrong:
            assert f"verdicts.jsonl:251: field \"{field}\" is" in by_columns, value
            tried += 1
        else:
            assert "verdicts.jsonl:321: field \"tokens_in\" is text" in by_columns, value
    assert tried >= 3


@pytest.mark.parametrize("field", sorted(FIELD_TYPES["verdicts"]))
def test_every_allowed_type_in_every_field_reads_as_the_records(
    tmp_path: Path, field: str
) -> None:
    for value in [*WRONG, "ü😀 \u2028", "x" * 80]:
        if type(value) not in FIELD_TYPES["verdicts"][field]:
            continue
        records = messy_records(8)
        for n in (3, 250, 399):
            records[n][field] = value
        by_records, by_columns = outcomes(write(tmp_path, lines_of(records)))
        assert isinstance(by_records, list)
        assert by_columns == by_records, value


def test_a_field_absent_from_every_record_of_a_chunk_passes(tmp_path: Path) -> None:
    records = messy_records(9)
    for record in records:
        for field in ("raw", "retried", "rationale", "tokens_in", "message_sha"):
            record.pop(field, None)
    by_records, by_columns = outcomes(write(tmp_path, lines_of(records)))
    assert isinstance(by_records, list) and by_columns == by_records


def test_unicode_and_lone_surrogates_read_as_written(tmp_path: Path) -> None:
    records = messy_records(10)
    records[5]["rationale"] = "Réponse «juste» — \u2028 😀 \\ \"quoted\""
    records[6]["model_a"] = "модель/α"
    lines = lines_of(records)
    lines[7] = lines[7].replace('"task_id": "', '"task_id": "\\ud800', 1)  # a lone surrogate
    by_records, by_columns = outcomes(write(tmp_path, lines))
    assert isinstance(by_records, list) and by_columns == by_records
    assert by_records[7]["task_id"].startswith("\ud800")


@pytest.mark.parametrize("blank", [False, True])
def test_a_forged_line_of_two_records_is_named(tmp_path: Path, blank: bool) -> None:
    """Two records joined on one line with a comma would parse as part of a chunk's array:
    refused and named, in a chunk read whole and in one with a blank line (read line by
    line)."""
    lines = lines_of(messy_records(11))
    lines[200] = lines[200] + "," + lines[201]
    if blank:
        lines[198] = ""
    by_records, by_columns = outcomes(write(tmp_path, lines))
    assert by_columns == by_records
    assert isinstance(by_records, str)
    assert ":201: not a JSON record" in by_records


def test_lines_are_counted_past_blank_lines_at_a_chunks_end(tmp_path: Path) -> None:
    lines = lines_of(messy_records(12))
    text = "".join(line + ("\n\n\n" if n % 9 == 0 else "\n") for n, line in enumerate(lines))
    bad = json.loads(lines[380]) | {"winner": 7}
    text = text.replace(lines[380], json.dumps(bad, sort_keys=True))
    log = EvidenceLog(tmp_path)
    log.path("verdicts").write_text(text)
    number = text.split("\n").index(json.dumps(bad, sort_keys=True)) + 1
    by_records, by_columns = outcomes(log)
    assert by_columns == by_records
    assert f"verdicts.jsonl:{number}: field \"winner\" is a number" in str(by_columns)
