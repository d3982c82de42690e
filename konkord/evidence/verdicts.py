"""Reading verdicts back: the current records per judge, and the two orders of a pair combined.

A pair is decided only when both orders were judged on the same answers and agree; any
disagreement (a win against a tie included) is a tie marked `flipped`, because a verdict that
follows the position rather than the content says nothing about the models. A pair with one
order only is incomplete, never silently a tie.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from konkord.evidence.changed_lists import MadeWhenRead
from konkord.evidence.combined_columns import (
    CombinedColumns,
    CombinedList,
    distinct,
    key_runs,
)
from konkord.evidence.log import EvidenceLog, Record
from konkord.evidence.verdict_latest import latest_verdict_rows, rows_of_judge
from konkord.evidence.verdict_rows import ABSENT, NULL

if TYPE_CHECKING:
    from konkord.evidence.verdict_table import VerdictTable

# A verdict record as read: a dict, or a row of the log's columns that reads like one.
VerdictRecord = Mapping[str, Any]

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


@dataclass(frozen=True, slots=True)
class CombinedVerdict:
    """One judge's verdict on one pair of one task, both orders taken together."""

    task_id: str
    model_a: str
    model_b: str
    judge: str
    winner: str | None  # model_a, model_b, "tie", or None while incomplete
    flipped: bool
    complete: bool
    orders: Mapping[str, VerdictRecord] = field(default_factory=dict)

    @property
    def pair(self) -> tuple[str, str]:
        """The model pair, model_a < model_b."""
        return (self.model_a, self.model_b)


def model_a_score(winner: str | None, model_a: str) -> float:
    """model_a's score in one combined verdict: 1, 0, or half for a tie (the figures' count)."""
    if winner == "tie":
        return 0.5
    return 1.0 if winner == model_a else 0.0


def judges_in_log(log: EvidenceLog) -> list[str]:
    """Every judge with at least one verdict or failure record in the run, sorted."""
    from konkord.evidence.verdict_table import verdict_table

    table = verdict_table(log)
    judges = (table.pool[code] for code in distinct(table.coded["judge"]).tolist())
    return sorted({str(judge) for judge in judges if isinstance(judge, str) and judge})


def current_frame_hash(log: EvidenceLog, judge: str) -> str | None:
    """The frame hash of the judge's most recent verdict record, or None if it has none."""
    from konkord.evidence.verdict_table import verdict_table

    table = verdict_table(log)
    rows = rows_of_judge(table, judge)
    if not len(rows):
        return None
    latest: str | None = table.get(int(rows[-1]), "frame_hash")
    return latest


def frame_hashes_of(log: EvidenceLog, judge: str) -> set[str]:
    """Every frame hash the judge's records were made under (more than one means drift)."""
    from konkord.evidence.verdict_table import verdict_table

    table = verdict_table(log)
    codes = distinct(table.coded["frame_hash"][rows_of_judge(table, judge)]).tolist()
    return {str(table.get_code(code)) for code in codes}


def is_fresh(record: VerdictRecord, answer_shas: Mapping[tuple[str, str], str]) -> bool:
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
) -> list[VerdictRecord]:
    """The latest verdict or failure record per (task, pair, order) for one judge.

    Only records under `frame_hash` count (default: the hash of the judge's latest record).
    With `answer_shas` ((task_id, model) -> answer_sha of the current answer), records made
    on answers that have since changed are left out as stale. Read from the log's columns
    (`konkord.evidence.verdict_table`): the records come back as read-only rows."""
    found = latest_verdict_rows(log, judge, frame_hash, answer_shas)
    return [] if found is None else found[0].rows(found[1])


def combine_verdicts(records: Iterable[VerdictRecord]) -> list[CombinedVerdict]:
    """Combine the two orders of every (task, pair, judge) into one verdict, sorted by key."""
    from konkord.evidence.verdict_table import rows_of_one_table

    # A list is taken as it is: a list of the log's rows remembers their places in its table,
    # so the columns answer without a look at each row.
    records = records if isinstance(records, list) else list(records)
    found = rows_of_one_table(records)
    if found is not None:
        return _combine_rows(found[0], found[1], records)
    groups: dict[tuple[str, str, str, str], dict[str, VerdictRecord]] = {}
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


