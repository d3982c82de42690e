"""The comparison pool, the stratified labelling queue, and label records."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from label_fixtures import MODELS, make_run

from konkord.evidence.log import EvidenceLog
from konkord.stages.label.labels import (
    current_labels,
    last_label,
    record_label,
    undo_last_label,
    withdraw_label,
)
from konkord.stages.label.sample import (
    Comparison,
    comparison_pool,
    label_queue,
    orientation,
    pool_for_run,
    stratified_order,
)

FIVE = ("m/a", "m/b", "m/c", "m/d", "m/e")


def synthetic_pool(n_tasks: int, models: tuple[str, ...]) -> list[Comparison]:
    answers = {(f"t{i:02d}", m): {"text": "x", "error": None} for i in range(n_tasks)
               for m in models}
    return comparison_pool(answers, [f"t{i:02d}" for i in range(n_tasks)], models)


def label_all(log: EvidenceLog, items: list[Comparison], labeller: str) -> None:
    for c in items:
        record_label(log, c, c.model_a, labeller, c.model_a)


def test_pool_has_only_pairs_with_two_good_answers(project: Path) -> None:
    def text(task_id: str, index: int) -> str | None:
        if task_id == "task-00" and index == 0:
            return None  # failed answer
        if task_id == "task-01" and index == 1:
            return "   \n"  # empty answer
        return f"answer {task_id} {index}"

    spec = make_run(project, n_tasks=3, answer_text=text)
    pool = pool_for_run(spec, EvidenceLog(spec.run_dir))
    by_task = Counter(c.task_id for c in pool)
    assert by_task == {"task-00": 1, "task-01": 1, "task-02": 3}
    assert all(c.model_a < c.model_b for c in pool)
    assert Comparison("task-00", "anthropic/quokka-model", "sim/walrus-model") in pool
    assert not any(MODELS[0] in (c.model_a, c.model_b) for c in pool if c.task_id == "task-00")


def test_pool_ignores_answers_of_models_not_in_the_run() -> None:
    answers = {("t", m): {"text": "x", "error": None} for m in ("a", "b", "c")}
    assert comparison_pool(answers, ["t"], ["a", "b"]) == [Comparison("t", "a", "b")]


def test_comparison_refuses_unordered_models() -> None:
    with pytest.raises(ValueError, match="model_a < model_b"):
        Comparison("t", "z", "a")


def test_n_caps_the_queue_and_a_full_queue_is_finished(tmp_path: Path) -> None:
    pool = synthetic_pool(24, FIVE)
    assert len(pool) == 240
    log = EvidenceLog(tmp_path / "run")
    queue = label_queue(pool, current_labels(log), "ann", seed=0, n=10)
    assert (len(queue.items), queue.done, queue.total) == (10, 0, 10)
    label_all(log, [item.comparison for item in queue.items], "ann")
    after = label_queue(pool, current_labels(log), "ann", seed=0, n=10)
    assert after.finished and (after.done, after.total) == (10, 10)


def test_first_items_come_from_different_tasks_and_spread_over_pairs() -> None:
    pool = synthetic_pool(25, MODELS)
    assert len(pool) == 75
    for seed in range(5):
        first = stratified_order(pool, seed)[:10]
        assert len({c.task_id for c in first}) == 10
        assert len({(c.model_a, c.model_b) for c in first}) == 3
        ordered = stratified_order(pool, seed)
        assert sorted(ordered) == sorted(pool)


def test_same_seed_same_queue_other_seed_other_queue() -> None:
    pool = synthetic_pool(25, MODELS)
    one = label_queue(pool, {}, "ann", seed=3, n=30).items
    assert one == label_queue(pool, {}, "ann", seed=3, n=30).items
    assert one != label_queue(pool, {}, "ann", seed=4, n=30).items


def test_orientation_is_seeded_and_balanced() -> None:
    pool = synthetic_pool(24, FIVE)
    firsts = [orientation(c, 0, "ann") == c.model_a for c in pool]
    assert 0.4 < sum(firsts) / len(firsts) < 0.6
    assert firsts == [orientation(c, 0, "ann") == c.model_a for c in pool]
    assert firsts != [orientation(c, 1, "ann") == c.model_a for c in pool]


def test_resume_skips_labelled_items_and_keeps_the_order(tmp_path: Path) -> None:
    pool = synthetic_pool(25, MODELS)
    log = EvidenceLog(tmp_path / "run")
    full = label_queue(pool, {}, "ann", seed=0, n=20).items
    label_all(log, [item.comparison for item in full[:7]], "ann")
    resumed = label_queue(pool, current_labels(log), "ann", seed=0, n=20)
    assert resumed.items == full[7:]
    assert (resumed.done, resumed.total) == (7, 20)


def test_skip_leaves_an_item_out_and_pulls_the_next_one_in() -> None:
    pool = synthetic_pool(25, MODELS)
    full = label_queue(pool, {}, "ann", seed=0, n=11).items
    skipped = label_queue(pool, {}, "ann", seed=0, n=10, skip={full[0].comparison}).items
    assert skipped == full[1:11]


def test_second_labeller_gets_half_from_the_first_labellers_items(tmp_path: Path) -> None:
    pool = synthetic_pool(25, MODELS)
    log = EvidenceLog(tmp_path / "run")
    first = label_queue(pool, {}, "ann", seed=0, n=20).items
    label_all(log, [item.comparison for item in first], "ann")
    ann_items = {item.comparison for item in first}

    queue = label_queue(pool, current_labels(log), "bob", seed=0, n=10)
    shared = [item.comparison in ann_items for item in queue.items]
    assert len(queue.items) == 10
    assert sum(shared) == 5
    assert shared[:4] == [True, False, True, False]

    # Bob labels 4 (2 shared, 2 fresh), restarts: the split of his 10 stays half and half.
    label_all(log, [item.comparison for item in queue.items[:4]], "bob")
    resumed = label_queue(pool, current_labels(log), "bob", seed=0, n=10)
    assert resumed.items == queue.items[4:]
    assert sum(item.comparison in ann_items for item in resumed.items) == 3


def test_second_labeller_fills_up_when_the_first_labelled_little(tmp_path: Path) -> None:
    pool = synthetic_pool(25, MODELS)
    log = EvidenceLog(tmp_path / "run")
    label_all(log, pool[:2], "ann")
    queue = label_queue(pool, current_labels(log), "bob", seed=0, n=10)
    assert len(queue.items) == 10
    assert sum(item.comparison in set(pool[:2]) for item in queue.items) == 2
    no_overlap = label_queue(pool, current_labels(log), "bob", seed=0, n=10, overlap=0)
    assert no_overlap.items == label_queue(pool, {}, "bob", seed=0, n=10).items


def test_simulated_labels_do_not_count_as_a_first_labeller(tmp_path: Path) -> None:
    pool = synthetic_pool(25, MODELS)
    log = EvidenceLog(tmp_path / "run")
    for c in pool[:20]:
        record_label(log, c, "tie", "sim-person", c.model_a, source="simulated")
    queue = label_queue(pool, current_labels(log), "bob", seed=0, n=10)
    assert queue.items == label_queue(pool, {}, "bob", seed=0, n=10).items


def test_label_records_follow_the_evidence_format(tmp_path: Path) -> None:
    log = EvidenceLog(tmp_path / "run")
    c = Comparison("t1", "m/a", "m/b")
    record_label(log, c, "m/b", "ann", shown_first="m/b")
    (record,) = log.records("labels")
    assert record["kind"] == "label"
    assert {k: record[k] for k in ("task_id", "model_a", "model_b", "labeller", "winner",
                                   "shown_first", "source")} == {
        "task_id": "t1", "model_a": "m/a", "model_b": "m/b", "labeller": "ann",
        "winner": "m/b", "shown_first": "m/b", "source": "human"}  # fmt: skip
    assert record["created_at"].endswith("+00:00")
    with pytest.raises(ValueError, match="winner 'm/c'"):
        record_label(log, c, "m/c", "ann", "m/a")
    with pytest.raises(ValueError, match="shown_first"):
        record_label(log, c, "tie", "ann", "m/z")


def test_undo_appends_a_withdrawal_and_walks_back(tmp_path: Path) -> None:
    log = EvidenceLog(tmp_path / "run")
    c1, c2 = Comparison("t1", "m/a", "m/b"), Comparison("t2", "m/a", "m/b")
    record_label(log, c1, "m/a", "ann", "m/a")
    record_label(log, c2, "tie", "ann", "m/b")
    record_label(log, c1, "m/b", "bob", "m/b")
    assert undo_last_label(log, "ann") is not None
    records = log.records("labels")
    assert len(records) == 4 and records[-1]["winner"] is None
    assert records[-1]["task_id"] == "t2" and records[-1]["labeller"] == "ann"
    assert set(current_labels(log)) == {c1.label_key("ann"), c1.label_key("bob")}
    last = undo_last_label(log, "ann")
    assert last is not None and last["task_id"] == "t1"
    assert undo_last_label(log, "ann") is None
    assert set(current_labels(log)) == {c1.label_key("bob")}
    # Relabelling after an undo stands again; withdrawing twice is harmless.
    record_label(log, c2, "m/a", "ann", "m/a")
    withdraw_label(log, c1, "ann")
    current = current_labels(log)
    assert current[c2.label_key("ann")]["winner"] == "m/a"
    assert last_label(log, "ann") == current[c2.label_key("ann")]
