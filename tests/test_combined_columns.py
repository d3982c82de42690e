"""Combined verdicts read from the log's columns carry their columns (`CombinedColumns`), and
every figure that reads them gives what it gives pair by pair: each column against the
verdict objects, and whole results files made with and without the columns, on the demo runs
(several judges, a cascade, labels, conversations) and on a run of odd records (failures,
flips, ties, one order missing, a superseded record, a second judge, a pair outside the run)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import REPO
from evidence_factory import add_verdict, write_runs
from test_report_tasks import odd_run

from konkord.configuration.runspec import resolve_run
from konkord.evidence import verdicts as verdicts_module
from konkord.evidence.combined_columns import CombinedList, columns_of, complete_only, distinct
from konkord.evidence.log import EvidenceLog
from konkord.evidence.verdict_table import VerdictRow
from konkord.evidence.verdicts import combine_verdicts, load_verdicts
from konkord.stages.report.report import ReportOptions, build_results

FAST = ReportOptions(resamples=30, seed=3)
MODELS = ["m/a", "m/b", "m/c", "m/d"]
DEMOS = ["demo-conversations", "demo-python-codegen", "demo-support-replies"]


def odder_run(root: Path) -> None:
    """The odd run, and a second judge with a flip, a tie, a superseded order, one order
    missing, a pair with a model the run does not list, and pairs with a listed model that
    has no answers (as an import has none): no length, no answer hash."""
    odd_run(root)
    write_runs(root, [{"name": "r", "suite": "suites/tiny.yaml", "models": MODELS}])
    log = EvidenceLog(root / "runs" / "r")
    texts = {
        (r["task_id"], r["model"]): str(r["text"])
        for r in log.records("answers")
        if r.get("text") is not None
    }
    j2 = "judge/j2"
    add_verdict(root, "r", texts, "t00", "m/a", "m/b", ("1", "1"), judge=j2)  # flipped
    add_verdict(root, "r", texts, "t00", "m/b", "m/c", ("tie", "tie"), judge=j2)
    add_verdict(root, "r", texts, "t01", "m/a", "m/c", ("2", "1"), judge=j2)
    add_verdict(root, "r", texts, "t01", "m/a", "m/c", ("1", "2"), judge=j2)  # supersedes
    add_verdict(root, "r", texts, "t02", "m/b", "m/c", ("1", "2"), judge=j2)
    records = [r for r in log.records("verdicts") if r["judge"] == j2]
    log.append_many(
        "verdicts",
        [
            {**records[0], "task_id": "t02", "model_b": "m/c", "order": "ab"},  # ba missing
            # a model the run does not list (no answer of its own to go stale against)
            {**records[0], "model_b": "m/z", "answer_b_sha": None},
            {**records[1], "model_b": "m/z", "answer_b_sha": None, "winner": "m/z"},
            *(
                {**records[k], "task_id": task, "model_b": "m/d", "answer_b_sha": None,
                 "winner": "m/d" if task == "t00" else records[k]["winner"]}
                for task in ("t00", "t01", "t02") for k in (0, 1)
            ),
        ],
    )


def without_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Combined verdicts made as plain lists: every figure reads them pair by pair."""
    def plain(verdicts: Any, columns: Any, size: int | None = None, table: Any = None) -> Any:
        return list(verdicts() if size is not None else verdicts)  # made now, as a list

    monkeypatch.setattr(verdicts_module, "CombinedList", plain)


def test_columns_hold_what_each_combined_verdict_holds(project: Path) -> None:
    odder_run(project)
    log = EvidenceLog(project / "runs" / "r")
    for judge in ("judge/j1", "judge/j2"):
        combined = combine_verdicts(load_verdicts(log, judge))
        columns = columns_of(combined)
        assert columns is not None and len(columns) == len(combined) > 3
        assert columns.text("task") == [c.task_id for c in combined]
        assert columns.text("model_a") == [c.model_a for c in combined]
        assert columns.text("model_b") == [c.model_b for c in combined]
        assert columns.complete.tolist() == [c.complete for c in combined]
        assert columns.flipped.tolist() == [c.flipped for c in combined]
        for c, score in zip(combined, columns.score.tolist(), strict=True):
            if c.winner is None:
                assert math.isnan(score)
            else:
                assert score == (0.5 if c.winner == "tie" else float(c.winner == c.model_a))
        for name, rows in (("ab", columns.ab), ("ba", columns.ba)):
            held = [c.orders.get(name) for c in combined]
            assert all(r is None or type(r) is VerdictRow for r in held)
            assert rows.tolist() == [-1 if r is None else r.index for r in held]  # type: ignore[attr-defined]
        assert not columns.complete.all() and columns.flipped.any()
        done = complete_only(combined)
        assert done == [c for c in combined if c.complete]
        assert columns_of(done) is not None and columns_of(done).complete.all()  # type: ignore[union-attr]


