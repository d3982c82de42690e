"""Turn MT-Bench votes and conversations into Konkord evidence records.

GPT-4 pair votes become two order records each (which `konkord.evidence.verdicts.combine_verdicts`
combines back to the published verdict), expert votes become labels, and conversations become
answer records keyed exactly as `konkord run` keys them.
"""

from __future__ import annotations

from collections.abc import Iterable

from konkord.configuration.suite import Suite
from konkord.evidence.log import Record
from konkord.importers.mtbench_read import JUDGE, Dataset, Vote
from konkord.providers.llm import CallSettings
from konkord.stages.run import answer_key_hash, answer_messages

FRAME_HASH = "mt-bench-gpt4-pair"
SOURCE = "lmsys/mt_bench_human_judgments (Zheng et al. 2023, CC BY 4.0)"


def task_prompt(question_id: int, turn: int, data: Dataset, models: Iterable[str]) -> str:
    for model in models:
        conversation = data.conversations.get((question_id, model))
        if conversation is None:
            continue
        users = [content for role, content in conversation if role == "user"]
        if turn == 1 and users:
            return users[0]
        if turn == 2 and len(users) >= 2:
            return (
                "This is the second turn of a conversation. The user first wrote:\n\n"
                f"{users[0]}\n\nand, after the assistant's reply, wrote:\n\n{users[1]}\n\n"
                "Each answer shows that assistant's own first reply for context; judge the "
                "reply to the second message."
            )
    return (
        f"MT-Bench question {question_id}, turn {turn}. (The question text is not in the "
        "labels-only file; import the Hugging Face rows with conversations to judge it anew.)"
    )


def _answer_text(conversation: list[tuple[str, str]], turn: int) -> str | None:
    replies = [content for role, content in conversation if role == "assistant"]
    if turn == 1 and replies:
        return replies[0]
    if turn == 2 and len(replies) >= 2:
        return f"First reply (context):\n\n{replies[0]}\n\nReply to the second message:\n\n{replies[1]}"
    return None


def order_records(
    vote: Vote, shas: dict[tuple[str, str], str], created: str, first_shown_won: bool = True
) -> list[Record]:
    """The two order records whose combination is the published combined verdict.

    A "tie (inconsistent)" vote means the two orders disagreed, but which way each went was not
    published. It is written as the same position winning in both orders (the first shown, or
    with `first_shown_won` False the second; the importer alternates so that the positional
    split is not invented), marked `reconstructed`, and combines back to a flipped tie."""
    if vote.winner == "tie (inconsistent)":
        same = "1" if first_shown_won else "2"
        positions = {"ab": same, "ba": same}
    elif vote.winner == "tie":
        positions = {"ab": "tie", "ba": "tie"}
    elif vote.winner == "model_a":
        positions = {"ab": "1", "ba": "2"}
    else:
        positions = {"ab": "2", "ba": "1"}
    records = []
    for order, position in positions.items():
        first, second = (
            (vote.model_a, vote.model_b) if order == "ab" else (vote.model_b, vote.model_a)
        )
        winner = {"1": first, "2": second, "tie": "tie"}[position]
        records.append(
            {
                "kind": "verdict",
                "task_id": vote.task_id,
                "model_a": vote.model_a,
                "model_b": vote.model_b,
                "order": order,
                "judge": JUDGE,
                "frame_hash": FRAME_HASH,
                "position_winner": position,
                "winner": winner,
                "rationale": (
                    f'Imported GPT-4 pair verdict "{vote.winner}" from {SOURCE}; '
                    "the judge's own text was not published."
                    + (
                        " The two orders disagreed; which way each went was not published, "
                        "so this order's verdict is a placeholder."
                        if vote.winner == "tie (inconsistent)"
                        else ""
                    )
                ),
                "raw": vote.winner,
                "reconstructed": vote.winner == "tie (inconsistent)",
                "answer_a_sha": shas.get((vote.task_id, vote.model_a)),
                "answer_b_sha": shas.get((vote.task_id, vote.model_b)),
                "message_sha": None,
                "retried": False,
                "first_raw": None,
                "finish_reason": None,
                "cost_usd": None,
                "tokens_in": None,
                "tokens_out": None,
                "latency_s": None,
                "source": "import",
                "created_at": created,
            }
        )
    return records


def label_records(votes: list[Vote], created: str) -> list[Record]:
    """One label per vote; a person's repeated vote on an item gets `#2`, `#3`... so none is lost."""
    seen: dict[tuple[str, str, str, str], int] = {}
    records = []
    for vote in votes:
        key = (vote.task_id, vote.model_a, vote.model_b, vote.judge)
        seen[key] = seen.get(key, 0) + 1
        labeller = vote.judge if seen[key] == 1 else f"{vote.judge}#{seen[key]}"
        records.append(
            {
                "kind": "label",
                "task_id": vote.task_id,
                "model_a": vote.model_a,
                "model_b": vote.model_b,
                "labeller": labeller,
                "winner": vote.winner_model,
                "shown_first": None,
                "source": "import",
                "created_at": created,
            }
        )
    return records


def answer_records(
    suite: Suite,
    data: Dataset,
    models: tuple[str, ...],
    settings: CallSettings,
    created: str,
) -> list[Record]:
    """Answer records keyed exactly as `konkord run` keys them, so the run's stages find them."""
    records = []
    for task in suite.tasks:
        question, turn = (int(part[1:]) for part in task.id.split("-"))
        for model in models:
            conversation = data.conversations.get((question, model))
            text = None if conversation is None else _answer_text(conversation, turn)
            if text is None:
                continue
            records.append(
                {
                    "kind": "answer",
                    "task_id": task.id,
                    "model": model,
                    "settings_hash": answer_key_hash(answer_messages(suite, task), settings),
                    "settings": settings.generation(),
                    "text": text,
                    "finish_reason": None,
                    "tokens_in": None,
                    "tokens_out": None,
                    "cost_usd": None,
                    "latency_s": None,
                    "error": None,
                    "error_kind": None,
                    "attempts": 0,
                    "source": "import",
                    "created_at": created,
                }
            )
    return records
