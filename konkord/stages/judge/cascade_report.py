"""The cascade's part of the results file: the selective-accuracy table, the cascade against
the strong judge alone on labelled pairs, and who decided each pair."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import numpy as np

from konkord.configuration.runs_config import Price
from konkord.evidence.log import Record
from konkord.results import schema as R
from konkord.stages.current import proportion
from konkord.stages.decisions import RunDecisions, cost_of
from konkord.stages.judge.cascade_view import CascadePairs, outcome_code, winner_of
from konkord.stats.selective import Rate, cascade_vs_strong, confidence, lean, selective_table


def _proportion(rate: Rate) -> R.Proportion:
    return proportion(rate.k, rate.n)


def label_arrays(pairs: CascadePairs, labels: Iterable[Record]) -> tuple[np.ndarray, np.ndarray]:
    """(pair index, outcome code) of every label on a pair the first pass judged."""
    index = {key: i for i, key in enumerate(pairs.keys)}
    rows: list[tuple[int, int]] = []
    for label in labels:
        key = (str(label["task_id"]), str(label["model_a"]), str(label["model_b"]))
        code = outcome_code(label.get("winner"), key[1], key[2])
        if key in index and code >= 0:
            rows.append((index[key], code))
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    pair_index, outcome = zip(*rows, strict=True)
    return np.asarray(pair_index, np.int64), np.asarray(outcome, np.int64)


def _strong_outcomes(pairs: CascadePairs) -> np.ndarray:
    out = np.full(len(pairs.keys), -1, np.int64)
    for i, key in enumerate(pairs.keys):
        verdict = pairs.strong.get(key)
        if verdict is not None and verdict.complete:
            out[i] = outcome_code(verdict.winner, key[1], key[2])
    return out


MIN_AUDITED_LABELS = 10  # labelled accepted pairs the strong judge also judged, to compare


def _audited(pairs: CascadePairs) -> int:
    """Accepted pairs the strong judge also judged in both orders: the audit sample."""
    return sum(
        1
        for i, key in enumerate(pairs.keys)
        if pairs.accepted[i] and (v := pairs.strong.get(key)) is not None and v.complete
    )


def cascade_block(
    decisions: RunDecisions, prices: Mapping[str, Price], run: str = "RUN"
) -> R.CascadeBlock:
    """The cascade section of the strong judge's block, read from the run's one view."""
    pairs = decisions.cascade
    assert pairs is not None
    plan = pairs.plan
    labels = [label for group in decisions.labels.values() for label in group]
    label_pair, label_outcome = label_arrays(pairs, labels)
    rows = selective_table(
        pairs.probs_ab,
        pairs.probs_ba,
        pairs.verdict_ab,
        pairs.verdict_ba,
        label_pair,
        label_outcome,
    )
    strong = _strong_outcomes(pairs)
    deciders = [pairs.decided_by(i) for i in range(len(pairs.keys))]
    block = R.CascadeBlock(
        route=str(decisions.cascade_route),
        first_pass=plan.first_pass,
        strong=plan.strong,
        accept_at=plan.accept_at,
        confidence=plan.confidence,
        pairs=len(pairs.keys),
        decided_first_pass=deciders.count("first_pass"),
        decided_strong=deciders.count("strong"),
        pending=deciders.count("pending"),
        selective=[
            R.SelectiveRow(
                threshold=row.threshold,
                decided=_proportion(row.decided),
                agreement=_proportion(row.agreement),
                one_order_decided=_proportion(row.one_order_decided),
                one_order_agreement=_proportion(row.one_order_agreement),
                lean_right=_proportion(row.lean_right),
            )
            for row in rows
        ],
        labels=len(label_pair),
        compared_labels=int((strong[label_pair] >= 0).sum()) if len(label_pair) else 0,
        audited=_audited(pairs),
    )
    if len(pairs.keys) == 0:
        return block
    # Only labels on pairs the first pass accepted AND the strong judge judged tell the two
    # apart: on escalated pairs the cascade IS the strong judge.
    both = (
        pairs.accepted[label_pair] & (strong[label_pair] >= 0)
        if len(label_pair)
        else np.zeros(0, bool)
    )
    if int(both.sum()) < MIN_AUDITED_LABELS:
        block.too_few_why = (
            f"{int(both.sum())} labels fall on pairs the first pass decided and the strong judge "
            f"also judged; {MIN_AUDITED_LABELS} are needed to compare the cascade with the strong "
            "judge alone (on escalated pairs the two are the same verdict). After labelling, "
            f"`konkord judge --run {run}` has the strong judge judge the labelled pairs it lacks"
        )
        return block
    versus = cascade_vs_strong(pairs.accepted, pairs.verdict_ab, strong, label_pair, label_outcome)
    route = decisions.routes[str(decisions.cascade_route)]
    spent = route.cost(prices)  # the cascade's own calls, as the run's one view counts them
    strong_records = [r for v in pairs.strong.values() for r in v.orders.values()]
    strong_cost = cost_of(strong_records, plan.strong, prices.get(plan.strong))
    per_call = (
        None
        if strong_cost.cost_usd is None or not strong_cost.calls
        else strong_cost.cost_usd / strong_cost.calls
    )
    alone_calls = 2 * len(pairs.keys)
    escalated_calls = len(route.calls.get(plan.strong, []))
    alone_cost = None if per_call is None else per_call * alone_calls
    cascade_cost = spent.cost_usd
    block.cascade = R.CascadeSide(
        agreement=_proportion(versus.cascade),
        calls=spent.calls,
        strong_calls=escalated_calls,
        cost_usd=cascade_cost,
    )
    block.strong_alone = R.CascadeSide(
        agreement=_proportion(versus.strong),
        calls=alone_calls,
        strong_calls=alone_calls,
        cost_usd=alone_cost,
    )
    block.saved_strong_calls = alone_calls - escalated_calls
    if alone_cost is not None and cascade_cost is not None:
        block.saved_cost_usd = alone_cost - cascade_cost
    return block


_SCREEN = {"ab": ("Answer 1", "Answer 2", "tie"), "ba": ("Answer 2", "Answer 1", "tie")}


def orders_text(pairs: CascadePairs, i: int) -> str:
    """The first pass's two orders as the judge saw them: "order 1: Answer 2 at 0.99;
    swapped: Answer 1 at 0.48; orders disagree" (a model shown second is Answer 2)."""
    parts = []
    for label, order, probs, code in (
        ("order 1", "ab", pairs.probs_ab, pairs.verdict_ab),
        ("swapped", "ba", pairs.probs_ba, pairs.verdict_ba),
    ):
        c = int(code[i])
        parts.append(f"{label}: {_SCREEN[order][c]} at {float(probs[i][c]):.2f}")
    agree = "orders agree" if pairs.verdict_ab[i] == pairs.verdict_ba[i] else "orders disagree"
    return "; ".join(parts) + f"; {agree}"


