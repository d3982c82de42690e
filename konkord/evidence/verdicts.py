"""Reading verdicts back: the current records per judge, and the two orders of a pair combined.

A pair is decided only when both orders were judged on the same answers and agree; any
disagreement (a win against a tie included) is a tie marked `flipped`, because a verdict that
follows the position rather than the content says nothing about the models. A pair with one
order only is incomplete, never silently a tie.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from konkord.evidence.log import EvidenceLog, Record

ORDERS = ("ab", "ba")


def answer_sha(text: str) -> str:
    """The hash of an answer's text stored with each verdict, so a changed answer is noticed."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def answer_shas(answers: Mapping[tuple[str, str], Record]) -> dict[tuple[str, str], str]:
    """(task_id, model) -> answer_sha for answer records with text, e.g. from
    `konkord.stages.run.current_answers`; pass it to `load_verdicts` to drop stale verdicts."""
    return {
        key: answer_sha(str(record["text"]))
        for key, record in answers.items()
        if record.get("error") is None and record.get("text") is not None
    }


@dataclass(frozen=True)
class CombinedVerdict:
    """One judge's verdict on one pair of one task, both orders taken together."""

    task_id: str
    model_a: str
    model_b: str
    judge: str
    winner: str | None  # model_a, model_b, "tie", or None while incomplete
    flipped: bool
    complete: bool
    orders: dict[str, Record] = field(default_factory=dict)

    @property
    def pair(self) -> tuple[str, str]:
        """The model pair, model_a < model_b."""
        return (self.model_a, self.model_b)


def judges_in_log(log: EvidenceLog) -> list[str]:
    """Every judge with at least one verdict or failure record in the run, sorted."""
    return sorted({str(r["judge"]) for r in log.records("verdicts") if r.get("judge")})


def current_frame_hash(log: EvidenceLog, judge: str) -> str | None:
    """The frame hash of the judge's most recent verdict record, or None if it has none."""
    latest: str | None = None
    for record in log.records("verdicts"):
        if record.get("judge") == judge:
            latest = record.get("frame_hash")
    return latest


def frame_hashes_of(log: EvidenceLog, judge: str) -> set[str]:
    """Every frame hash the judge's records were made under (more than one means drift)."""
    return {
        str(r.get("frame_hash")) for r in log.records("verdicts") if r.get("judge") == judge
    }


def is_fresh(record: Record, answer_shas: Mapping[tuple[str, str], str]) -> bool:
    """Whether a verdict was made on the answers the run holds now."""
    task = str(record.get("task_id"))
    sha_a = answer_shas.get((task, str(record.get("model_a"))))
    sha_b = answer_shas.get((task, str(record.get("model_b"))))
    return sha_a == record.get("answer_a_sha") and sha_b == record.get("answer_b_sha")


def load_verdicts(
    log: EvidenceLog,
    judge: str,
    frame_hash: str | None = None,
    answer_shas: Mapping[tuple[str, str], str] | None = None,
) -> list[Record]:
    """The latest verdict or failure record per (task, pair, order) for one judge.

    Only records under `frame_hash` count (default: the hash of the judge's latest record).
    With `answer_shas` ((task_id, model) -> answer_sha of the current answer), records made
    on answers that have since changed are left out as stale."""
    wanted = frame_hash or current_frame_hash(log, judge)
    if wanted is None:
        return []
    latest = log.latest(
        "verdicts", lambda r: r.get("judge") == judge and r.get("frame_hash") == wanted
    )
    records = list(latest.values())
    if answer_shas is not None:
        records = [r for r in records if is_fresh(r, answer_shas)]
    return records


def combine_verdicts(records: Iterable[Record]) -> list[CombinedVerdict]:
    """Combine the two orders of every (task, pair, judge) into one verdict, sorted by key."""
    groups: dict[tuple[str, str, str, str], dict[str, Record]] = {}
    for record in records:
        key = (record["task_id"], record["model_a"], record["model_b"], record["judge"])
        groups.setdefault(key, {})[record["order"]] = record
    out: list[CombinedVerdict] = []
    for (task_id, model_a, model_b, judge), orders in sorted(groups.items()):
        ab, ba = orders.get("ab"), orders.get("ba")
        complete = (
            ab is not None
            and ba is not None
            and ab.get("kind") == "verdict"
            and ba.get("kind") == "verdict"
            and ab.get("answer_a_sha") == ba.get("answer_a_sha")
            and ab.get("answer_b_sha") == ba.get("answer_b_sha")
        )
        winner: str | None = None
        flipped = False
        if complete and ab is not None and ba is not None:
            if ab["winner"] == ba["winner"]:
                winner = str(ab["winner"])
            else:
                winner, flipped = "tie", True
        out.append(
            CombinedVerdict(task_id, model_a, model_b, judge, winner, flipped, complete, orders)
        )
    return out


def flip_rate(combined: Iterable[CombinedVerdict]) -> float | None:
    """The share of complete pairs whose two orders disagreed, or None with no complete pair."""
    done = [c for c in combined if c.complete]
    if not done:
        return None
    return sum(c.flipped for c in done) / len(done)
