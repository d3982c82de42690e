"""The judge measured against execution: on pairs where exactly one answer passes the tests.

Where one answer of a pair passes the task's tests and the other fails, a verdict for the
failing one is simply wrong, and no person had to label anything to know it. The same block is
computed for human labels on those pairs, so judge and person are both measured against a
reference neither of them chose. Pure: plain tuples in, frozen dataclasses out.

Verdicts and labels are `(task_id, model_a, model_b, winner)` tuples, mappings with those keys
(verdict and label records), or objects with those attributes (a `CombinedVerdict` works as is);
`winner` is a model name, "tie", or None (an incomplete verdict, a withdrawn label), left out.

Two views of the judge: the combined verdicts (both orders must agree, else a flipped tie), and
the single calls, one per order. A judge that always picks "Answer 1" ties every combined pair,
and on the calls agrees with the tests exactly half the time; one that reads the code agrees on
both views.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from konkord.stats.diagnostics import wilson_interval

Outcome = Literal["passing", "tie", "failing"]
PassMap = Mapping[tuple[str, str], bool]  # (task_id, model) -> passed `tests`


@dataclass(frozen=True)
class Agreement:
    """How often verdicts on objective pairs pick the passing answer, tie, or pick the failing.

    `rate` is picks_passing / n with its Wilson 95% interval (ties count against it);
    `rate_decided` leaves ties out: picks_passing / (picks_passing + picks_failing)."""

    n: int
    picks_passing: int
    ties: int
    picks_failing: int
    rate: float | None
    low: float | None
    high: float | None
    rate_decided: float | None
    low_decided: float | None
    high_decided: float | None


@dataclass(frozen=True)
class PairAgreement:
    """Agreement with the tests on one model pair."""

    model_a: str
    model_b: str
    agreement: Agreement


@dataclass(frozen=True)
class ObjectivePair:
    """One verdict (or label) on an objective pair, listed so a person can read it."""

    task_id: str
    model_a: str
    model_b: str
    passing: str  # the model whose answer passed the tests
    winner: str  # what the judge or labeller chose: a model or "tie"
    outcome: Outcome


@dataclass(frozen=True)
class Side:
    """One rater (the judge, or the human labellers) against the tests."""

    overall: Agreement
    by_model_pair: tuple[PairAgreement, ...]
    pairs: tuple[ObjectivePair, ...]
    undecided: int  # objective pairs whose verdict is incomplete or whose label was withdrawn


@dataclass(frozen=True)
class ObjectiveBlock:
    """The objective block of calibration: judge, and humans where labelled, vs the tests."""

    objective_pairs: int  # judged pairs where exactly one answer passes the tests
    both_passed: int
    both_failed: int
    untested: int  # judged pairs where an answer has no tests result
    judge: Side  # combined verdicts (both orders)
    calls: Side | None  # single judge calls, one per order; None when not given
    human: Side | None  # None when no label falls on an objective pair


def agreement(outcomes: Iterable[Outcome]) -> Agreement:
    """Count outcomes and put Wilson intervals on the share that picks the passing answer."""
    items = list(outcomes)
    good = items.count("passing")
    ties = items.count("tie")
    bad = items.count("failing")
    n = len(items)

    def interval(k: int, m: int) -> tuple[float | None, float | None, float | None]:
        if m == 0:
            return None, None, None
        low, high = wilson_interval(k, m)
        return k / m, low, high

    rate, low, high = interval(good, n)
    rate_d, low_d, high_d = interval(good, good + bad)
    return Agreement(n, good, ties, bad, rate, low, high, rate_d, low_d, high_d)


def _fields(item: Any) -> tuple[str, str, str, str | None]:
    if isinstance(item, tuple | list):
        task_id, model_a, model_b, winner = item[:4]
    elif isinstance(item, Mapping):
        task_id, model_a, model_b = item["task_id"], item["model_a"], item["model_b"]
        winner = item.get("winner")
    else:
        task_id, model_a, model_b, winner = (item.task_id, item.model_a, item.model_b, item.winner)
    return str(task_id), str(model_a), str(model_b), None if winner is None else str(winner)


def _passing(task_id: str, model_a: str, model_b: str, passed: PassMap) -> str | None:
    """The model whose answer alone passed, or None when the pair is not objective."""
    a, b = passed.get((task_id, model_a)), passed.get((task_id, model_b))
    if a is None or b is None or a == b:
        return None
    return model_a if a else model_b


def _side(items: Iterable[Any], passed: PassMap) -> Side | None:
    pairs: list[ObjectivePair] = []
    undecided = 0
    for item in items:
        task_id, first, second, winner = _fields(item)
        model_a, model_b = sorted((first, second))
        passing = _passing(task_id, model_a, model_b, passed)
        if passing is None:
            continue
        if winner is None:
            undecided += 1
            continue
        outcome: Outcome = (
            "tie" if winner == "tie" else "passing" if winner == passing else "failing"
        )
        pairs.append(ObjectivePair(task_id, model_a, model_b, passing, winner, outcome))
    if not pairs and not undecided:
        return None
    pairs.sort(key=lambda p: (p.model_a, p.model_b, p.task_id))
    by_pair: dict[tuple[str, str], list[Outcome]] = {}
    for pair in pairs:
        by_pair.setdefault((pair.model_a, pair.model_b), []).append(pair.outcome)
    return Side(
        overall=agreement(p.outcome for p in pairs),
        by_model_pair=tuple(
            PairAgreement(a, b, agreement(outcomes)) for (a, b), outcomes in by_pair.items()
        ),
        pairs=tuple(pairs),
        undecided=undecided,
    )


def objective_block(
    verdicts: Iterable[Any],
    passed: PassMap,
    labels: Iterable[Any] | None = None,
    calls: Iterable[Any] | None = None,
) -> ObjectiveBlock:
    """The objective block for ONE judge's combined verdicts, its calls and labels if given.

    `passed` maps (task_id, model) to whether that answer passed `tests`
    (`konkord.stages.check.passes_tests(spec)` builds it). `calls` are the judge's verdict
    records, one per order (kind "verdict"; failures have no winner and are left out)."""
    verdicts = list(verdicts)
    counts = {"objective": 0, "both_passed": 0, "both_failed": 0, "untested": 0}
    for item in verdicts:
        task_id, first, second, _ = _fields(item)
        a, b = passed.get((task_id, first)), passed.get((task_id, second))
        if a is None or b is None:
            counts["untested"] += 1
        elif a != b:
            counts["objective"] += 1
        else:
            counts["both_passed" if a else "both_failed"] += 1
    judge = _side(verdicts, passed) or Side(agreement([]), (), (), 0)
    human = _side(labels, passed) if labels is not None else None
    order_calls = _side(calls, passed) if calls is not None else None
    return ObjectiveBlock(
        objective_pairs=counts["objective"],
        both_passed=counts["both_passed"],
        both_failed=counts["both_failed"],
        untested=counts["untested"],
        judge=judge,
        calls=order_calls,
        human=human,
    )
