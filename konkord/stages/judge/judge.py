"""The judge stage: every pair of answers judged blind, in both orders, by each judge.

Every bias control is enforced here rather than advised: the judge sees "Answer 1" and
"Answer 2" in a frame Konkord owns, each pair is asked in both orders as two separate calls, a
judge from a ranked model's provider family is refused, and verdicts made under one judge
prompt are never mixed with verdicts made under another. Each verdict is appended to the
evidence log as it arrives, so a killed run resumes without losing or re-paying one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from itertools import combinations

from konkord.configuration.judge_frame import FRAME_VERSION, compose_system_prompt, frame_hash
from konkord.configuration.runspec import RunSpec
from konkord.errors import KonkordError
from konkord.evidence.log import AsyncAppender, EvidenceLog, Record, now_iso
from konkord.evidence.stopping import one_writer
from konkord.evidence.verdicts import frame_hashes_of, load_verdicts
from konkord.providers.calls import NotLaunched
from konkord.providers.families import check_judge_independence
from konkord.providers.llm import ModelClient
from konkord.stages.judge.judge_call import JudgeItem as JudgeItem
from konkord.stages.judge.judge_call import ask_judge, judge_settings, message_sha
from konkord.stages.judge.judge_call import judge_messages as judge_messages
from konkord.stages.judge.judge_summary import JudgeSummary as JudgeSummary
from konkord.stages.judge.judge_summary import JudgeTally as JudgeTally
from konkord.stages.judge.judge_summary import summary_lines as summary_lines
from konkord.stages.judge.judge_summary import tally_consistency
from konkord.stages.run import current_answers

DEFAULT_MAX_TOKENS = 8192
ProgressCallback = Callable[[int, int], None]  # (items done, items in all)


def _items(spec: RunSpec, log: EvidenceLog, judges: tuple[str, ...]) -> tuple[list[JudgeItem], int]:
    """Every call the judges owe the run, and how many task pairs lack an answer."""
    answers = current_answers(log, spec.suite, spec.settings)
    texts = {
        key: str(r["text"])
        for key, r in answers.items()
        if r.get("error") is None and r.get("text") is not None
    }
    items: list[JudgeItem] = []
    skipped = 0
    for task in spec.suite.tasks:
        for first, second in combinations(spec.models, 2):
            model_a, model_b = sorted((first, second))
            text_a, text_b = texts.get((task.id, model_a)), texts.get((task.id, model_b))
            if text_a is None or text_b is None:
                skipped += 1
                continue
            for judge in judges:
                for order in ("ab", "ba"):
                    items.append(JudgeItem(task, model_a, model_b, order, judge, text_a, text_b))
    return items, skipped


def _done_keys(
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
    owed = {item.key: item for item in items if item.judge == judge}
    known = sent or {}
    done = set()
    for record in load_verdicts(log, judge, fhash):
        if record.get("kind") != "verdict":
            continue
        key = (
            record["task_id"], record["model_a"], record["model_b"], record["order"], judge
        )
        item = owed.get(key)
        if item is None:
            continue
        wanted = known.get(key)
        if wanted is None:
            wanted = message_sha(judge_messages(spec, item)[1]["content"])
        if wanted == record.get("message_sha"):
            done.add(key)
    return done


def failed_keys(log: EvidenceLog, judge: str, fhash: str) -> set[tuple[str, str, str, str, str]]:
    """Keys whose current record is a failure: a rerun asks them afresh, never from the cache
    (the cache would hand back the same empty, cut-off or verdict-less reply)."""
    return {
        (r["task_id"], r["model_a"], r["model_b"], r["order"], judge)
        for r in load_verdicts(log, judge, fhash)
        if r.get("kind") == "failure"
    }


def planned_calls(spec: RunSpec, judges: tuple[str, ...] | list[str]) -> int:
    """How many judge calls a complete judging of the run takes (recorded ones included)."""
    items, _ = _items(spec, EvidenceLog(spec.run_dir), tuple(dict.fromkeys(judges)))
    return len(items)


def calls_to_make(spec: RunSpec, judges: tuple[str, ...] | list[str]) -> list[JudgeItem]:
    """The judge calls still owed (missing, failed or stale), for an estimate before judging."""
    log = EvidenceLog(spec.run_dir)
    judges = tuple(dict.fromkeys(judges))
    items, _ = _items(spec, log, judges)
    fhash = frame_hash(compose_system_prompt(spec.suite))
    done = {j: _done_keys(spec, log, j, fhash, items) for j in judges}
    return [item for item in items if item.key not in done[item.judge]]


def missing_verdicts(spec: RunSpec, judge: str) -> int:
    """How many judge calls `judge` still owes the run (missing, failed or stale verdicts)."""
    log = EvidenceLog(spec.run_dir)
    items, _ = _items(spec, log, (judge,))
    fhash = frame_hash(compose_system_prompt(spec.suite))
    return len(items) - len(_done_keys(spec, log, judge, fhash, items))


def _prompt_of(log: EvidenceLog, fhash: str) -> Record | None:
    return log.latest("prompts").get((fhash,))


def check_no_drift(spec: RunSpec, log: EvidenceLog, judge: str, fhash: str) -> None:
    """Refuse to judge when this judge's verdicts in the run were made under another prompt."""
    others = sorted(frame_hashes_of(log, judge) - {fhash})
    if not others:
        return
    old = _prompt_of(log, others[-1])
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