def _combine_rows(
    table: VerdictTable, rows: np.ndarray, records: list[VerdictRecord]
) -> list[CombinedVerdict]:
    """`combine_verdicts` on the columns: the same verdicts, in the same order."""
    order = table.coded["order"][rows]
    ab_code, ba_code = table.code_of("ab"), table.code_of("ba")
    if not np.isin(order, [ab_code, ba_code]).all():  # an order of another name: the slow way
        return combine_verdicts([dict(r) for r in records])
    # Groups sorted by (task, model_a, model_b, judge) as text, as the dict path sorts them.
    names = ("task_id", "model_a", "model_b", "judge")
    key = np.zeros(len(rows), dtype=np.int64)
    for name in names:
        codes = table.coded[name][rows]
        present = distinct(codes)
        by_text = np.argsort([str(table.get_code(c)) for c in present.tolist()], kind="stable")
        rank = np.empty(len(present), dtype=np.int64)
        rank[by_text] = np.arange(len(present))
        key = key * len(present) + rank[np.searchsorted(present, codes)]
    order_of_keys, starts = key_runs(key)  # np.unique(key, return_index, return_inverse)
    first = order_of_keys[starts]
    group = np.empty(len(rows), dtype=np.int64)
    run_starts = np.zeros(len(rows), dtype=bool)
    run_starts[starts] = True
    group[order_of_keys] = np.cumsum(run_starts) - 1
    position = np.arange(len(rows))
    last = {}
    for code, name in ((ab_code, "ab"), (ba_code, "ba")):
        mine = order == code
        found = np.full(len(starts), -1, dtype=np.int64)
        np.maximum.at(found, group[mine], position[mine])  # a later record supersedes
        last[name] = found
    ab, ba = last["ab"], last["ba"]
    both = (ab >= 0) & (ba >= 0)
    ab_rows, ba_rows = rows[np.where(both, ab, 0)], rows[np.where(both, ba, 0)]

    def same(name: str) -> np.ndarray:
        codes_ab = table.coded[name][ab_rows].astype(np.int64)
        codes_ba = table.coded[name][ba_rows].astype(np.int64)
        codes_ab[codes_ab == ABSENT] = NULL
        codes_ba[codes_ba == ABSENT] = NULL
        return np.asarray(codes_ab == codes_ba)

    verdict = table.code_of("verdict")
    kind = table.coded["kind"]
    complete = (
        both
        & (kind[ab_rows] == verdict)
        & (kind[ba_rows] == verdict)
        & same("answer_a_sha")
        & same("answer_b_sha")
    )
    agree = same("winner")
    value = table.pool_values()  # a list, not a call each
    task_c, a_c, b_c, judge_c = (table.coded[name][rows[first]] for name in names)
    winner_c = table.coded["winner"][ab_rows]
    flipped = complete & ~agree
    # model_a's score as the figures count it (`winner` "tie" half, model_a whole), from the
    # codes: a value's code is the same wherever the log holds it.
    score = np.where(
        winner_c == table.code_of("tie"), 0.5, np.where(winner_c == a_c, 1.0, 0.0)
    )
    score = np.where(complete, np.where(flipped, 0.5, score), np.nan)
    text = {code: str(value[code]) for code in distinct(winner_c).tolist()}
    winners = [
        (text[w] if agreed else "tie") if done else None
        for done, agreed, w in zip(complete.tolist(), agree.tolist(), winner_c.tolist(), strict=True)
    ]
    winner_column = np.empty(len(winners), dtype=object)
    winner_column[:] = winners
    columns = CombinedColumns(
        value, task_c.astype(np.int64), a_c.astype(np.int64), b_c.astype(np.int64),
        complete, flipped, score, np.where(ab >= 0, rows[np.maximum(ab, 0)], -1),
        np.where(ba >= 0, rows[np.maximum(ba, 0)], -1), winner_column,
    )  # fmt: skip

    def made() -> list[CombinedVerdict]:
        # Each field's values taken from the pool at C speed, a pair at a time where needed.
        pick = value.__getitem__
        return _made(
            len(winners),
            map(pick, task_c.tolist()), map(pick, a_c.tolist()), map(pick, b_c.tolist()),
            map(pick, judge_c.tolist()), winners, flipped.tolist(), complete.tolist(),
            map(OrderPair, _records_at(records, ab), _records_at(records, ba)),
        )  # fmt: skip

    return CombinedList(made, columns, len(winners), table)


# Each field's slot of a CombinedVerdict, set as its generated __init__ sets it (the class is
# frozen, so through the slot rather than the instance), a field for every verdict at a time.
_SLOTS = [getattr(CombinedVerdict, f.name).__set__ for f in fields(CombinedVerdict)]


def _made(size: int, *columns: Iterable[Any]) -> list[CombinedVerdict]:
    """`size` combined verdicts, field by field: what CombinedVerdict(*values) makes for each
    row of `columns` (one iterable per field, in the class's order), at half its cost for
    190,000 pairs."""
    made = [object.__new__(CombinedVerdict) for _ in range(size)]
    for set_slot, values in zip(_SLOTS, columns, strict=True):
        deque(map(set_slot, made, values), maxlen=0)
    return made


def _records_at(records: list[VerdictRecord], at: np.ndarray) -> list[VerdictRecord | None]:
    """records[i] for each i of `at`, None where i is -1."""
    made = records.made() if isinstance(records, MadeWhenRead) else records
    if len(at) and (at >= 0).all():
        return list(map(list.__getitem__, repeat(made), at.tolist()))
    return [made[i] if i >= 0 else None for i in at.tolist()]


class OrderPair(Mapping[str, VerdictRecord]):
    """A pair's record per order ("ab", "ba"), as a read-only mapping with only the orders
    judged: what `CombinedVerdict.orders` holds, in a fifth of a dict's memory (190,000 pairs
    at 20 models x 1,000 tasks)."""

    __slots__ = ("ab", "ba")

    def __init__(self, ab: VerdictRecord | None, ba: VerdictRecord | None) -> None:
        self.ab = ab
        self.ba = ba

    def __getitem__(self, order: str) -> VerdictRecord:
        found = self.ab if order == "ab" else self.ba if order == "ba" else None
        if found is None:
            raise KeyError(order)
        return found

    def get(self, order: str, default: Any = None) -> Any:
        found = self.ab if order == "ab" else self.ba if order == "ba" else None
        return default if found is None else found

    def __iter__(self) -> Iterator[str]:
        if self.ab is not None:
            yield "ab"
        if self.ba is not None:
            yield "ba"

    def __len__(self) -> int:
        return (self.ab is not None) + (self.ba is not None)

    def __repr__(self) -> str:
        return f"OrderPair({dict(self)!r})"


def flip_rate(combined: Iterable[CombinedVerdict]) -> float | None:
    """The share of complete pairs whose two orders disagreed, or None with no complete pair."""
    done = [c for c in combined if c.complete]
    if not done:
        return None
    return sum(c.flipped for c in done) / len(done)
