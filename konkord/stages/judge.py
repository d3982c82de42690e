"""The judge stage: every pair of answers judged blind, in both orders, by each judge.

Every bias control is enforced here rather than advised: the judge sees "Answer 1" and
"Answer 2" in a frame Konkord owns, each pair is asked in both orders as two separate calls, a
judge from a ranked model's provider family is refused, and verdicts made under one judge
prompt are never mixed with verdicts made under another. Each verdict is appended to the
evidence log as it arrives, so a killed run resumes without losing or re-paying one.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations

from konkord.errors import KonkordError
from konkord.evidence import EvidenceLog, Record, now_iso
from konkord.families import check_judge_independence
from konkord.judge_frame import (
    FRAME_VERSION,
    RETRY_REMINDER,
    compose_system_prompt,
    compose_user_message,
    frame_hash,
    parse_verdict,
)
from konkord.llm import CallResult, CallSettings, Message, ModelClient
from konkord.runspec import RunSpec
from konkord.stages.run import current_answers
from konkord.suite import Task
from konkord.verdicts import answer_sha, combine_verdicts, frame_hashes_of, load_verdicts

DEFAULT_MAX_TOKENS = 8192
ProgressCallback = Callable[[int, int], None]  # (items done, items in all)


@dataclass(frozen=True)
class JudgeItem:
    """One judge call to make: a task, a pair (model_a < model_b), an order, a judge."""

    task: Task
    model_a: str
    model_b: str
    order: str  # "ab": model_a shown as Answer 1; "ba": model_b shown as Answer 1
    judge: str
    answer_a: str
    answer_b: str

    @property
    def shown(self) -> tuple[str, str]:
        """The answer texts as Answer 1 and Answer 2."""
        if self.order == "ab":
            return self.answer_a, self.answer_b
        return self.answer_b, self.answer_a

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """The evidence key without the frame hash (one hash per judge and run)."""
        return (self.task.id, self.model_a, self.model_b, self.order, self.judge)


@dataclass
class JudgeTally:
    """What happened for one judge, and how consistent it was across orders."""

    judge: str
    judged: int = 0
    cached: int = 0
    already_recorded: int = 0
    failed: int = 0
    cost_usd: float = 0.0
    unknown_price: bool = False
    complete_pairs: int = 0
    flipped_pairs: int = 0
    incomplete_pairs: int = 0
    most_flipped: list[tuple[str, str, int, int]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def flip_rate(self) -> float | None:
        """Share of complete pairs whose two orders disagreed."""
        return self.flipped_pairs / self.complete_pairs if self.complete_pairs else None


@dataclass
class JudgeSummary:
    """What a judge stage did, per judge, for the closing summary."""

    run: str
    frame_hash: str
    tallies: dict[str, JudgeTally] = field(default_factory=dict)
    skipped_pairs: int = 0  # task pairs not judged because an answer is missing or failed
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> int:
        """Failure records written by this stage, over all judges."""
        return sum(t.failed for t in self.tallies.values())


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def judge_settings(max_tokens: int, api_base: str | None) -> CallSettings:
    """Judge calls are deterministic where the provider allows: temperature 0, seed 0."""
    return CallSettings(temperature=0.0, max_tokens=max_tokens, seed=0, api_base=api_base)


def judge_messages(spec: RunSpec, item: JudgeItem) -> list[Message]:
    """The two messages of one judge call."""
    answer_1, answer_2 = item.shown
    return [
        {"role": "system", "content": compose_system_prompt(spec.suite)},
        {
            "role": "user",
            "content": compose_user_message(item.task, spec.suite, answer_1, answer_2),
        },
    ]


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
    spec: RunSpec, log: EvidenceLog, judge: str, fhash: str, items: list[JudgeItem]
) -> set[tuple[str, str, str, str, str]]:
    """Keys whose current verdict was made on exactly the message this run would send now."""
    wanted = {
        item.key: _sha(judge_messages(spec, item)[1]["content"])
        for item in items
        if item.judge == judge
    }
    done = set()
    for record in load_verdicts(log, judge, fhash):
        key = (
            record["task_id"], record["model_a"], record["model_b"], record["order"], judge
        )
        if record.get("kind") == "verdict" and wanted.get(key) == record.get("message_sha"):
            done.add(key)
    return done


def planned_calls(spec: RunSpec, judges: tuple[str, ...] | list[str]) -> int:
    """How many judge calls a complete judging of the run takes (recorded ones included)."""
    items, _ = _items(spec, EvidenceLog(spec.run_dir), tuple(dict.fromkeys(judges)))
    return len(items)


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


def _winner(item: JudgeItem, position: str) -> str:
    if position == "tie":
        return "tie"
    shown_first = item.model_a if item.order == "ab" else item.model_b
    shown_second = item.model_b if item.order == "ab" else item.model_a
    return shown_first if position == "1" else shown_second


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


async def _judge_one(
    spec: RunSpec,
    item: JudgeItem,
    client: ModelClient,
    settings: CallSettings,
    fhash: str,
    use_cache: bool = True,
) -> tuple[Record, list[CallResult]]:
    """Ask once; on a response with no verdict line, ask once more with a reminder.

    `use_cache=False` asks afresh: a rerun after an unparseable response must not be served
    the same cached response again."""
    messages = judge_messages(spec, item)
    base: Record = {
        "task_id": item.task.id,
        "model_a": item.model_a,
        "model_b": item.model_b,
        "order": item.order,
        "judge": item.judge,
        "frame_hash": fhash,
        "answer_a_sha": answer_sha(item.answer_a),
        "answer_b_sha": answer_sha(item.answer_b),
        "message_sha": _sha(messages[1]["content"]),
    }
    first = await client.complete(item.judge, messages, settings, use_cache)
    calls = [first]
    final = first
    if first.ok and first.finish_reason != "length" and not parse_verdict(first.text).ok:
        retry_messages = [
            *messages,
            {"role": "assistant", "content": first.text or ""},
            {"role": "user", "content": RETRY_REMINDER},
        ]
        final = await client.complete(item.judge, retry_messages, settings, use_cache)
        calls.append(final)
    cost: float | None = 0.0
    for call in calls:
        cost = _add(cost, 0.0 if call.cached or not call.ok else call.cost_usd)
    record: Record = {
        **base,
        "cost_usd": cost,
        "tokens_in": sum(c.tokens_in or 0 for c in calls),
        "tokens_out": sum(c.tokens_out or 0 for c in calls),
        "latency_s": round(sum(c.latency_s or 0.0 for c in calls), 4),
        "finish_reason": final.finish_reason,
        "retried": len(calls) > 1,
        "created_at": now_iso(),
    }
    if len(calls) > 1:
        record["first_raw"] = first.text
    parsed = parse_verdict(final.text) if final.ok else None
    if not final.ok:
        record |= {
            "kind": "failure",
            "reason": "call_failed",
            "detail": f"the call failed after {final.attempts} attempt(s): {final.error}",
            "raw": final.text,
        }
    elif final.finish_reason == "length":
        record |= {
            "kind": "failure",
            "reason": "token_cap",
            "detail": (
                f"the judge hit the output cap of {settings.max_tokens} tokens (--max-tokens "
                f"{settings.max_tokens}) before finishing; raise --max-tokens and rerun"
            ),
            "raw": final.text,
        }
    elif parsed is None or parsed.position is None:
        record |= {
            "kind": "failure",
            "reason": "no_verdict_line",
            "detail": "no line VERDICT: 1, VERDICT: 2 or VERDICT: TIE, even after a reminder",
            "raw": final.text,
        }
    else:
        rationale = parse_verdict(first.text).rationale if len(calls) > 1 else parsed.rationale
        record |= {
            "kind": "verdict",
            "position_winner": parsed.position,
            "winner": _winner(item, parsed.position),
            "rationale": rationale,
            "raw": final.text,
        }
    return record, calls


def _tally_consistency(tally: JudgeTally, records: list[Record]) -> None:
    combined = combine_verdicts(records)
    flips: Counter[tuple[str, str]] = Counter()
    complete: Counter[tuple[str, str]] = Counter()
    for verdict in combined:
        if not verdict.complete:
            tally.incomplete_pairs += 1
            continue
        complete[verdict.pair] += 1
        if verdict.flipped:
            flips[verdict.pair] += 1
    tally.complete_pairs = sum(complete.values())
    tally.flipped_pairs = sum(flips.values())
    ranked = sorted(flips.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    tally.most_flipped = [(a, b, n, complete[(a, b)]) for (a, b), n in ranked]


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


async def judge_run(
    spec: RunSpec,
    judges: tuple[str, ...] | list[str],
    client: ModelClient | None,
    concurrency: int = 8,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    on_progress: ProgressCallback | None = None,
    api_base: str | None = None,
) -> JudgeSummary:
    """Judge every pair with answers, in both orders, by each judge; skip what is recorded.

    Refuses before any call: no judge, a judge sharing a provider family with any model of the
    run, or verdicts of a judge made under another prompt. `api_base` defaults to the run's."""
    judges = tuple(dict.fromkeys(judges or spec.judges))
    log = EvidenceLog(spec.run_dir)
    system_prompt = compose_system_prompt(spec.suite)
    fhash = frame_hash(system_prompt)
    summary = JudgeSummary(spec.name, fhash, notes=preflight(spec, judges))
    items, summary.skipped_pairs = _items(spec, log, judges)
    todo: list[JudgeItem] = []
    unparseable: set[tuple[str, str, str, str, str]] = set()
    for judge in judges:
        tally = summary.tallies[judge] = JudgeTally(judge)
        done = _done_keys(spec, log, judge, fhash, items)
        tally.already_recorded = len(done)
        todo += [i for i in items if i.judge == judge and i.key not in done]
        unparseable |= {
            (r["task_id"], r["model_a"], r["model_b"], r["order"], judge)
            for r in load_verdicts(log, judge, fhash)
            if r.get("reason") == "no_verdict_line"
        }
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

    async def judge_one(item: JudgeItem) -> None:
        nonlocal finished
        async with gate:
            record, calls = await _judge_one(
                spec, item, client, settings, fhash, use_cache=item.key not in unparseable
            )
        log.append("verdicts", record)
        tally = summary.tallies[item.judge]
        if record["cost_usd"] is None:
            tally.unknown_price = True
        else:
            tally.cost_usd += record["cost_usd"]
        if record["kind"] == "failure":
            tally.failed += 1
            tally.failures.append(
                f"{item.task.id} / {item.model_a} vs {item.model_b} ({item.order}): "
                f"{record['reason']}: {record['detail']}"
            )
        elif all(c.cached for c in calls):
            tally.cached += 1
        else:
            tally.judged += 1
        finished += 1
        if on_progress:
            on_progress(finished, total)

    await asyncio.gather(*(judge_one(item) for item in todo))
    for judge in judges:
        done = _done_keys(spec, log, judge, fhash, items)
        current: list[Record] = [
            r
            for r in load_verdicts(log, judge, fhash)
            if (r["task_id"], r["model_a"], r["model_b"], r["order"], judge) in done
        ]
        _tally_consistency(summary.tallies[judge], current)
    return summary


def summary_lines(summary: JudgeSummary) -> list[str]:
    """The closing summary, one block per judge, as a person reads it."""
    lines: list[str] = []
    for tally in summary.tallies.values():
        cost = f"${tally.cost_usd:.4f}"
        if tally.unknown_price:
            cost += " + unknown (no price known for this judge)"
        rate = (
            f"{tally.flip_rate:.1%} ({tally.flipped_pairs} of {tally.complete_pairs} pairs)"
            if tally.flip_rate is not None
            else "n/a (no pair judged in both orders)"
        )
        lines.append(
            f"judge {tally.judge}: judged {tally.judged}, cached {tally.cached}, already "
            f"recorded {tally.already_recorded}, failed {tally.failed}; cost {cost}; "
            f"order-flip rate {rate}"
        )
        if tally.incomplete_pairs:
            lines.append(f"  incomplete pairs (one order only): {tally.incomplete_pairs}")
        if tally.most_flipped:
            flips = "; ".join(
                f"{a} vs {b}: {n} of {m}" for a, b, n, m in tally.most_flipped
            )
            lines.append(f"  most flips: {flips}")
    return lines

