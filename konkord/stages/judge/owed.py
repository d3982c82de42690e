"""What the judges owe a run, shared by the single judge and the cascade: every call
(task pair, order, judge), which of them hold a current verdict and which a failure, and the
judge prompt kept on record so that verdicts under two prompts are never mixed.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations
from typing import Any

from konkord.configuration.judge_frame import FRAME_VERSION, frame_hash
from konkord.configuration.runspec import RunSpec
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog, Record, now_iso
from konkord.evidence.stream import fold_stream
from konkord.evidence.verdict_latest import latest_verdict_rows
from konkord.evidence.verdicts import (
    CombinedVerdict,
    combine_verdicts,
    frame_hashes_of,
    load_verdicts,
)
from konkord.stages.judge.design import designed_pairs
from konkord.stages.judge.judge_call import JudgeItem, MessageShas
from konkord.stages.run import current_answers


def judge_items(spec: RunSpec, log: EvidenceLog, judges: tuple[str, ...]) -> tuple[list[JudgeItem], int]:
    """Every call the judges owe the run under its design, and how many task pairs (of
    those the design owes) lack an answer. A conversation owes a call per turn: both
    conversations up to that turn, asked about the last (`Task.turn_task`); the design
    chooses whole conversations."""
    answers = current_answers(log, spec.suite, spec.settings)
    texts = {
        key: str(r["text"])
        for key, r in answers.items()
        if r.get("error") is None and r.get("text") is not None
    }
    items: list[JudgeItem] = []
    skipped = 0
    owed = designed_pairs(spec, log)
    for whole in spec.suite.tasks:
        turns = (
            [whole.turn_task(k) for k in range(1, len(whole.turns) + 1)]
            if whole.multi_turn
            else [whole]
        )
        for first, second in combinations(spec.models, 2):
            model_a, model_b = sorted((first, second))
            if owed is not None and (whole.id, model_a, model_b) not in owed:
                continue
            earlier: list[tuple[str, str, str]] = []
            for task in turns:
                text_a, text_b = texts.get((task.id, model_a)), texts.get((task.id, model_b))
                if text_a is None or text_b is None:
                    skipped += 1
                    break  # a later turn is never judged without its earlier ones
                before = tuple(earlier)
                for judge in judges:
                    for order in ("ab", "ba"):
                        item = JudgeItem(task, model_a, model_b, order, judge, text_a, text_b, before)
                        items.append(item)
                earlier.append((task.prompt, text_a, text_b))
    return items, skipped


def done_keys(
    spec: RunSpec,
    log: EvidenceLog,
    judge: str,
    fhash: str,
    items: list[JudgeItem],
    sent: dict[tuple[str, str, str, str, str], str] | None = None,
) -> set[tuple[str, str, str, str, str]]:
    """Keys whose current verdict was made on exactly the message this run would send now.

    `sent` holds the message hashes of calls this process has just made, so the tally after
    judging does not compose every message again; the rest are composed only for the keys
    that have a verdict."""
    # item.key spelled out: a property call each, 380,000 times over, cost a tenth of this
    owed = {
        (item.task.id, item.model_a, item.model_b, item.order, judge): item
        for item in items
        if item.judge == judge
    }
    known = sent or {}
    done = set()
    shas = MessageShas(spec)
    for key, kind, held in _verdict_keys(log, judge, fhash):
        if kind != "verdict":
            continue
        item = owed.get(key)
        if item is None:
            continue
        wanted = known.get(key)
        if wanted is None:
            wanted = shas.of(item)
        if wanted == held:
            done.add(key)
    return done


# What the closing tally reads of a verdict besides its key (`combine_verdicts`): its winner
# and the answers it was made on.
TALLIED = ("winner", "answer_a_sha", "answer_b_sha")
Key5 = tuple[str, str, str, str, str]


def current_combined(
    spec: RunSpec,
    log: EvidenceLog,
    judges: tuple[str, ...],
    fhash: str,
    items: list[JudgeItem],
    sent: dict[Key5, str],
) -> dict[str, Iterator[CombinedVerdict]]:
    """Per judge, its current verdicts (the latest record of each key, a verdict, made on
    exactly the message this run would send now, as `done_keys`) with both orders combined,
    task by task. The log is folded a chunk at a time and only a tuple of the few fields the
    tally reads is kept per verdict (380,000 verdicts: about 110 MB, where the records, or
    even a dict of those fields each, took 300 MB and more).

    `sent` holds the message hashes of the calls this process made; the rest are composed."""
    latest: dict[Key5, tuple[Any, ...] | None] = {}
    wanted = set(judges)

    def keep(records: list[Record]) -> None:
        for record in records:
            if record.get("frame_hash") != fhash or record.get("judge") not in wanted:
                continue
            key = (
                record["task_id"], record["model_a"], record["model_b"], record["order"],
                record["judge"],
            )
            latest[key] = (
                (*(record.get(name) for name in TALLIED), record.get("message_sha"))
                if record.get("kind") == "verdict"
                else None  # a failure supersedes an earlier verdict
            )

    fold_stream(log, "verdicts", keep)
    owed = {item.key: item for item in items}
    by_task: dict[str, dict[str, list[tuple[Key5, tuple[Any, ...]]]]] = {j: {} for j in judges}
    shas = MessageShas(spec)
    for key, found in latest.items():
        item = owed.get(key)
        if found is None or item is None:
            continue
        asked = sent.get(key) or shas.of(item)
        if asked == found[-1]:
            by_task[item.judge].setdefault(key[0], []).append((key, found))
    latest.clear()

    def combined(tasks: dict[str, list[tuple[Key5, tuple[Any, ...]]]]) -> Iterator[CombinedVerdict]:
        for task_id in sorted(tasks):
            rows = tasks.pop(task_id)
            yield from combine_verdicts(
                {
                    "task_id": key[0], "model_a": key[1], "model_b": key[2], "order": key[3],
                    "judge": key[4], "kind": "verdict", **dict(zip(TALLIED, found, strict=False)),
                }
                for key, found in rows
            )

    return {judge: combined(tasks) for judge, tasks in by_task.items()}


def _verdict_keys(
    log: EvidenceLog, judge: str, fhash: str
) -> Iterator[tuple[tuple[str, str, str, str, str], Any, Any]]:
    """Each current record's call key, kind and message hash, read from the log's columns
    (380,000 records at 20 models x 1,000 tasks, read at list speed, with no row made)."""
    found = latest_verdict_rows(log, judge, fhash)
    if found is None:
        return
    table, rows = found
    names = ("task_id", "model_a", "model_b", "order", "kind", "message_sha")
    tasks, model_a, model_b, order, kind, held = (table.column(name) for name in names)
    for i in rows.tolist():
        yield (tasks[i], model_a[i], model_b[i], order[i], judge), kind[i], held[i]


def failed_keys(log: EvidenceLog, judge: str, fhash: str) -> set[tuple[str, str, str, str, str]]:
    """Keys whose current record is a failure: a rerun asks them afresh, never from the cache
    (the cache would hand back the same empty, cut-off or verdict-less reply). A reply whose
    reminder was never sent (--max-cost, Ctrl-C) is the exception: its first call comes from
    the cache, already paid and recorded, and only the reminder is sent."""
    return {
        (r["task_id"], r["model_a"], r["model_b"], r["order"], judge)
        for r in load_verdicts(log, judge, fhash)
        if r.get("kind") == "failure" and r.get("reminder_sent") is not False
    }


def prompt_of(log: EvidenceLog, fhash: str) -> Record | None:
    """The judge prompt recorded under a frame hash, if any."""
    return log.latest("prompts").get((fhash,))


def check_no_drift(spec: RunSpec, log: EvidenceLog, judge: str, fhash: str) -> None:
    """Refuse to judge when this judge's verdicts in the run were made under another prompt."""
    others = sorted(frame_hashes_of(log, judge) - {fhash})
    if not others:
        return
    old = prompt_of(log, others[-1])
    changes = []
    if old is None:
        changes.append("the judge prompt changed (the old one is not in prompts.jsonl)")
    else:
        if old.get("rubric_sha") != spec.suite.rubric_hash():
            changes.append(f"the rubric in {spec.suite_path} changed")
        if old.get("frame_version") != FRAME_VERSION:
            changes.append(
                f"Konkord's judge frame changed (version {old.get('frame_version')} "
                f"-> {FRAME_VERSION})"
            )
        if not changes:
            changes.append("the judge prompt changed")
    raise KonkordError(
        f'run "{spec.name}" has verdicts by judge "{judge}" under another judge prompt '
        f"({others[-1]}, now {fhash}): {' and '.join(changes)}. Verdicts under two prompts "
        "are never mixed: restore the old rubric, or start a new run under a new name "
        "(a new entry in runs.json, or `konkord run --suite PATH --models A,B --run NEW`)"
    )


def record_prompt(log: EvidenceLog, spec: RunSpec, system_prompt: str, judge: str) -> str:
    """Record the judge prompt (once per frame hash) before any verdict made under it; its hash."""
    fhash = frame_hash(system_prompt)
    if prompt_of(log, fhash) is None:
        log.append(
            "prompts",
            {
                "kind": "prompt",
                "frame_hash": fhash,
                "system_prompt": system_prompt,
                "rubric_sha": spec.suite.rubric_hash(),
                "frame_version": FRAME_VERSION,
                "judge": judge,
                "created_at": now_iso(),
            },
        )
    return fhash
