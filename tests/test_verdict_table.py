"""The verdict log read as columns (konkord/evidence/verdict_table.py): every row reads exactly
as the record it came from, and what is computed from the columns (the latest record per key,
freshness, combining orders, costs, the positional split) equals what the same code computes
from the plain records."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from konkord.configuration.runs_config import Price
from konkord.evidence.log import EvidenceLog
from konkord.evidence.verdict_table import verdict_table
from konkord.evidence.verdicts import combine_verdicts, load_verdicts
from konkord.stages.current import positional
from konkord.stages.decisions import call_latencies, cost_of

MODELS = ["m/a", "m/b", "m/c"]


def messy_records(seed: int) -> list[dict[str, object]]:
    """A messy log: two judges, two frames, superseded records, failures, nulls, an absent
    field, a cascade's probabilities, an imported vote and a field no column knows."""
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    for n in range(400):
        a, b = sorted(rng.sample(MODELS, 2))
        record: dict[str, object] = {
            "kind": rng.choice(["verdict", "verdict", "verdict", "failure"]),
            "created_at": f"2026-01-0{rng.randint(1, 9)}T00:00:00+00:00",
            "task_id": f"t{rng.randint(0, 9)}",
            "model_a": a,
            "model_b": b,
            "order": rng.choice(["ab", "ba"]),
            "judge": rng.choice(["sim-judge/j1", "j2"]),
            "frame_hash": rng.choice(["f1", "f1", "f2"]),
            "answer_a_sha": rng.choice([f"{a}-1", f"{a}-2", None]),
            "answer_b_sha": rng.choice([f"{b}-1", f"{b}-1", f"{b}-2"]),
            "message_sha": f"msg{n}",
            "tokens_in": rng.choice([None, 0, 300, 12345]),
            "tokens_out": rng.choice([None, 0, 17]),
            "cost_usd": rng.choice([None, 0, 0.0, 0.25, 3]),
            "latency_s": rng.choice([None, 1.5, 2]),
            "raw": f"reply {n}\n\nVERDICT: 1",
        }
        if record["kind"] == "verdict":
            position = rng.choice(["1", "2", "tie"])
            record |= {"position_winner": position, "rationale": rng.choice(["r1", "r2", None])}
            shown = (a, b) if record["order"] == "ab" else (b, a)
            record["winner"] = {"1": shown[0], "2": shown[1], "tie": "tie"}[position]
            record["retried"] = rng.choice([True, False])
        else:
            record |= {"reason": "no_verdict_line", "detail": rng.choice(["cut", None])}
        if n % 7 == 0:
            del record["latency_s"]
        if n % 11 == 0:
            record |= {"probs": {"1": 0.5, "2": 0.3, "tie": 0.2}, "confidence": "logprobs"}
        if n % 13 == 0:
            record |= {"source": "import", "reconstructed": True, "samples": ["1", "2"]}
        if n % 17 == 0:
            record["first_raw"] = "no verdict here"
        if n % 19 == 0:  # not a short ASCII hash: kept as written
            record["message_sha"] = "ü" * (n % 3) + "x" * 70 if n % 2 else None
        out.append(record)
    return out


@pytest.fixture(params=[1, 2, 3])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> EvidenceLog:
    log = EvidenceLog(tmp_path)
    lines = [json.dumps(r, sort_keys=True) for r in messy_records(request.param)]
    log.path("verdicts").write_text("\n".join(lines) + "\n")
    return log


def test_every_row_reads_as_the_record_it_came_from(log: EvidenceLog) -> None:
    records = log.records("verdicts")
    table = verdict_table(log)
    assert len(table) == len(records)
    for index, record in enumerate(records):
        row = table.row(index)
        assert dict(row) == record
        assert list(row) == list(record)  # the file's (sorted) order of fields
        assert row.get("raw") == record["raw"]  # read back from its line in the file
        assert row.get("nothing", "default") == "default"
        assert ("latency_s" in row) == ("latency_s" in record)
        for name, value in record.items():
            assert type(row[name]) is type(value), name  # 0 stays an int, 0.0 a float


def test_computed_on_the_columns_equals_computed_on_the_records(log: EvidenceLog) -> None:
    shas = {(f"t{t}", m): f"{m}-1" for t in range(10) for m in MODELS}
    for judge in ("sim-judge/j1", "j2"):
        frame = [r for r in log.records("verdicts") if r["judge"] == judge][-1]["frame_hash"]
        for fresh in (None, shas):
            rows = load_verdicts(log, judge, answer_shas=fresh)
            plain = [dict(row) for row in rows]
            wanted = [
                r
                for r in log.latest(
                    "verdicts", lambda r, j=judge, f=frame: r["judge"] == j and r["frame_hash"] == f
                ).values()
                if fresh is None
                or (
                    fresh.get((r["task_id"], r["model_a"])) == r.get("answer_a_sha")
                    and fresh.get((r["task_id"], r["model_b"])) == r.get("answer_b_sha")
                )
            ]
            assert plain == wanted
            assert combine_verdicts(rows) == combine_verdicts(plain)
            for price in (None, Price(input_per_million=1.0, output_per_million=2.0)):
                assert cost_of(rows, judge, price) == cost_of(plain, judge, price)
            assert call_latencies(rows) == call_latencies(plain)
            assert positional(rows) == positional(plain)


def test_rows_changed_in_place_are_read_from_themselves(log: EvidenceLog) -> None:
    # load_verdicts' list remembers its rows' places in the table; changed in place, it must
    # not answer for the rows it held before.
    rows = load_verdicts(log, "j2")
    kept = [row for row in rows if row.get("kind") == "verdict"]
    rows[:] = kept
    assert call_latencies(rows) == call_latencies([dict(row) for row in kept])
    assert positional(rows) == positional([dict(row) for row in kept])


def test_a_chunk_with_every_number_present_keeps_each_numbers_type(tmp_path: Path) -> None:
    # Every record has every number (the common case, converted by numpy at once): a whole
    # number stays an int and a float a float, ints and floats mixed in one field.
    records = messy_records(4)
    for n, record in enumerate(records):
        record |= {"tokens_in": n, "tokens_out": 2 * n, "latency_s": 1.5 if n % 2 else 2}
        record["cost_usd"] = [0, 0.25, 3, 0.0][n % 4]
    log = EvidenceLog(tmp_path)
    log.path("verdicts").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    table = verdict_table(log)
    for index, record in enumerate(log.records("verdicts")):
        row = table.row(index)
        assert dict(row) == record
        for name in ("tokens_in", "tokens_out", "cost_usd", "latency_s"):
            assert type(row[name]) is type(record[name]), name
