"""A large verdict log parsed in two processes (konkord/evidence/verdict_split.py) gives the
same table as one process: every row, in order, on a messy log (failures, nulls, absent and
unknown fields, unicode, hashes kept as written), with a torn last line, and when the worker's
half holds a bad line (named by its line in the file), cannot start or dies."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_hand_edits import make_run
from test_verdict_table import messy_records

import konkord.evidence.parse as evidence_parse
from konkord.cli import cli
from konkord.errors import KonkordError
from konkord.evidence import verdict_split
from konkord.evidence import workers as worker_processes
from konkord.evidence.log import EvidenceLog, TornLineWarning
from konkord.evidence.verdict_rows import VerdictTable
from konkord.evidence.verdict_table import TABLES, verdict_table


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """Every log is split, in small chunks on both sides; the workers started, by their
    command lines."""
    started: list[list[str]] = []
    popen = subprocess.Popen

    def spied(args: list[str], **kwargs: Any) -> Any:
        started.append(args)
        return popen(args, **kwargs)

    monkeypatch.setattr(verdict_split, "SPLIT_BYTES", 0)
    monkeypatch.setattr(worker_processes, "others_running", lambda: 0)  # however busy the machine
    monkeypatch.setattr(verdict_split, "WORKER_CHUNK_BYTES", 2000)
    monkeypatch.setattr(evidence_parse, "CHUNK_BYTES", 3000)
    monkeypatch.setattr(verdict_split.subprocess, "Popen", spied)
    yield started
    verdict_split.stop_early()


def messy_log(root: Path, seed: int = 5) -> EvidenceLog:
    records = messy_records(seed)
    records[300]["rationale"] = "Réponse «juste» — \u2028 😀 \\ \"quoted\""
    records[350]["surprise"] = {"nested": ["kept", 1, None]}  # a field no column holds
    log = EvidenceLog(root)
    log.path("verdicts").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    return log


def rows(table: VerdictTable) -> list[dict[str, Any]]:
    return [dict(table.row(index)) for index in range(len(table))]


def one_process(log: EvidenceLog, monkeypatch: pytest.MonkeyPatch) -> VerdictTable:
    TABLES.clear()
    with monkeypatch.context() as patch:
        patch.setattr(verdict_split, "SPLIT_BYTES", 1 << 60)
        table = verdict_table(log)
    TABLES.clear()
    return table


def test_two_processes_give_the_table_one_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: list[list[str]]
) -> None:
    log = messy_log(tmp_path)
    split = verdict_table(log)
    assert len(workers) == 1  # the second half was parsed by a worker
    whole = one_process(log, monkeypatch)
    assert rows(split) == rows(whole) == log.records("verdicts")
    for name in ("tokens_in", "cost_usd", "latency_s", "retried", "message_sha", "raw"):
        assert [type(split.row(i).get(name)) for i in range(len(split))] == [
            type(whole.row(i).get(name)) for i in range(len(whole))
        ], name
    assert (split.offsets == whole.offsets).all() and (split.lengths == whole.lengths).all()
    assert split.row(399).get("raw") == log.records("verdicts")[399]["raw"]  # read back


def test_a_torn_last_line_in_the_workers_half_is_reported_and_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: list[list[str]]
) -> None:
    log = messy_log(tmp_path)
    with log.path("verdicts").open("a") as handle:
        handle.write('{"kind": "verdict", "task_id": "t1", "rationa')
    with pytest.warns(TornLineWarning):
        split = verdict_table(log)
    assert len(workers) == 1
    with pytest.warns(TornLineWarning):
        whole = one_process(log, monkeypatch)
    assert rows(split) == rows(whole) and len(split) == 400


@pytest.mark.parametrize(
    ("number", "line", "said"),
    [(391, "not json at all", "not a JSON record"),
     (391, '{"kind": "verdict", "tokens_in": "many"}', 'field "tokens_in" is text'),
     (12, "not json at all", "not a JSON record")],  # in this process's half
)  # fmt: skip
def test_a_bad_line_in_either_half_is_named_by_its_line_in_the_file(
    tmp_path: Path, workers: list[list[str]], number: int, line: str, said: str
) -> None:
    log = messy_log(tmp_path)
    lines = log.path("verdicts").read_text().splitlines(keepends=True)
    lines[number - 1] = line + "\n"
    log.path("verdicts").write_text("".join(lines))
    with pytest.raises(KonkordError) as caught:
        verdict_table(log)
    assert str(caught.value).startswith(f"{log.path('verdicts')}:{number}: {said}")
    assert len(workers) == 1


def test_a_worker_that_cannot_start_or_dies_leaves_the_parse_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: list[list[str]]
) -> None:
    log = messy_log(tmp_path)
    whole = one_process(log, monkeypatch)
    monkeypatch.setattr(verdict_split.sys, "executable", str(tmp_path / "no-python"))
    assert rows(verdict_table(log)) == rows(whole)
    TABLES.clear()
    monkeypatch.undo()
    monkeypatch.setattr(verdict_split, "SPLIT_BYTES", 0)
    monkeypatch.setattr(verdict_split, "__name__", "konkord.evidence.no_such_module")
    assert rows(verdict_table(log)) == rows(whole)  # the worker exits at once, failing


@pytest.mark.parametrize(
    ("size", "cores", "others", "load", "split"),
    [(48 << 20, 2, 0, 9.0, True), ((48 << 20) - 1, 2, 0, 0.0, False), (300 << 20, 2, 1, 0.0, False),
     (300 << 20, 1, 0, 0.0, False), (300 << 20, 8, 6, 9.0, True), (300 << 20, 8, 7, 0.0, False),
     (300 << 20, 2, None, 0.9, True), (300 << 20, 2, None, 1.1, False)],
)  # fmt: skip
def test_the_split_is_used_for_a_large_log_when_a_core_is_free(
    monkeypatch: pytest.MonkeyPatch, size: int, cores: int, others: int | None, load: float,
    split: bool,
) -> None:  # fmt: skip
    monkeypatch.setattr(worker_processes.os, "sched_getaffinity", lambda _: set(range(cores)))
    monkeypatch.setattr(worker_processes, "others_running", lambda: others)
    monkeypatch.setattr(worker_processes.os, "getloadavg", lambda: (load, load, load))
    assert verdict_split.splits(size) is split


@pytest.mark.parametrize(("readings", "free"), [([1, 0], True), ([1, 1], False), ([0], True)])
def test_a_thread_running_for_a_blink_is_read_again(
    monkeypatch: pytest.MonkeyPatch, readings: list[int], free: bool
) -> None:
    monkeypatch.setattr(worker_processes.os, "sched_getaffinity", lambda _: {0, 1})
    left = list(readings)
    monkeypatch.setattr(worker_processes, "others_running", lambda: left.pop(0))
    assert worker_processes.core_free() is free
    assert left == []  # read twice where the first reading was busy, once where it was not


def test_a_busy_process_elsewhere_counts() -> None:
    spin = "import time\nend = time.time() + 20\nwhile time.time() < end: pass"
    busy = subprocess.Popen([sys.executable, "-c", spin])
    try:
        seen = []
        for _ in range(20):
            time.sleep(0.05)
            seen.append(worker_processes.others_running())
    finally:
        busy.kill()
        busy.wait()
    assert max(n for n in seen if n is not None) >= 1 and None not in seen


def test_this_processs_own_running_threads_are_not_others() -> None:
    loadavg = "1.52 0.98 0.40 4/312 20611\n"
    stats = ["20600 (python) R 1 2 3", "20601 (py (x) thread) S 1 2", "20602 (hash) R 1 2"]
    assert worker_processes.others_in(loadavg, stats) == 2
    assert worker_processes.others_in("0.1 0.1 0.1 1/300 5", stats) == 0


def test_a_busy_machine_parses_in_this_process_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: list[list[str]]
) -> None:
    monkeypatch.setattr(worker_processes, "others_running", lambda: 1)
    log = messy_log(tmp_path)
    assert rows(verdict_table(log)) == log.records("verdicts")
    assert workers == []


def test_a_worker_started_early_is_taken_up_by_the_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: list[list[str]]
) -> None:
    log = messy_log(tmp_path)
    verdict_split.start_early(log.path("verdicts"))
    assert len(workers) == 1
    size = log.path("verdicts").stat().st_size
    start = int(workers[0][-3])  # it took the later part, from the first line after the rest
    first = (1 - verdict_split.EARLY_SHARE) * size
    assert first <= start < first + 2000
    time.sleep(0.5)  # (it may finish before the read, or not)
    split = verdict_table(log)
    assert len(workers) == 1  # no second worker: the early one was used
    assert rows(split) == rows(one_process(log, monkeypatch)) == log.records("verdicts")


def test_an_early_worker_on_a_log_that_changed_since_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: list[list[str]]
) -> None:
    log = messy_log(tmp_path)
    verdict_split.start_early(log.path("verdicts"))
    early = next(iter(verdict_split.EARLY.values())).worker
    extra = messy_records(6)[:5]
    log.append_many("verdicts", extra)
    split = verdict_table(log)
    assert early.poll() is not None and verdict_split.EARLY == {}
    assert len(workers) == 2  # the read split the new version itself
    assert rows(split) == log.records("verdicts") and len(split) == 405


def test_no_early_worker_on_a_torn_log_and_none_left_at_exit(
    tmp_path: Path, workers: list[list[str]]
) -> None:
    log = messy_log(tmp_path)
    with log.path("verdicts").open("a") as handle:
        handle.write('{"kind": "verdict", "task_id": "t1", "rationa')
    verdict_split.start_early(log.path("verdicts"))
    assert workers == [] and verdict_split.EARLY == {}
    (tmp_path / "other").mkdir()
    log = messy_log(tmp_path / "other")
    verdict_split.start_early(log.path("verdicts"))
    early = next(iter(verdict_split.EARLY.values())).worker
    verdict_split.stop_early()  # what runs at exit when no read took it up
    assert early.poll() is not None and verdict_split.EARLY == {}


def test_a_bad_line_in_an_early_workers_part_is_named_by_its_line(
    tmp_path: Path, workers: list[list[str]]
) -> None:
    log = messy_log(tmp_path)
    lines = log.path("verdicts").read_text().splitlines(keepends=True)
    lines[379] = '{"kind": "verdict", "winner": 3}\n'
    log.path("verdicts").write_text("".join(lines))
    verdict_split.start_early(log.path("verdicts"))
    with pytest.raises(KonkordError) as caught:
        verdict_table(log)
    assert str(caught.value).startswith(
        f'{log.path("verdicts")}:380: field "winner" is a number, expected text or null'
    )


def test_a_report_with_an_early_worker_writes_the_same_results(
    project: Path, monkeypatch: pytest.MonkeyPatch, workers: list[list[str]]
) -> None:
    make_run(project)
    made = {}
    for split in (False, True):
        monkeypatch.setattr(verdict_split, "SPLIT_BYTES", 0 if split else 1 << 60)
        TABLES.clear()
        shutil.rmtree(project / "results", ignore_errors=True)
        shutil.rmtree(project / ".konkord", ignore_errors=True)
        result = CliRunner().invoke(cli, ["report", "--run", "s", "--resamples", "20"])
        assert result.exit_code == 0, result.output
        made[split] = {
            path.relative_to(project).as_posix(): path.read_bytes()
            for path in sorted((project / "results").rglob("*"))
            if path.is_file()
        }
    assert len(workers) == 1 and int(workers[0][-2]) > 0  # the early worker, taken up
    assert made[True] == made[False] and "results/s.json" in made[True]
