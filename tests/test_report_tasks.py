"""The results file's tasks written as plain data (`TaskData`) are byte for byte what the
validated models (`TaskView`) write: on the committed demo runs (conversations, checks, labels,
a cascade) and on a run with odd records (failures, one order only, unicode, control
characters, whole-number costs, NaN), from the log's columns and from plain records alike."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import REPO
from evidence_factory import add_answers, add_verdict, write_runs, write_suite

from konkord.configuration.runspec import resolve_run
from konkord.evidence.log import EvidenceLog, encode_record
from konkord.evidence.verdicts import answer_sha, combine_verdicts, load_verdicts
from konkord.results import files as results_files
from konkord.results.schema import TaskData, TaskView, read_results
from konkord.stages.current import good_answers
from konkord.stages.report.report import ReportOptions, report_parts, write_report
from konkord.stages.report.task_source import task_source, tasks_of

FAST = ReportOptions(resamples=20, seed=1)
DEMOS = ["demo-conversations", "demo-python-codegen", "demo-support-replies"]


def validated(task: TaskData | TaskView) -> bytes:
    view = task.view() if isinstance(task, TaskData) else task
    return view.model_dump_json().encode()


def written(task: TaskData | TaskView) -> bytes:
    return task.json() if isinstance(task, TaskData) else validated(task)


@pytest.mark.parametrize("run", DEMOS)
def test_demo_tasks_are_written_as_the_committed_results_hold_them(
    run: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # read only: report_parts writes nothing
    _, tasks = report_parts(resolve_run(run), FAST)
    made = list(tasks)
    committed = read_results(REPO / "results" / f"{run}.json").tasks
    assert [task.id for task in made] == [task.id for task in committed]
    for task, old in zip(made, committed, strict=True):
        assert written(task) == validated(task) == validated(old)


def odd_run(root: Path) -> None:
    """Three models on three tasks: unicode and control characters in answers and rationales,
    a failed answer, a cut-off one, a whole-number cost and a NaN latency, a judge failure, a
    pair judged in one order only, and labels (one written with the pair the other way)."""
    suite = write_suite(root, 3)
    models = ["m/a", "m/b", "m/c"]
    write_runs(root, [{"name": "r", "suite": "suites/tiny.yaml", "models": models}])
    texts = add_answers(
        root, "r", suite, models, cost=2,
        text_for=lambda task, model: f"Réponse «{model}» — {task}\n\t\"quoted\" \\ \x01 😀",
    )  # fmt: skip
    log = EvidenceLog(root / "runs" / "r")
    changed = {
        ("t01", "m/a"): {"finish_reason": "length", "cost_usd": 0.5, "latency_s": math.nan},
        ("t01", "m/b"): {"text": None, "error": "timeout: no reply", "error_kind": "timeout"},
    }  # a failure stands only where no good answer does: the file is written anew
    answers = [
        {**r, **changed.get((r["task_id"], r["model"]), {})} for r in log.records("answers")
    ]
    log.path("answers").write_bytes(b"".join(map(encode_record, answers)))
    for task in ("t00", "t01", "t02"):
        add_verdict(root, "r", texts, task, "m/a", "m/b", ("1", "2"))
        add_verdict(root, "r", texts, task, "m/b", "m/c", ("2", "2"))
    add_verdict(root, "r", texts, "t00", "m/a", "m/c", ("tie", "1"))
    verdicts = log.records("verdicts")
    first = next(r for r in verdicts if (r["model_a"], r["model_b"]) == ("m/a", "m/c"))

    def on(task: str) -> dict[str, object]:
        shas = {f"answer_{s}_sha": answer_sha(texts[(task, f"m/{m}")]) for s, m in ("aa", "bc")}
        return {**first, "task_id": task, **shas}

    log.append_many(
        "verdicts",
        [
            {**on("t01"), "order": "ab", "rationale": "Ça «va» \u2028 ok"},
            {
                **on("t02"), "kind": "failure", "position_winner": None,
                "winner": None, "rationale": None, "reason": "unparseable",
                "detail": "no VERDICT line: 'Hmm…'",
            },
            {**on("t02"), "order": "ba", "kind": "failure", "winner": None,
             "position_winner": None, "rationale": None, "reason": "refused", "detail": None},
        ],
    )  # fmt: skip
    log.append_many(
        "labels",
        [
            {"task_id": "t00", "model_a": "m/a", "model_b": "m/b", "labeller": "ana",
             "winner": "m/a", "created_at": "2026-01-02T03:04:05+00:00"},
            {"task_id": "t00", "model_a": "m/c", "model_b": "m/a", "labeller": "bo",
             "winner": "tie", "created_at": "2026-01-02T03:04:05+00:00"},
        ],
    )  # fmt: skip


def test_odd_records_are_written_as_their_validated_views(project: Path) -> None:
    odd_run(project)
    _, tasks = report_parts(resolve_run("r"), FAST)
    made = list(tasks)
    assert all(isinstance(task, TaskData) for task in made)
    for task in made:
        assert task.json() == validated(task)
    data = {task.id: json.loads(task.json()) for task in made}
    t01 = {a["model"]: a for a in data["t01"]["answers"]}
    assert t01["m/a"]["truncated"] and math.isnan(t01["m/a"]["latency_s"])
    assert t01["m/b"]["error"] == "timeout: no reply" and t01["m/c"]["cost_usd"] == 2.0
    assert b'"cost_usd":2.0' in made[0].json()  # a whole number in the log, a float here
    failed = [
        c for c in data["t02"]["comparisons"] if (c["model_a"], c["model_b"]) == ("m/a", "m/c")
    ]
    assert [o["failure"] for o in failed[0]["orders"]] == [
        "unparseable: no VERDICT line: 'Hmm…'",
        "refused",
    ]
    labelled = {(c["model_a"], c["model_b"]): c["labels"] for c in data["t00"]["comparisons"]}
    assert labelled[("m/a", "m/b")] == [{"labeller": "ana", "winner": "m/a"}]


def test_rows_of_the_logs_columns_and_plain_records_give_the_same_tasks(project: Path) -> None:
    odd_run(project)
    spec = resolve_run("r")
    log = EvidenceLog(spec.run_dir)
    answers = good_answers(spec, log)
    rows = load_verdicts(log, "judge/j1")
    from_rows = combine_verdicts(rows)
    from_dicts = combine_verdicts([dict(row) for row in rows])
    assert {type(c.orders).__name__ for c in from_rows} == {"OrderPair"}
    assert {type(c.orders).__name__ for c in from_dicts} == {"dict"}
    made = [
        [task.json() for task in tasks_of(task_source(spec, answers, {"judge/j1": combined}, [], {}))]
        for combined in (from_rows, from_dicts)
    ]
    assert made[0] == made[1]
    assert len(made[0]) == 3


def test_a_written_report_holds_the_validated_tasks(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    odd_run(project)
    spec = resolve_run("r")
    _, tasks = report_parts(spec, FAST)
    expected = {task.id: validated(task) for task in tasks}
    path = project / "results" / "r.json"
    monkeypatch.setattr(results_files, "INLINE_TASKS_MAX", 0)  # a task file each
    write_report(spec, path, FAST)
    for task_id, data in expected.items():
        assert (project / "results" / "r.tasks" / f"{task_id}.json").read_bytes() == data
    monkeypatch.setattr(results_files, "INLINE_TASKS_MAX", 10**9)  # inline: validated
    write_report(spec, path, FAST)
    assert [validated(task) for task in read_results(path).tasks] == list(expected.values())


def test_a_task_file_that_cannot_be_written_stops_the_report_before_its_results_file(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The task files are written on a thread of their own: a failure there still reaches
    # the report, and the results file (which would name the files) is not written.
    odd_run(project)
    spec = resolve_run("r")
    written_before = results_files._write_task
    calls: list[str] = []

    def failing(folder: Path, task_id: str, data: bytes, staged: bool = False) -> None:
        calls.append(task_id)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        written_before(folder, task_id, data, staged)

    monkeypatch.setattr(results_files, "INLINE_TASKS_MAX", 0)
    monkeypatch.setattr(results_files, "_write_task", failing)
    path = project / "results" / "r.json"
    with pytest.raises(OSError, match="No space left"):
        write_report(spec, path, FAST)
    assert not path.exists()
    assert calls == ["t00", "t01"]  # in order, and none after the failure


def test_msgspec_writes_every_character_as_pydantic_does() -> None:
    """The comparisons are written by msgspec (`task_json`), the rest of a task by pydantic: a
    text is the same bytes either way, whatever characters it holds (lone surrogates, which
    neither writes, aside)."""
    import msgspec
    import pydantic_core

    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    assert msgspec.json.encode(text) == pydantic_core.to_json(text)
    assert msgspec.json.encode([True, False, None, {"a": "b"}, []]) == pydantic_core.to_json(
        [True, False, None, {"a": "b"}, []]
    )
