"""The run stage: one answer per (task, model), appended to the evidence log as it arrives.

A conversation (a task with `turns`) is answered turn by turn, each model seeing its own earlier
answers; every turn is its own record, keyed by the exact messages sent, so a rerun resumes at
the first turn without a good answer and pays for no turn twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from konkord.configuration.suite import Suite, Task
from konkord.configuration.turns import unit_id
from konkord.errors import KonkordError, NotLaunched
from konkord.evidence.log import AsyncAppender, EvidenceLog, Record, now_iso
from konkord.evidence.stopping import one_writer
from konkord.providers.llm import CallResult, CallSettings, Message, ModelClient


def answer_messages(suite: Suite, task: Task) -> list[Message]:
    """What a model is sent for a task: the suite's context, the format hint, and the prompt."""
    system_parts = []
    if suite.context:
        system_parts.append(suite.context.strip())
    if suite.answer_language:
        system_parts.append(
            f"Give your solution in a single fenced ```{suite.answer_language} code block."
        )
    messages: list[Message] = []
    if system_parts:
        messages.append({"role": "system", "content": "\n\n".join(system_parts)})
    messages.append({"role": "user", "content": task.prompt})
    return messages


def conversation_messages(
    suite: Suite, task: Task, turn: int, earlier: list[str]
) -> list[Message]:
    """What a model is sent for turn `turn` (1-based): the first turn's messages, then each
    earlier answer (the model's own) and the next user message."""
    messages = answer_messages(suite, task)
    users = task.conversation()[1:turn]
    for answer, user in zip(earlier[: turn - 1], users, strict=True):
        messages += [
            {"role": "assistant", "content": answer},
            {"role": "user", "content": user.prompt},
        ]
    return messages