def test_a_changed_list_lets_go_of_its_columns(project: Path) -> None:
    odd_run(project)
    combined = combine_verdicts(load_verdicts(EvidenceLog(project / "runs" / "r"), "judge/j1"))
    assert isinstance(combined, CombinedList) and columns_of(combined) is not None
    combined.append(combined[0])
    assert columns_of(combined) is None
    picked = combined.take(np.array([1, 0]))
    assert picked == [combined[1], combined[0]] and columns_of(picked) is None


@pytest.mark.parametrize("with_columns", [True, False])
def test_plain_records_give_no_columns(project: Path, with_columns: bool) -> None:
    odd_run(project)
    rows = load_verdicts(EvidenceLog(project / "runs" / "r"), "judge/j1")
    combined = combine_verdicts(rows if with_columns else [dict(r) for r in rows])
    assert (columns_of(combined) is not None) is with_columns


def test_the_odd_runs_results_are_the_same_with_and_without_columns(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    odder_run(project)
    spec = resolve_run("r")
    with_columns = build_results(spec, FAST).model_dump_json(indent=1)
    without_columns(monkeypatch)
    assert with_columns == build_results(spec, FAST).model_dump_json(indent=1)
    assert '"judge/j2"' in with_columns and '"flip_rate"' in with_columns


@pytest.mark.parametrize("run", DEMOS)
def test_the_demo_results_are_the_same_with_and_without_columns(
    run: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # read only: build_results writes nothing
    spec = resolve_run(run)
    with_columns = build_results(spec, FAST).model_dump_json(indent=1)
    without_columns(monkeypatch)
    assert with_columns == build_results(spec, FAST).model_dump_json(indent=1)


def test_dense_codes_are_what_a_sort_gives() -> None:
    from konkord.evidence.combined_columns import dense_codes

    codes = np.random.default_rng(5).integers(0, 50, size=400)
    for picked in (codes, codes[:0], np.array([7]), np.array([3, 3, 0])):
        distinct, inverse = dense_codes(picked, 50)
        expected, expected_inverse = np.unique(picked, return_inverse=True)
        assert distinct.tolist() == expected.tolist()
        assert inverse.tolist() == expected_inverse.reshape(-1).tolist()


def test_verdicts_combined_from_the_columns_are_the_ones_made_pair_by_pair(
    project: Path,
) -> None:
    import dataclasses

    odder_run(project)
    log = EvidenceLog(project / "runs" / "r")
    for judge in ("judge/j1", "judge/j2"):
        rows = load_verdicts(log, judge)
        from_rows = combine_verdicts(rows)
        from_dicts = combine_verdicts([dict(r) for r in rows])
        assert columns_of(from_dicts) is None
        assert len(from_rows) == len(from_dicts) > 3
        for made, plain in zip(from_rows, from_dicts, strict=True):
            assert type(made) is type(plain)
            assert dataclasses.replace(made, orders={}) == dataclasses.replace(plain, orders={})
            assert {k: dict(v) for k, v in made.orders.items()} == plain.orders
        with pytest.raises(dataclasses.FrozenInstanceError):
            from_rows[0].winner = "m/a"  # type: ignore[misc]


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8])
def test_distinct_is_numpys_unique(dtype: type) -> None:
    rng = np.random.default_rng(5)
    for size, high in [(0, 3), (1, 3), (7, 2), (1000, 5), (5000, 100)]:
        values = rng.integers(-3, high, size=size).astype(dtype)
        got, want = distinct(values), np.unique(values)
        assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("size", [0, 1, 7, 5000])
def test_key_runs_give_what_np_unique_gives_and_each_keys_last(size: int) -> None:
    from konkord.evidence.combined_columns import key_runs

    key = np.random.default_rng(size).integers(0, max(1, size // 3), size=size)
    order, starts = key_runs(key)
    distinct, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    assert key[order[starts]].tolist() == distinct.tolist()
    assert order[starts].tolist() == first.tolist()  # each key's first entry, as np.unique's
    ends = [*starts.tolist()[1:], size] if size else []
    for k, (start, end) in enumerate(zip(starts.tolist(), ends, strict=True)):
        entries = order[start:end].tolist()
        assert entries == sorted(entries) == np.flatnonzero(inverse == k).tolist()
