"""The verdict log's chunks decoded by msgspec into `VerdictLine`s (konkord/evidence/
verdict_build.py) give the table the plain parse into dicts gives: on messy logs of known
fields, where every chunk is taken that way; mixed with chunks msgspec refuses (a field no
column holds, NaN, a lone surrogate escape, a number out of range), which go the plain way; and
a field of the wrong type is named by its line either way."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from test_verdict_table import messy_records

import konkord.evidence.parse as evidence_parse
from konkord.errors import KonkordError
from konkord.evidence import verdict_build, verdict_split
from konkord.evidence.log import EvidenceLog
from konkord.evidence.verdict_rows import KNOWN
from konkord.evidence.verdict_table import verdict_table


class CountingDecoder:
    """msgspec's decoder, counting the chunks it took and those it refused."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.taken = 0
        self.refused = 0

    def decode(self, data: Any) -> Any:
        try:
            out = self.real.decode(data)
        except Exception:
            self.refused += 1
            raise
        self.taken += 1
        return out


@pytest.fixture
def decoder(monkeypatch: pytest.MonkeyPatch) -> CountingDecoder:
    counting = CountingDecoder(verdict_build._LINES)
    monkeypatch.setattr(verdict_build, "_LINES", counting)
    monkeypatch.setattr(verdict_split, "SPLIT_BYTES", 1 << 60)  # this process parses it all
    monkeypatch.setattr(evidence_parse, "CHUNK_BYTES", 4096)  # many chunks
    return counting


def write_log(tmp_path: Path, records: list[dict[str, Any]]) -> EvidenceLog:
    log = EvidenceLog(tmp_path)
    lines = [json.dumps(r, sort_keys=True) for r in records]
    log.path("verdicts").write_text("\n".join(lines) + "\n")
    return log


def assert_rows_are_the_records(log: EvidenceLog) -> None:
    records = log.records("verdicts")  # the plain parse, into dicts
    table = verdict_table(log)
    assert len(table) == len(records)
    for index, record in enumerate(records):
        row = dict(table.row(index))
        assert row.keys() == record.keys()
        for name, value in record.items():
            got = row[name]
            assert type(got) is type(value), name
            assert got == value or (
                isinstance(value, float) and math.isnan(value) and math.isnan(got)
            ), name


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_log_of_known_fields_is_decoded_by_msgspec_into_the_same_rows(
    tmp_path: Path, decoder: CountingDecoder, seed: int
) -> None:
    records = [{k: v for k, v in r.items() if k in KNOWN} for r in messy_records(seed)]
    log = write_log(tmp_path, records)
    assert_rows_are_the_records(log)
    assert decoder.taken > 10 and decoder.refused == 0


@pytest.mark.parametrize("seed", [1, 2])
def test_chunks_msgspec_refuses_are_parsed_into_dicts_beside_those_it_takes(
    tmp_path: Path, decoder: CountingDecoder, seed: int
) -> None:
    records = messy_records(seed)  # fields no column holds, every few records
    for n, record in enumerate(records):
        if n % 29 == 3:
            record["latency_s"] = math.nan  # json.dumps writes NaN
        if n % 31 == 5:
            record["rationale"] = "half a pair \ud800 of surrogates"
        if n % 37 == 7:
            record["cost_usd"] = math.inf  # written Infinity
    records = [r for n, r in enumerate(records) if n < 120 or (n % 11 and n % 13)]
    log = write_log(tmp_path, records)
    assert_rows_are_the_records(log)
    assert decoder.taken > 0 and decoder.refused > 0


@pytest.mark.parametrize(
    "field, value", [("tokens_in", True), ("judge", ["a list"]), ("raw", 3), ("cost_usd", "1")]
)
def test_a_wrong_type_in_a_decoded_chunk_is_named_by_its_line(
    tmp_path: Path, decoder: CountingDecoder, field: str, value: Any
) -> None:
    records = [{k: v for k, v in r.items() if k in KNOWN} for r in messy_records(5)]
    records[57][field] = value
    log = write_log(tmp_path, records)
    with pytest.raises(KonkordError) as caught:
        verdict_table(log)
    assert str(caught.value).startswith(f"{log.path('verdicts')}:58: ")
    assert f'field "{field}"' in str(caught.value) and "edited by hand" in str(caught.value)


def test_the_parse_workers_chunks_are_decoded_by_msgspec_too(
    tmp_path: Path, decoder: CountingDecoder
) -> None:
    """The worker's collector (`verdict_split._Sender`) decodes as the builder does: run here,
    on a log of known fields, every chunk it sends was taken by msgspec."""
    import io

    records = [{k: v for k, v in r.items() if k in KNOWN} for r in messy_records(6)]
    log = write_log(tmp_path, records)
    path = log.path("verdicts")
    out = io.BytesIO()
    with path.open("rb") as handle:
        sender = verdict_split._Sender(out, 0)
        evidence_parse.parse_stream(path, handle, path.stat().st_size, sender)
    assert decoder.taken > 10 and decoder.refused == 0