def answer_key_hash(messages: list[Message], settings: CallSettings) -> str:
    """The hash that makes an answer current: the exact messages and the sampling settings.

    The server address (api_base) is left out: it says where a model is reached, not what it is
    asked, so pointing a run at another proxy does not orphan its answers.
    """
    blob = json.dumps({"messages": messages, "settings": settings.generation()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def current_answers(
    log: EvidenceLog, suite: Suite, settings: CallSettings
) -> dict[tuple[str, str], Record]:
    """The current answer record per (task, model), for the current prompt and settings; for
    a conversation, its first turn's under the task's id, and every turn's under its judged id
    (`konkord.configuration.turns.unit_id`: "poem-t2"), as `current_conversations` chains them.

    The latest good answer wins; a failure counts only when there is no good answer, so a
    regeneration (`--force`) that fails does not throw away an answer already paid for.
    """
    wanted = {
        task.id: answer_key_hash(answer_messages(suite, task), settings) for task in suite.tasks
    }
    good: dict[tuple[str, str], Record] = {}
    failed: dict[tuple[str, str], Record] = {}
    for record in log.records("answers"):
        task_id = record.get("task_id")
        if not isinstance(task_id, str) or wanted.get(task_id) != record.get("settings_hash"):
            continue
        key = (task_id, str(record.get("model")))
        if record.get("error") is None and record.get("text") is not None:
            good[key] = record
        else:
            failed[key] = record
    turns: dict[tuple[str, str], Record] = {}
    multi = {task.id for task in suite.tasks if task.multi_turn}
    if multi:
        conversations = current_conversations(log, suite, settings)
        for (task_id, model), chain in conversations.items():
            if task_id in multi:
                for turn, record in enumerate(chain, start=1):
                    turns[(unit_id(task_id, turn), model)] = record
    return {**failed, **good, **turns}


def current_conversations(
    log: EvidenceLog, suite: Suite, settings: CallSettings
) -> dict[tuple[str, str], list[Record]]:
    """The current turn records per (task, model), in turn order, for the current prompts and
    settings: each turn's record must answer the messages built from the earlier turns' current
    answers. The list stops at the first turn not answered well (a failure is its last item)."""
    index: dict[tuple[str, str, str], Record] = {}
    models: dict[str, set[str]] = {}
    for record in log.records("answers"):
        key = (str(record.get("task_id")), str(record.get("model")), str(record.get("settings_hash")))
        models.setdefault(key[0], set()).add(key[1])
        if _good(record) or not _good(index.get(key)):
            index[key] = record
    out: dict[tuple[str, str], list[Record]] = {}
    for task in suite.tasks:
        # the first turn's messages are every model's: hashed once (20,000 times over at 20
        # models x 1,000 tasks otherwise, when `konkord build` asks what answers are missing)
        first = answer_key_hash(conversation_messages(suite, task, 1, []), settings)
        for model in sorted(models.get(task.id, ())):
            chain: list[Record] = []
            earlier: list[str] = []
            for turn in range(1, len(task.conversation()) + 1):
                if turn == 1:
                    asked = first
                else:
                    asked = answer_key_hash(
                        conversation_messages(suite, task, turn, earlier), settings
                    )
                found = index.get((task.id, model, asked))
                if found is None:
                    break
                chain.append(found)
                if not _good(found):
                    break
                earlier.append(str(found["text"]))
            if chain:
                out[(task.id, model)] = chain
    return out


def _good(record: Record | None) -> bool:
    return record is not None and record.get("error") is None and record.get("text") is not None


def answers_to_make(
    log: EvidenceLog,
    suite: Suite,
    models: tuple[str, ...],
    settings: CallSettings,
    force: bool = False,
) -> list[tuple[Task, str]]:
    """The (task, model) pairs without a good current answer to every turn (all with force)."""
    existing = {} if force else current_conversations(log, suite, settings)
    todo: list[tuple[Task, str]] = []
    for task in suite.tasks:
        for model in models:
            chain = existing.get((task.id, model), [])
            if len(chain) < len(task.conversation()) or not _good(chain[-1]):
                todo.append((task, model))
    return todo


@dataclass
class RunSummary:
    """What a run stage did, for the closing summary line."""

    generated: int = 0
    cached: int = 0
    failed: int = 0
    already_recorded: int = 0
    cost_usd: float = 0.0
    unknown_price_models: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)


def answer_record(
    task: Task,
    model: str,
    messages: list[Message],
    settings: CallSettings,
    result: CallResult,
    turn: int = 1,
) -> Record:
    """The evidence record for one answer (or one failure to answer); a conversation's records
    say which turn they answer."""
    return {
        "kind": "answer",
        "task_id": task.id,
        **({"turn": turn} if task.multi_turn else {}),
        "model": model,
        "settings_hash": answer_key_hash(messages, settings),
        "settings": settings.generation(),
        **result.to_record(),
        "created_at": now_iso(),
    }


@one_writer("run", lambda log, *args, **kwargs: log.run_dir)
async def generate_answers(
    log: EvidenceLog,
    suite: Suite,
    models: tuple[str, ...],
    settings: CallSettings,
    client: ModelClient,
    force: bool = False,
    on_done: Callable[[], None] | None = None,
    on_total: Callable[[int], None] | None = None,
) -> RunSummary:
    """Answer every (task, model) that has no good answer yet; each answer is saved on arrival.

    A record is fsynced before it counts as done, so a killed run loses at most the calls in
    flight; their responses are in the cache, so the rerun does not pay for them again.
    """
    summary = RunSummary()
    todo = answers_to_make(log, suite, models, settings, force)
    summary.already_recorded = len(suite.tasks) * len(models) - len(todo)
    if on_total:
        on_total(len(todo))
    appender = AsyncAppender(log, "answers")
    existing = {} if force else current_conversations(log, suite, settings)

    async def answer_turn(task: Task, model: str, turn: int, earlier: list[str]) -> str | None:
        """Ask one turn and record it; its text, or None when it failed."""
        messages = conversation_messages(suite, task, turn, earlier)
        result = await client.complete(model, messages, settings, use_cache=not force)
        try:
            await appender.append(answer_record(task, model, messages, settings, result, turn))
        except OSError as exc:
            raise KonkordError(
                f"{log.path('answers')}: cannot write ({exc.strerror or exc}); the answers "
                "saved so far are kept: fix this and run the same command again"
            ) from None
        label = f"{task.id} / {model}" + (f" (turn {turn})" if task.multi_turn else "")
        if not result.ok:
            summary.failed += 1
            summary.failures.append(f"{label}: {result.error}")
            summary.cost_usd += result.cost_usd or 0.0  # an empty reply is billed all the same
            return None
        if result.cached:
            summary.cached += 1
        else:
            summary.generated += 1
            if result.cost_usd is None:
                summary.unknown_price_models.add(model)
            else:
                summary.cost_usd += result.cost_usd
        return result.text or ""

    async def answer_one(task: Task, model: str) -> None:
        done = [r for r in existing.get((task.id, model), []) if _good(r)]
        earlier = [str(record["text"]) for record in done]
        for turn in range(len(done) + 1, len(task.conversation()) + 1):
            try:
                text = await answer_turn(task, model, turn, earlier)
            except NotLaunched:
                return  # --max-cost or Ctrl-C: not sent; a rerun asks it
            if text is None:
                break  # later turns are not asked on a failed context; a rerun retries it
            earlier.append(text)
        if on_done:
            on_done()

    await asyncio.gather(*(answer_one(task, model) for task, model in todo))
    return summary


def truncated_answers(log: EvidenceLog, suite: Suite, settings: CallSettings) -> list[str]:
    """"task / model" of every current answer cut off at the output token cap: kept as an
    answer (it may still be the better one), but counted and marked so no one misses it."""
    return [
        f"{task_id} / {model}"
        for (task_id, model), record in current_answers(log, suite, settings).items()
        if record.get("error") is None and record.get("finish_reason") == "length"
    ]
