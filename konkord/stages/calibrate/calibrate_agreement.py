"""Agreement in the results file's form: labels and verdicts as codes in model terms, the
rates by group (task, model pair, labeller, answer length, turn) and people against each other.

The calibrate stage (calibrate.py) joins labels to verdicts and builds a judge's block from
these parts.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from konkord.configuration.turns import conversation_turn, split_unit
from konkord.evidence.log import Record
from konkord.evidence.verdicts import CombinedVerdict
from konkord.results import schema as R
from konkord.stats.agreement import (
    Agreement,
    agreement_without_ties,
    exact_agreement,
    kappa_bootstrap,
    length_quartiles,
    proportion,
)

KAPPA_RESAMPLES = 1000
KAPPA_SEED = 0


def labeller_person(labeller: str) -> str:
    """The person behind a labeller id (`expert_3#2` is expert_3's second vote on an item)."""
    return labeller.split("#", 1)[0]


def task_turn(task_id: str) -> int | None:
    """The turn of a multi-turn task id (`q81-t2` -> 2), or None for a single-turn task."""
    return split_unit(task_id)[1]


@dataclass(frozen=True)
class Comparison:
    """One label set beside the judge's combined verdict on the same item."""

    task_id: str
    model_a: str
    model_b: str
    labeller: str
    human: int
    judge: int
    verdict: CombinedVerdict
    length: float | None

    @property
    def conversation(self) -> str:
        """The cluster of the comparison: its task, the same for every turn of a conversation."""
        return conversation_turn(self.task_id)[0]


@dataclass(frozen=True)
class Label:
    """One standing human label, in model terms (model_a < model_b)."""

    task_id: str
    model_a: str
    model_b: str
    labeller: str
    code: int

    @property
    def conversation(self) -> str:
        """The cluster of the label: its task, the same for every turn of a conversation."""
        return conversation_turn(self.task_id)[0]


def winner_code(winner: object, model_a: str, model_b: str) -> int | None:
    """0, 1 or 2 for model_a, model_b or a tie (the order of agreement.CATEGORIES)."""
    if winner == model_a:
        return 0
    if winner == model_b:
        return 1
    if winner == "tie":
        return 2
    return None


def standing_labels(records: Iterable[Record]) -> list[Label]:
    """Standing labels in model terms with model_a < model_b; unreadable ones are dropped."""
    out = []
    for rec in records:
        model_a, model_b = sorted((str(rec.get("model_a")), str(rec.get("model_b"))))
        code = winner_code(rec.get("winner"), model_a, model_b)
        if code is None:
            continue
        out.append(Label(str(rec["task_id"]), model_a, model_b, str(rec["labeller"]), code))
    return out


def as_proportion(k: int, n: int) -> R.Proportion:
    result = proportion(k, n)
    if n == 0:
        return R.Proportion(k=0, n=0, rate=None)
    return R.Proportion(k=k, n=n, rate=result.rate, low=result.low, high=result.high)


def from_agreement(agreement: Agreement) -> R.Proportion:
    """The results-file form; task-clustered bounds with the plain Wilson ones beside them."""
    if agreement.n == 0:
        return R.Proportion(k=0, n=0, rate=None)
    if not agreement.clusters:
        return as_proportion(agreement.k, agreement.n)
    return R.Proportion(
        k=agreement.k,
        n=agreement.n,
        rate=agreement.rate,
        low=_finite(agreement.low),
        high=_finite(agreement.high),
        plain_low=_finite(agreement.plain_low),
        plain_high=_finite(agreement.plain_high),
        clusters=agreement.clusters,
    )


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def kappa_of(
    x: list[int], y: list[int], clusters: list[str], exchangeable: bool = False
) -> R.Kappa:
    estimate = kappa_bootstrap(
        np.array(x, dtype=np.int_),
        np.array(y, dtype=np.int_),
        clusters=np.array(clusters, dtype=object) if clusters else None,
        n_resamples=KAPPA_RESAMPLES,
        seed=KAPPA_SEED,
        exchangeable=exchangeable,
    )
    return R.Kappa(
        value=_finite(estimate.value), low=_finite(estimate.low), high=_finite(estimate.high)
    )


def _human_pairs(labels: list[Label]) -> tuple[list[int], list[int], list[str], int]:
    """Every pair of labels on the same item (published counting): codes, the conversation of
    each (the cluster of its interval), items shared."""
    by_item: dict[tuple[str, str, str], list[Label]] = {}
    for label in labels:
        by_item.setdefault((label.task_id, label.model_a, label.model_b), []).append(label)
    first: list[int] = []
    second: list[int] = []
    tasks: list[str] = []
    shared = 0
    for group in by_item.values():
        if len(group) < 2:
            continue
        shared += 1
        for one, two in itertools.combinations(sorted(group, key=lambda g: g.labeller), 2):
            first.append(one.code)
            second.append(two.code)
            tasks.append(one.conversation)
    return first, second, tasks, shared


def human_human_of(labels: list[Label]) -> R.HumanHuman | None:
    if len({labeller_person(label.labeller) for label in labels}) < 2:
        return None
    first, second, tasks, shared = _human_pairs(labels)
    if not first:
        return None
    return R.HumanHuman(
        agreement=from_agreement(exact_agreement(first, second, tasks)),
        agreement_no_ties=from_agreement(agreement_without_ties(first, second, tasks)),
        kappa=kappa_of(first, second, tasks, exchangeable=True),
        shared_items=shared,
    )


Group = tuple[list[int], list[int], list[str]]
"""Human codes, judge codes and the conversation of each comparison (its task; every turn of a
conversation the same), by which its interval is clustered, in one group."""


def keyed(groups: dict[str, Group], labels: dict[str, str] | None = None) -> list[R.KeyedRate]:
    rows = []
    for key, (x, y, tasks) in groups.items():
        rows.append(
            R.KeyedRate(
                key=key,
                label=None if labels is None else labels.get(key),
                proportion=from_agreement(exact_agreement(x, y, tasks)),
            )
        )
    return rows


def grouped(comparisons: list[Comparison], key: Callable[[Comparison], str]) -> dict[str, Group]:
    groups: dict[str, Group] = {}
    for c in comparisons:
        human, judge, tasks = groups.setdefault(key(c), ([], [], []))
        human.append(c.human)
        judge.append(c.judge)
        tasks.append(c.conversation)
    return groups


def length_quartile_rates(comparisons: list[Comparison]) -> list[R.KeyedRate]:
    measured = [(c, c.length) for c in comparisons if c.length is not None]
    if not measured:
        return []
    split = length_quartiles([length for _, length in measured])
    groups: dict[str, Group] = {}
    labels: dict[str, str] = {}
    for q, span in enumerate(split.ranges):
        if span is None:
            continue
        key = f"Q{q + 1}"
        labels[key] = f"mean answer length {span[0]}-{span[1]} characters"
        groups[key] = ([], [], [])
    for (c, _), q in zip(measured, split.quartile.tolist(), strict=True):
        groups[f"Q{q + 1}"][0].append(c.human)
        groups[f"Q{q + 1}"][1].append(c.judge)
        groups[f"Q{q + 1}"][2].append(c.conversation)
    return keyed(groups, labels)


def turn_rates(comparisons: list[Comparison], labels: list[Label]) -> list[R.GroupCalibration]:
    """Agreement per turn, as MT-Bench's Table 5 sets it out, wherever a comparison is on a
    conversation's turn. In a suite that mixes conversations and single-turn tasks, a
    single-turn task is a conversation of one turn: it counts as turn 1, and the group says
    how many such tasks it holds."""
    if all(task_turn(c.task_id) is None for c in comparisons):
        return []
    single = {c.task_id for c in comparisons if task_turn(c.task_id) is None}
    out = []
    for turn in sorted({conversation_turn(c.task_id)[1] for c in comparisons}):
        inside = [c for c in comparisons if conversation_turn(c.task_id)[1] == turn]
        human = [c.human for c in inside]
        judge = [c.judge for c in inside]
        tasks = [c.conversation for c in inside]
        folded = len({c.task_id for c in inside} & single)
        label = f"Turn {turn}"
        if folded:
            label += f" (with {folded} single-turn task{'s' if folded != 1 else ''})"
        out.append(
            R.GroupCalibration(
                key=f"turn {turn}",
                label=label,
                agreement=from_agreement(exact_agreement(human, judge, tasks)),
                agreement_no_ties=from_agreement(agreement_without_ties(human, judge, tasks)),
                human_human=human_human_of(
                    [x for x in labels if conversation_turn(x.task_id)[1] == turn]
                ),
                single_turn_tasks=folded,
            )
        )
    return out
