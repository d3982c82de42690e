"""A leaderboard-size site: every file small enough to serve, old results files still read, and
each evidence stream parsed once per process."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from conftest import REPO
from fixtures_site import make_results, write_project

from konkord.cli import cli
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog, TornLineWarning
from konkord.results import files as results_files
from konkord.results.schema import TaskView, read_results, write_results
from konkord.site.generate import load_results_fast
from konkord.site.limits import MAX_FILE_BYTES
from konkord.stages.build.build import build_site

RUNS = Path("runs.json")
OUT = Path("public")


@pytest.fixture
def split_small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tasks go to files of their own from the first byte, so a small run takes that path."""
    monkeypatch.setattr(results_files, "INLINE_TASKS_MAX", 0)


def test_a_large_runs_tasks_go_to_a_file_each_and_read_back(
    tmp_path: Path, split_small: None
) -> None:
    results = make_results("big", models=["m/a", "m/b", "m/c"], judges=["j/x"], n_tasks=4)
    path = tmp_path / "results" / "big.json"
    write_results(results, path)
    summary = json.loads(path.read_text())
    assert summary["tasks"] == []
    assert summary["task_files"]["folder"] == "big.tasks"
    assert summary["task_files"]["ids"] == [task.id for task in results.tasks]
    for task in results.tasks:
        shard = path.parent / "big.tasks" / f"{task.id}.json"
        assert TaskView.model_validate_json(shard.read_bytes()) == task
    assert read_results(path) == results


def test_a_smaller_report_removes_the_task_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = make_results("big", models=["m/a", "m/b"], judges=["j/x"], n_tasks=3)
    path = tmp_path / "big.json"
    monkeypatch.setattr(results_files, "INLINE_TASKS_MAX", 0)
    write_results(results, path)
    assert (tmp_path / "big.tasks").is_dir()
    monkeypatch.setattr(results_files, "INLINE_TASKS_MAX", 10**9)
    write_results(results, path)
    assert not (tmp_path / "big.tasks").exists()
    assert len(json.loads(path.read_text())["tasks"]) == 3
    assert read_results(path) == results


def test_an_edited_task_file_is_refused_by_name(tmp_path: Path, split_small: None) -> None:
    results = make_results("big", models=["m/a", "m/b"], judges=["j/x"], n_tasks=2)
    path = tmp_path / "big.json"
    write_results(results, path)
    shard = tmp_path / "big.tasks" / f"{results.tasks[1].id}.json"
    shard.write_text(shard.read_text().replace('"prompt"', '"prompt" ', 1))
    with pytest.raises(KonkordError) as info:
        read_results(path)
    assert "big.tasks: the task files are not the ones" in str(info.value)
    assert "konkord report --run big" in str(info.value)
    shard.unlink()
    with pytest.raises(KonkordError) as info:
        read_results(path)
    assert f"{shard}: cannot read this task file of {path}" in str(info.value)


def test_a_task_file_changed_after_its_check_is_refused_when_read(
    tmp_path: Path, split_small: None
) -> None:
    """The shelf keeps each file's hash as checked: a file edited between the check and the
    page that reads it is refused, not rendered."""
    results = make_results("big", models=["m/a", "m/b"], judges=["j/x"], n_tasks=3)
    path = tmp_path / "big.json"
    write_results(results, path)
    shelf = load_results_fast(path).tasks
    assert isinstance(shelf, results_files.TaskShelf)
    assert msgspec.to_builtins(shelf[0]) == results.tasks[0].model_dump(mode="json")
    shard = tmp_path / "big.tasks" / f"{results.tasks[2].id}.json"
    shard.write_text(shard.read_text().replace('"prompt"', '"prompt" ', 1))
    with pytest.raises(KonkordError, match="changed since it was checked"):
        shelf[2]


