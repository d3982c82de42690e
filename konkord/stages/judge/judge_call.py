"""One judge call: the item to judge, the messages sent, and the record its reply becomes.

Split from judge.py so that what one verdict is (and why it fails) reads in one place, apart
from the planning and bookkeeping of a whole judge stage.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from konkord.configuration.judge_frame import (
    RETRY_REMINDER,
    ParsedVerdict,
    compose_system_prompt,
    compose_user_message,
    framed_message,
    nonce_first,
    nonce_of,
    parse_verdict,
    task_head,
)
from konkord.configuration.runspec import RunSpec
from konkord.configuration.suite import Task
from konkord.errors import NotLaunched
from konkord.evidence.log import Record, now_iso
from konkord.evidence.verdicts import answer_sha
from konkord.providers.llm import CallResult, CallSettings, Message, ModelClient


class JudgeItem(NamedTuple):
    """One judge call to make: a task, a pair (model_a < model_b), an order, a judge.

    A named tuple: made 380,000 times by every check of a 20 x 1,000 run (`konkord build`
    asks what each judge still owes), in a quarter of a frozen dataclass's time, and as small.
    """

    task: Task
    model_a: str
    model_b: str
    order: str  # "ab": model_a shown as Answer 1; "ba": model_b shown as Answer 1
    judge: str
    answer_a: str
    answer_b: str
    # a conversation's earlier turns: (user message, model_a's reply, model_b's reply)
    earlier: tuple[tuple[str, str, str], ...] = ()

    @property
    def shown_earlier(self) -> tuple[tuple[str, str, str], ...]:
        """The earlier turns with the replies in the shown order (Answer 1's first)."""
        if self.order == "ab":
            return self.earlier
        return tuple((user, b, a) for user, a, b in self.earlier)

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


def message_sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def judge_settings(max_tokens: int, api_base: str | None) -> CallSettings:
    """Judge calls are deterministic where the provider allows: temperature 0, seed 0."""
    return CallSettings(temperature=0.0, max_tokens=max_tokens, seed=0, api_base=api_base)


def judge_messages(spec: RunSpec, item: JudgeItem) -> list[Message]:
    """The two messages of one judge call."""
    return [
        {"role": "system", "content": compose_system_prompt(spec.suite)},
        {"role": "user", "content": user_message(spec, item)},
    ]


def user_message(spec: RunSpec, item: JudgeItem) -> str:
    """The user message of one judge call: the task and the two answers in the shown order."""
    answer_1, answer_2 = item.shown
    return compose_user_message(item.task, spec.suite, answer_1, answer_2, item.shown_earlier)


class MessageShas:
    """`message_sha(user_message(spec, item))` of many judge calls of one run: each task's head
    made once, each answer encoded once for its comparisons' nonces (20 times at 20 models, not
    380 in both orders), the message filled in one formatted string. `konkord build` checks
    every verdict of a 20 x 1,000 run against its message: 380,000 of them."""

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self._heads: dict[str, str] = {}
        self._first: dict[str, bytes] = {}
        self._second: dict[str, bytes] = {}

    def of(self, item: JudgeItem) -> str:
        """The hash of `item`'s user message."""
        # unpacked at once: a field read by name costs a call each, 380,000 times over
        task, _model_a, _model_b, order, _judge, answer_a, answer_b, earlier = item
        if earlier:  # a conversation's later turn: composed whole
            return message_sha(user_message(self.spec, item))
        answer_1, answer_2 = (answer_a, answer_b) if order == "ab" else (answer_b, answer_a)
        head = self._heads.get(task.id)
        if head is None:
            head = self._heads[task.id] = task_head(
                self.spec.suite.context, task.prompt, task.reference
            )
        first = self._first.get(answer_1)
        if first is None:
            first = self._first[answer_1] = nonce_first(answer_1)
        second = self._second.get(answer_2)
        if second is None:
            second = self._second[answer_2] = answer_2.encode()
        nonce = nonce_of(first, second)
        return message_sha(framed_message(head, nonce, answer_1, answer_2))


def _winner(item: JudgeItem, position: str) -> str:
    if position == "tie":
        return "tie"
    shown_first = item.model_a if item.order == "ab" else item.model_b
    shown_second = item.model_b if item.order == "ab" else item.model_a
    return shown_first if position == "1" else shown_second


def _paid(call: CallResult) -> float | None:
    """What one call cost the run: a cached or failed call nothing, except an empty reply
    (the provider billed it)."""
    unpaid = call.cached or (not call.ok and call.cost_usd is None)
    return 0.0 if unpaid else call.cost_usd


def reminder_not_sent(
    item: JudgeItem, fhash: str, sent_sha: str, first: CallResult, why: NotLaunched
) -> Record:
    """The record of a reply with no verdict line whose reminder was not launched."""
    return {
        **_base(item, fhash, sent_sha),
        "kind": "failure",
        "reason": "no_verdict_line",
        "detail": f"no verdict line, and the reminder was not sent ({why}); rerun to send it",
        "raw": first.text,
        "reminder_sent": False,
        "cost_usd": _paid(first),
        "tokens_in": first.tokens_in or 0,
        "tokens_out": first.tokens_out or 0,
        "latency_s": first.latency_s or 0.0,
        "finish_reason": first.finish_reason,
        "retried": False,
        "created_at": now_iso(),
        **first.route(),
    }


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


async def ask_judge(
    spec: RunSpec,
    item: JudgeItem,
    client: ModelClient,
    settings: CallSettings,
    fhash: str,
    use_cache: bool = True,
) -> tuple[Record, list[CallResult]]:
    """Ask once; on a response with no verdict line, ask once more with a reminder.

    `use_cache=False` asks afresh: a rerun after a failed reply (no verdict, two verdicts, cut
    off) must not be served the same cached reply again."""
    messages = judge_messages(spec, item)
    sent_sha = message_sha(messages[1]["content"])
    # Neither the prompt nor the record is kept while waiting (a retry builds the prompt again):
    # 100,000 calls waiting for a batch would otherwise hold every one in memory.
    asking = client.complete(item.judge, messages, settings, use_cache)
    del messages
    first = await asking
    parsed = parse_first(first)
    if wants_reminder(first, parsed):
        try:
            final = await client.complete(
                item.judge, reminder_messages(spec, item, first), settings, use_cache
            )
        except NotLaunched as exc:
            # The first reply was paid for: it is recorded (as the failure it is) before the
            # stage stops, so the evidence counts its cost and a rerun sends only the reminder.
            return reminder_not_sent(item, fhash, sent_sha, first, exc), [first]
        return judge_record(item, settings, fhash, sent_sha, [first, final], parsed), [
            first,
            final,
        ]
    return judge_record(item, settings, fhash, sent_sha, [first], parsed), [first]


def parse_first(first: CallResult) -> ParsedVerdict | None:
    """The first reply read as a verdict (None for a failed call)."""
    return parse_verdict(first.text) if first.ok else None


def wants_reminder(first: CallResult, parsed: ParsedVerdict | None) -> bool:
    """Whether a first reply gets a second call with the reminder: it has no verdict line and
    was not cut off."""
    return (
        parsed is not None
        and first.finish_reason != "length"
        and parsed.reason == "no_verdict_line"
    )


def reminder_messages(spec: RunSpec, item: JudgeItem, first: CallResult) -> list[Message]:
    """The second call: the first exchange, then the reminder to end with a verdict line."""
    return [
        *judge_messages(spec, item),
        {"role": "assistant", "content": first.text or ""},
        {"role": "user", "content": RETRY_REMINDER},
    ]


def _base(item: JudgeItem, fhash: str, sent_sha: str) -> Record:
    return {
        "task_id": item.task.id,
        "model_a": item.model_a,
        "model_b": item.model_b,
        "order": item.order,
        "judge": item.judge,
        "frame_hash": fhash,
        "answer_a_sha": answer_sha(item.answer_a),
        "answer_b_sha": answer_sha(item.answer_b),
        "message_sha": sent_sha,
    }


def judge_record(
    item: JudgeItem,
    settings: CallSettings,
    fhash: str,
    sent_sha: str,
    calls: list[CallResult],
    first_parsed: ParsedVerdict | None,
) -> Record:
    """The verdict or failure record of one judge call: its first reply and, when a reminder
    was sent, the second (`calls`); `first_parsed` is the first reply read as a verdict."""
    base = _base(item, fhash, sent_sha)
    first, final = calls[0], calls[-1]
    cost: float | None = 0.0
    for call in calls:
        cost = _add(cost, _paid(call))
    record: Record = {
        **base,
        "cost_usd": cost,
        "tokens_in": sum(c.tokens_in or 0 for c in calls),
        "tokens_out": sum(c.tokens_out or 0 for c in calls),
        "latency_s": round(sum(c.latency_s or 0.0 for c in calls), 4),
        "finish_reason": final.finish_reason,
        "retried": len(calls) > 1,
        "created_at": now_iso(),
        **final.route(),
    }
    if len(calls) > 1:
        record["first_raw"] = first.text
    if not final.ok:
        parsed = None
    elif final is first:
        parsed = first_parsed  # read once above
    else:
        parsed = parse_verdict(final.text)
    if not final.ok and final.error_kind == "empty":
        record |= {
            "kind": "failure",
            "reason": "empty_reply",
            "detail": final.error,
            "raw": final.text,
        }
    elif not final.ok and final.error_kind == "filtered":
        record |= {
            "kind": "failure",
            "reason": "content_filter",
            "detail": final.error,
            "raw": final.raw,
        }
    elif not final.ok:
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
        no_line = "no line VERDICT: 1, VERDICT: 2 or VERDICT: TIE, even after a reminder"
        ambiguous = parsed.detail if parsed is not None and parsed.reason == "ambiguous" else None
        record |= {
            "kind": "failure",
            "reason": "ambiguous" if ambiguous else "no_verdict_line",
            "detail": ambiguous or no_line,
            "raw": final.text,
        }
    else:
        rationale = first_parsed.rationale if first_parsed is not None else parsed.rationale
        record |= {
            "kind": "verdict",
            "position_winner": parsed.position,
            "winner": _winner(item, parsed.position),
            "rationale": rationale,
            "raw": final.text,
        }
    return record