def _record_prompt(log: EvidenceLog, spec: RunSpec, system_prompt: str, judge: str) -> str:
    fhash = frame_hash(system_prompt)
    if _prompt_of(log, fhash) is None:
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


def preflight(spec: RunSpec, judges: tuple[str, ...] | list[str]) -> list[str]:
    """Every refusal, before any call: no judge, a judge sharing a provider family with any
    model of the run (not only those with answers), or verdicts under another prompt.
    Returns notes worth showing (a judge whose vendor is unknown)."""
    if not judges:
        raise KonkordError(
            f'run "{spec.name}" has no judge: give --judge MODEL, or list "judges" for it '
            "in runs.json"
        )
    log = EvidenceLog(spec.run_dir)
    fhash = frame_hash(compose_system_prompt(spec.suite))
    notes: list[str] = []
    for judge in judges:
        if judge.startswith(("sim/", "sim-judge/")):
            check_judge_independence(judge, spec.models)
        else:
            notes += check_judge_independence(judge, spec.models)
        check_no_drift(spec, log, judge, fhash)
    return notes


@one_writer("judge", lambda spec, *args, **kwargs: spec.run_dir)
async def judge_run(
    spec: RunSpec,
    judges: tuple[str, ...] | list[str],
    client: ModelClient | None,
    concurrency: int = 8,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    on_progress: ProgressCallback | None = None,
    api_base: str | None = None,
    only: Callable[[JudgeItem], bool] | None = None,
) -> JudgeSummary:
    """Judge every pair with answers, in both orders, by each judge; skip what is recorded.

    `only` limits the calls to the items it accepts (a cascade's strong judge sees the
    escalated pairs alone).

    Refuses before any call: no judge, a judge sharing a provider family with any model of the
    run, or verdicts of a judge made under another prompt. `api_base` defaults to the run's."""
    judges = tuple(dict.fromkeys(judges or spec.judges))
    log = EvidenceLog(spec.run_dir)
    system_prompt = compose_system_prompt(spec.suite)
    fhash = frame_hash(system_prompt)
    summary = JudgeSummary(spec.name, fhash, notes=preflight(spec, judges))
    items, summary.skipped_pairs = _items(spec, log, judges)
    if only is not None:
        items = [item for item in items if only(item)]
    todo: list[JudgeItem] = []
    unparseable: set[tuple[str, str, str, str, str]] = set()
    for judge in judges:
        tally = summary.tallies[judge] = JudgeTally(judge)
        done = _done_keys(spec, log, judge, fhash, items)
        tally.already_recorded = len(done)
        todo += [i for i in items if i.judge == judge and i.key not in done]
        unparseable |= failed_keys(log, judge, fhash)
    if todo:
        for judge in judges:
            _record_prompt(log, spec, system_prompt, judge)
    client = client or ModelClient(concurrency=concurrency, prices=spec.prices)
    settings = judge_settings(max_tokens, api_base or spec.settings.api_base)
    total = len(items)
    finished = total - len(todo)
    if on_progress:
        on_progress(finished, total)
    gate = asyncio.Semaphore(max(1, concurrency))
    # Verdicts that finish together share one write and one fsync, off the event loop.
    appender = AsyncAppender(log, "verdicts")
    sent: dict[tuple[str, str, str, str, str], str] = {}

    async def judge_one(item: JudgeItem) -> None:
        nonlocal finished
        async with gate:
            try:
                record, calls = await ask_judge(
                    spec, item, client, settings, fhash, use_cache=item.key not in unparseable
                )
            except NotLaunched:
                return  # --max-cost or Ctrl-C: not sent; a rerun asks it
        try:
            await appender.append(record)
        except OSError as exc:
            raise KonkordError(
                f"{log.path('verdicts')}: cannot write ({exc.strerror or exc}); the verdicts "
                "saved so far are kept: fix this and run the same command again"
            ) from None
        sent[item.key] = record["message_sha"]
        tally = summary.tallies[item.judge]
        where = f"{item.task.id} / {item.model_a} vs {item.model_b} ({item.order})"
        tally.count(record, where, all(c.cached for c in calls))
        finished += 1
        if on_progress:
            on_progress(finished, total)

    await asyncio.gather(*(judge_one(item) for item in todo))
    for judge in judges:
        done = _done_keys(spec, log, judge, fhash, items, sent)
        current: list[Record] = [
            r
            for r in load_verdicts(log, judge, fhash)
            if (r["task_id"], r["model_a"], r["model_b"], r["order"], judge) in done
        ]
        tally_consistency(summary.tallies[judge], current)
    return summary