def test_a_worker_handed_the_checked_hashes_reads_only_its_own_task_files(
    tmp_path: Path, split_small: None
) -> None:
    """With the hashes the main process checked, a slice reads the tasks it renders and no
    other: a missing file elsewhere is never opened, and its own are still held to their
    hashes."""
    results = make_results("big", models=["m/a", "m/b"], judges=["j/x"], n_tasks=4)
    path = tmp_path / "big.json"
    write_results(results, path)
    checked = load_results_fast(path).tasks
    assert isinstance(checked, results_files.TaskShelf) and checked.shas is not None
    (tmp_path / "big.tasks" / f"{results.tasks[0].id}.json").unlink()
    with pytest.raises(KonkordError, match="cannot read this task file"):
        load_results_fast(path)  # unchecked: every file is read
    shelf = load_results_fast(path, checked=checked.shas).tasks
    assert msgspec.to_builtins(shelf[3]) == results.tasks[3].model_dump(mode="json")
    shard = tmp_path / "big.tasks" / f"{results.tasks[1].id}.json"
    shard.write_text(shard.read_text().replace('"prompt"', '"prompt" ', 1))
    with pytest.raises(KonkordError, match="changed since it was checked"):
        shelf[1]


def test_task_files_checked_once_in_a_process_are_not_read_again_until_one_changes(
    tmp_path: Path, split_small: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`konkord build` checks a results file to find it current, then again to render it: the
    second check takes the first's hashes while every file is the version it checked, and a
    file written since (its size and modification time put back) is read and refused."""
    import os

    from konkord.results import task_reading

    results = make_results("big", models=["m/a", "m/b"], judges=["j/x"], n_tasks=4)
    path = tmp_path / "big.json"
    write_results(results, path)
    monkeypatch.setattr(task_reading, "CHECKED_FOLDERS", {})
    reads: list[Path] = []
    real_read = task_reading._read_task

    def counted(results_path: Path, task_path: Path, run: str) -> bytes:
        reads.append(task_path)
        return real_read(results_path, task_path, run)

    monkeypatch.setattr(task_reading, "_read_task", counted)
    read_results(path, tasks=False)
    assert len(reads) == 4
    shelf = load_results_fast(path).tasks
    assert len(reads) == 4, "checked already: no file read again"
    assert msgspec.to_builtins(shelf[2]) == results.tasks[2].model_dump(mode="json")
    assert len(reads) == 5  # a page reads its own file (against its hash)
    shard = tmp_path / "big.tasks" / f"{results.tasks[1].id}.json"
    before = shard.stat()
    text = shard.read_text()
    shard.write_text(text.replace('"prompt":"', '"prompt":"X', 1)[:-1])  # the same size
    os.utime(shard, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert shard.stat().st_size == before.st_size
    with pytest.raises(KonkordError, match="not the ones"):
        read_results(path, tasks=False)
    assert len(reads) == 9


def test_a_task_file_path_cannot_leave_the_results_folder(tmp_path: Path, split_small: None) -> None:
    results = make_results("big", models=["m/a", "m/b"], judges=["j/x"], n_tasks=1)
    path = tmp_path / "big.json"
    write_results(results, path)
    data = json.loads(path.read_text())
    data["task_files"]["folder"] = "../elsewhere.tasks"
    path.write_text(json.dumps(data))
    with pytest.raises(KonkordError, match=r"is not <run>\.tasks"):
        read_results(path)


@pytest.mark.parametrize("name", ["demo-python-codegen", "demo-support-replies"])
def test_results_files_written_whole_still_read(name: str, tmp_path: Path) -> None:
    """A results file as every konkord before task files wrote it: tasks inline, no
    `task_files` field, written by json.dumps."""
    data = json.loads((REPO / "results" / f"{name}.json").read_text())
    data.pop("task_files", None)
    assert data["tasks"]
    old = tmp_path / f"{name}.json"
    old.write_text(json.dumps(data, indent=1, ensure_ascii=False))
    results = read_results(old)
    assert [task.id for task in results.tasks] == [task["id"] for task in data["tasks"]]
    assert results == read_results(REPO / "results" / f"{name}.json")


def test_the_site_serves_the_task_files_beside_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, split_small: None
) -> None:
    runs = [make_results("one", models=["m/a", "m/b", "m/c"], judges=["j/x"], n_tasks=3)]
    write_project(tmp_path, runs)
    write_results(runs[0], tmp_path / "results" / "one.json")
    monkeypatch.chdir(tmp_path)
    build_site(OUT, offline=True, runs_file=RUNS)
    public = tmp_path / "public" / "results"
    summary = json.loads((public / "one.json").read_text())
    for task_id in summary["task_files"]["ids"]:
        assert (public / summary["task_files"]["folder"] / f"{task_id}.json").is_file()
    assert (tmp_path / "public" / "one" / "tasks" / runs[0].tasks[2].id / "index.html").is_file()


def test_a_results_file_over_the_limit_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = [make_results("one", models=["m/a", "m/b"], judges=["j/x"], n_tasks=2)]
    write_project(tmp_path, runs)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "results" / "one.json"
    with open(path, "a") as handle:  # still a valid results file: JSON allows the spaces
        handle.write(" " * (MAX_FILE_BYTES + 1 - path.stat().st_size))
    size = path.stat().st_size
    result = CliRunner().invoke(cli, ["build", "--offline"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith(f"error: results/one.json: 25.0 MiB ({size:,} bytes), over the")
    assert "konkord report --run one" in lines[0]
    assert not (tmp_path / "public").exists(), "nothing is written"


def test_a_page_over_the_limit_is_refused_by_name(tmp_path: Path) -> None:
    from konkord.site.incremental import Manifest, OutputWriter

    writer = OutputWriter(tmp_path / "public", Manifest())
    writer.write("run/index.html", b"x" * MAX_FILE_BYTES, "a")  # at the limit: served
    with pytest.raises(KonkordError) as info:
        writer.write("run/tasks/t/index.html", b"x" * (MAX_FILE_BYTES + 1), "b")
    assert str(info.value).startswith(
        f"{tmp_path}/public/run/tasks/t/index.html: 25.0 MiB (26,214,401 bytes), over the"
    )
    assert not (tmp_path / "public/run/tasks/t/index.html").exists()


def test_file_counts_against_the_plans() -> None:
    from konkord.site.limits import count_files

    assert count_files(str(n) for n in range(20_000)) is None
    warning = count_files(str(n) for n in range(20_001))
    assert warning is not None and "20,001 files, over the 20,000" in warning
    with pytest.raises(KonkordError, match="100,001 files"):
        count_files(str(n) for n in range(100_001))


def _verdicts(tmp_path: Path) -> EvidenceLog:
    log = EvidenceLog(tmp_path / "runs" / "r")
    log.append_many("verdicts", [{"task_id": f"t{n}", "judge": "j", "n": n} for n in range(3)])
    return log


def test_a_stream_is_parsed_once_until_it_changes(tmp_path: Path) -> None:
    log = _verdicts(tmp_path)
    first = log.records("verdicts")
    again = EvidenceLog(tmp_path / "runs" / "r").records("verdicts")
    assert again is first, "a second reader in the same process shares the parse"
    log.append("verdicts", {"task_id": "t9", "judge": "j", "n": 9})
    after = log.records("verdicts")
    assert after is not first and [r["n"] for r in after] == [0, 1, 2, 9]


def test_a_bad_line_is_named_whatever_the_parse(tmp_path: Path) -> None:
    log = _verdicts(tmp_path)
    path = log.path("verdicts")
    lines = path.read_bytes().split(b"\n")
    lines[1] = b'{"task_id": "t1", '  # cut mid-record, not at the end
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(KonkordError, match=r"verdicts.jsonl:2: not a JSON record"):
        log.records("verdicts")


def test_a_torn_tail_warns_on_every_read(tmp_path: Path) -> None:
    log = _verdicts(tmp_path)
    with open(log.path("verdicts"), "ab") as handle:
        handle.write(b'{"task_id": "t3"')
    for _ in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert len(log.records("verdicts")) == 3
        assert any(issubclass(w.category, TornLineWarning) for w in caught)


def test_schema_task_prints_the_task_files_schema() -> None:
    result = CliRunner().invoke(cli, ["schema", "--task"])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    assert schema["title"] == "TaskView"
    whole = json.loads(CliRunner().invoke(cli, ["schema"]).output)
    assert "task_files" in whole["properties"]


def test_the_demo_site_still_builds_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small run keeps its tasks inline: nothing changes for the shipped demo."""
    for folder in ("templates", "content", "results", "suites", "runs"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    shutil.copy(REPO / "runs.json", tmp_path / "runs.json")
    monkeypatch.chdir(tmp_path)
    build_site(OUT, offline=True, runs_file=RUNS)
    assert not list((tmp_path / "public" / "results").glob("*.tasks"))


def test_a_task_with_many_pairs_shows_the_notable_ones_and_links_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bs4 import BeautifulSoup

    from konkord.site.folding import FOLD_PAIRS_OVER, notable

    models = [f"m/model-{k}" for k in range(9)]  # 36 pairs
    assert len(models) * (len(models) - 1) // 2 > FOLD_PAIRS_OVER
    runs = [make_results("one", models=models, judges=["j/x"], n_tasks=1)]
    write_project(tmp_path, runs)
    monkeypatch.chdir(tmp_path)
    build_site(OUT, offline=True, runs_file=RUNS)
    task = runs[0].tasks[0]
    folder = tmp_path / "public" / "one" / "tasks" / task.id
    page = BeautifulSoup((folder / "index.html").read_text(), "html.parser")
    other = BeautifulSoup((folder / "verdicts" / "index.html").read_text(), "html.parser")
    cards = {a["id"] for a in page.select("article.comparison")}
    others = {a["id"] for a in other.select("article.comparison")}
    worth = [c for c in task.comparisons if notable([c])]
    assert worth and len(worth) < len(task.comparisons), "the fixture has both kinds"
    assert len(cards) == len(worth) and len(others) == len(task.comparisons) - len(worth)
    assert not cards & others, "each verdict is on one page"
    # every pair still has its side-by-side section; only the notable ones repeat the answers
    assert len(page.select("section.pair")) == 36
    assert len(page.select("section.pair .side-by-side")) == len(worth)
    # a pair's verdict link leads to the page its card is on
    for link in page.select("ul.pair-verdicts a"):
        href = str(link["href"])
        card = href.split("#", 1)[1]
        assert (card in cards and href.startswith("#")) or (
            card in others and href.startswith("verdicts/index.html#")
        ), href
    # and the second page's links lead back to the task page's answers and pairs
    for link in other.select("p.judged a"):
        assert str(link["href"]).startswith("../index.html#")


def test_repeated_strings_are_kept_once_and_odd_text_still_reads(tmp_path: Path) -> None:
    log = EvidenceLog(tmp_path / "runs" / "r")
    judge = "sim-judge/referee:accuracy=0.85"
    log.append_many("verdicts", [{"task_id": f"t{n}", "judge": judge} for n in range(3)])
    records = log.records("verdicts")
    assert records[0]["judge"] is records[2]["judge"], "one copy of a repeated value"
    # a lone surrogate (possible in model output) is stored as \\u escapes and reads back
    log.append("verdicts", {"task_id": "t9", "judge": judge, "raw": "a\ud800b", "x": 1e-7})
    assert log.records("verdicts")[-1] == {
        "task_id": "t9",
        "judge": judge,
        "raw": "a\ud800b",
        "x": 1e-7,
    }


def test_the_build_checks_task_files_by_hash_without_parsing_them(
    tmp_path: Path, split_small: None
) -> None:
    results = make_results("big", models=["m/a", "m/b"], judges=["j/x"], n_tasks=2)
    path = tmp_path / "big.json"
    write_results(results, path)
    head = read_results(path, tasks=False)
    assert head.tasks == [] and head.task_files is not None
    assert head.judge_blocks == results.judge_blocks
    shard = tmp_path / "big.tasks" / f"{results.tasks[0].id}.json"
    shard.write_bytes(shard.read_bytes() + b" ")
    with pytest.raises(KonkordError, match="the task files are not the ones"):
        read_results(path, tasks=False)


def test_blank_lines_and_a_last_line_without_newline_still_read(tmp_path: Path) -> None:
    log = _verdicts(tmp_path)
    path = log.path("verdicts")
    path.write_bytes(path.read_bytes().replace(b"\n", b"\n\n", 1) + b'{"task_id": "t3", "n": 3}')
    assert [r["n"] for r in log.records("verdicts")] == [0, 1, 2, 3]
    path.write_bytes(b"\n\n")
    assert log.records("verdicts") == []
