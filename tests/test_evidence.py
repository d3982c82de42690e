"""The evidence log: durable appends, supersession, torn lines, and several writers at once."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from konkord.errors import KonkordError
from konkord.evidence.log import AsyncAppender, EvidenceLog, TornLineWarning, record_key


def _answer(task: str, model: str, text: str) -> dict[str, object]:
    return {"kind": "answer", "task_id": task, "model": model, "settings_hash": "h", "text": text}


STRACE = shutil.which("strace")


@pytest.mark.skipif(STRACE is None, reason="strace is not installed")
def test_an_append_is_fsynced_before_it_returns(tmp_path: Path) -> None:
    # A real kill at the fsync of the stream's file: an append that skipped the fsync would
    # return, print "returned" and exit 0.
    script = (
        "import sys\nfrom konkord.evidence.log import EvidenceLog\n"
        "EvidenceLog(sys.argv[1]).append('answers', {'kind': 'answer', 'task_id': 't', "
        "'model': 'm', 'settings_hash': 'h', 'text': 'x'})\nprint('returned')"
    )
    stream = tmp_path / "run" / "answers.jsonl"
    assert STRACE is not None
    done = subprocess.run(
        [STRACE, "-f", "-qq", "-o", os.devnull, "-e", "trace=fsync", "-e",
         "inject=fsync:signal=KILL", "-P", str(stream),
         sys.executable, "-c", script, str(tmp_path / "run")],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode in (-9, 137), (done.returncode, done.stdout, done.stderr)
    assert "returned" not in done.stdout
    # killed after the write, before returning: the record is whole on disk
    assert [r["text"] for r in EvidenceLog(tmp_path / "run").records("answers")] == ["x"]


def test_append_writes_one_sorted_json_line_per_record(tmp_path: Path) -> None:
    log = EvidenceLog(tmp_path / "run")
    log.append("answers", _answer("t1", "m", "héllo\nworld"))
    log.append_many("answers", [_answer("t2", "m", "a"), _answer("t3", "m", "b")])
    lines = (tmp_path / "run" / "answers.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    assert json.loads(lines[0])["text"] == "héllo\nworld"
    assert "héllo" in lines[0]  # readable in a git diff, not \u escaped
    assert list(json.loads(lines[1])) == sorted(json.loads(lines[1]))
    assert [r["task_id"] for r in log.records("answers")] == ["t1", "t2", "t3"]


def test_later_records_supersede_earlier_ones_with_the_same_key(tmp_path: Path) -> None:
    log = EvidenceLog(tmp_path)
    log.append("answers", _answer("t1", "m", "first"))
    log.append("answers", _answer("t1", "other", "kept"))
    log.append("answers", _answer("t1", "m", "second"))
    latest = log.latest("answers")
    assert latest[("t1", "m", "h")]["text"] == "second"
    assert latest[("t1", "other", "h")]["text"] == "kept"
    assert len(log.records("answers")) == 3  # nothing rewritten in place
    only_m = log.latest("answers", where=lambda r: r["model"] == "m")
    assert list(only_m) == [("t1", "m", "h")]
    assert record_key("labels", {"task_id": "t", "model_a": "a", "model_b": "b"}) == (
        "t",
        "a",
        "b",
        None,
    )


def test_a_missing_stream_reads_as_empty_and_unknown_streams_are_refused(tmp_path: Path) -> None:
    log = EvidenceLog(tmp_path / "nothing")
    assert log.records("verdicts") == []
    assert not log.exists()
    with pytest.raises(ValueError, match="unknown evidence stream"):
        log.append("answer", {})


def test_a_torn_last_line_is_detected_reported_and_repaired(tmp_path: Path) -> None:
    log = EvidenceLog(tmp_path)
    log.append("answers", _answer("t1", "m", "whole"))
    path = log.path("answers")
    whole = json.dumps(_answer("t2", "m", "cut short")).encode()
    with open(path, "ab") as handle:
        handle.write(whole[:25])  # a crash in the middle of a write

    with pytest.warns(TornLineWarning, match="answers.jsonl: the last line is incomplete"):
        result = log.read("answers")
    assert result.torn
    assert [r["task_id"] for r in result.records] == ["t1"]

    log.append("answers", _answer("t3", "m", "after the crash"))
    assert [r["task_id"] for r in log.records("answers")] == ["t1", "t3"]  # no warning now
    assert path.with_suffix(".torn").read_bytes() == whole[:25] + b"\n"
    assert len(log.repairs) == 1
    assert "cut an incomplete last line (25 bytes" in log.repairs[0]


def test_a_whole_record_that_lost_only_its_newline_is_kept(tmp_path: Path) -> None:
    log = EvidenceLog(tmp_path)
    path = log.path("answers")
    path.write_bytes(json.dumps(_answer("t1", "m", "complete")).encode())  # no trailing newline
    assert [r["task_id"] for r in log.records("answers")] == ["t1"]
    log.append("answers", _answer("t2", "m", "next"))
    assert [r["task_id"] for r in log.records("answers")] == ["t1", "t2"]
    assert path.read_bytes().count(b"\n") == 2
    assert not path.with_suffix(".torn").exists()
    assert log.repairs == [f"{path}: the last record had lost its newline; restored"]


def test_a_torn_tail_longer_than_one_read_chunk_is_cut_whole(tmp_path: Path) -> None:
    log = EvidenceLog(tmp_path)
    log.append("answers", _answer("t1", "m", "x"))
    fragment = b'{"text": "' + b"y" * 200_000
    with open(log.path("answers"), "ab") as handle:
        handle.write(fragment)
    log.append("answers", _answer("t2", "m", "z"))
    assert [r["task_id"] for r in log.records("answers")] == ["t1", "t2"]
    assert log.path("answers").with_suffix(".torn").read_bytes() == fragment + b"\n"


def test_a_damaged_line_in_the_middle_is_an_error_naming_the_line(tmp_path: Path) -> None:
    log = EvidenceLog(tmp_path)
    path = log.path("answers")
    path.write_text('{"task_id": "a"}\nnot json at all\n{"task_id": "b"}\n')
    with pytest.raises(KonkordError) as caught:
        log.records("answers")
    assert str(caught.value).startswith(f"{path}:2: not a JSON record")


def _lines(count: int, bad: dict[int, str]) -> str:
    """`count` answer records a line each, line n (1-based) replaced by bad[n]."""
    return "".join(
        bad.get(n, json.dumps(_answer(f"t{n}", "m", "x" * (n % 7)))) + "\n"
        for n in range(1, count + 1)
    )


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ({37: "not json at all"}, ":37: not a JSON record"),
        ({37: "", 41: '{"kind": "answer", "task_id": "t", "tokens_out": "many"}'},
         ':41: field "tokens_out" is text'),
    ],
)
def test_a_stream_read_in_chunks_names_the_line_of_the_file_at_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: dict[int, str], said: str
) -> None:
    # A log is parsed a chunk of whole lines at a time (never held whole); a chunk of 300
    # bytes puts line 37 many chunks in, and the message still counts lines in the file.
    import konkord.evidence.parse as evidence_parse

    monkeypatch.setattr(evidence_parse, "CHUNK_BYTES", 300)
    log = EvidenceLog(tmp_path)
    log.path("answers").write_text(_lines(60, bad))
    with pytest.raises(KonkordError) as caught:
        log.records("answers")
    assert str(caught.value).startswith(f"{log.path('answers')}{said}")


def test_a_stream_read_in_chunks_gives_every_record_once_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import konkord.evidence.parse as evidence_parse

    monkeypatch.setattr(evidence_parse, "CHUNK_BYTES", 300)
    log = EvidenceLog(tmp_path)
    long_line = json.dumps(_answer("long", "m", "y" * 1000))  # longer than a chunk
    path = log.path("answers")
    path.write_text(_lines(20, {7: "", 8: long_line}) + json.dumps(_answer("last", "m", "z")))
    expected = [f"t{n}" for n in range(1, 21) if n != 7]
    expected[6] = "long"
    assert [r["task_id"] for r in log.records("answers")] == [*expected, "last"]


def test_text_with_lone_surrogates_round_trips(tmp_path: Path) -> None:
    log = EvidenceLog(tmp_path)
    log.append("answers", _answer("t1", "m", "bad \ud800 half of a pair, and é"))
    assert log.records("answers")[0]["text"] == "bad \ud800 half of a pair, and é"


def _writer(run_dir: str, writer: int, count: int) -> None:
    log = EvidenceLog(run_dir)
    padding = "x" * (5000 + 997 * writer)  # longer than PIPE_BUF: atomicity comes from the lock
    for i in range(count):
        log.append("labels", {"task_id": f"w{writer}-{i}", "writer": writer, "pad": padding})


def test_concurrent_appends_from_several_processes_interleave_whole_lines(
    tmp_path: Path,
) -> None:
    context = multiprocessing.get_context("fork")
    writers = [
        context.Process(target=_writer, args=(str(tmp_path), w, 60)) for w in range(4)
    ]
    for process in writers:
        process.start()
    for process in writers:
        process.join(60)
        assert process.exitcode == 0
    records = EvidenceLog(tmp_path).records("labels")
    assert len(records) == 240
    assert {r["task_id"] for r in records} == {f"w{w}-{i}" for w in range(4) for i in range(60)}
    # each writer's own records stay in its order
    for w in range(4):
        mine = [int(r["task_id"].split("-")[1]) for r in records if r["writer"] == w]
        assert mine == list(range(60))


def test_async_appender_groups_concurrent_records_into_few_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = EvidenceLog(tmp_path)
    batches: list[int] = []
    original = log.append_many

    def counting(stream: str, records: list[dict[str, object]]) -> None:
        batches.append(len(records))
        original(stream, records)

    monkeypatch.setattr(log, "append_many", counting)
    appender = AsyncAppender(log, "answers")
    durable: list[int] = []

    async def one(i: int) -> None:
        await appender.append(_answer(f"t{i}", "m", str(i)))
        # when append returns, the record is on disk
        durable.append(len(log.records("answers")))

    async def main() -> None:
        await asyncio.gather(*(one(i) for i in range(200)))

    asyncio.run(main())
    assert sum(batches) == 200
    assert len(batches) < 200  # records that arrive during a write share the next one
    assert min(durable) >= 1
    assert sorted(r["task_id"] for r in log.records("answers")) == sorted(
        f"t{i}" for i in range(200)
    )


def test_async_appender_passes_a_write_failure_to_every_waiter(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the run directory should be")
    appender = AsyncAppender(EvidenceLog(blocker), "answers")

    async def main() -> list[BaseException | None]:
        return await asyncio.gather(
            *(appender.append(_answer(f"t{i}", "m", "x")) for i in range(3)),
            return_exceptions=True,
        )

    outcomes = asyncio.run(main())
    assert all(isinstance(o, OSError) for o in outcomes)


@pytest.mark.parametrize("failure", ["cancelled", "oserror"])
def test_an_aborted_waiter_leaves_no_unretrieved_write_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    # The second Ctrl-C cancels a verdict's waiter while its write is still in the thread;
    # then the writer task ends (cancelled at shutdown, or the write fails). The waiter's
    # future was left holding that error, and Python printed "Future exception was never
    # retrieved" and a CancelledError traceback after "aborted".
    import gc
    import threading

    log = EvidenceLog(tmp_path / "run")
    entered, release = threading.Event(), threading.Event()
    original = log.append_many

    def slow(stream: str, records: list[dict[str, object]]) -> None:
        entered.set()
        release.wait(30)
        if failure == "oserror":
            raise OSError(28, "No space left on device")
        original(stream, records)

    monkeypatch.setattr(log, "append_many", slow)
    reported: list[dict[str, object]] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: reported.append(ctx))
        appender = AsyncAppender(log, "answers")
        waiter = asyncio.create_task(appender.append(_answer("t", "m", "x")))
        while not entered.is_set():
            await asyncio.sleep(0.01)
        writers = asyncio.all_tasks() - {asyncio.current_task(), waiter}
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        if failure == "cancelled":
            for writer in writers:
                writer.cancel()
        release.set()
        await asyncio.gather(*writers, return_exceptions=True)

    asyncio.run(main())
    gc.collect()  # as at exit, when the stage's frames go
    assert [str(ctx.get("message")) for ctx in reported] == []