def mark_comparisons(tasks: Iterable[R.TaskView], pairs: CascadePairs) -> Iterator[R.TaskView]:
    """Each task with, on each of the strong judge's comparisons, who decided it (the lean kept
    small); one task at a time, as the report makes them."""
    index = {key: i for i, key in enumerate(pairs.keys)}
    conf = confidence(pairs.probs_ab, pairs.probs_ba, pairs.verdict_ab)
    leans = lean(pairs.probs_ab, pairs.probs_ba)
    for task in tasks:
        for comparison in task.comparisons:
            key = (task.id, comparison.model_a, comparison.model_b)
            if comparison.judge != pairs.plan.strong or key not in index:
                continue
            i = index[key]
            comparison.cascade = R.CascadePair(
                decided_by=pairs.decided_by(i),  # type: ignore[arg-type]
                first_pass=pairs.plan.first_pass,
                probs_ab=dict(zip(("a", "b", "tie"), map(float, pairs.probs_ab[i]), strict=True)),
                probs_ba=dict(zip(("a", "b", "tie"), map(float, pairs.probs_ba[i]), strict=True)),
                orders_agree=bool(pairs.verdict_ab[i] == pairs.verdict_ba[i]),
                confidence=float(conf[i]),
                lean=winner_of(int(leans[i]), key[1], key[2]),
                orders_text=orders_text(pairs, i),
            )
        yield task
