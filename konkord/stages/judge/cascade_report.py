"""The cascade's part of the results file: the selective-accuracy table, the cascade against
the strong judge alone on labelled pairs, and who decided each pair."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from konkord.configuration.runs_config import Price
from konkord.evidence.log import Record
from konkord.results import schema as R
from konkord.stages.current import proportion
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


def _calls_and_cost(records: Iterable[Record], price: Price | None) -> tuple[int, float | None]:
    """Calls behind the records (N per record for samples) and their cost, None if unknown.

    With a price in runs.json the cost is its tokens at that price, so the comparison uses the
    prices the run declares now (simulated judges record $0)."""
    calls, cost = 0, 0.0
    unknown = False
    for record in records:
        calls += len(record.get("samples") or [None])
        if price is not None:
            tokens_in, tokens_out = (
                int(record.get("tokens_in") or 0),
                int(record.get("tokens_out") or 0),
            )
            cost += (
                tokens_in * price.input_per_million + tokens_out * price.output_per_million
            ) / 1e6
        elif record.get("cost_usd") is None:
            unknown = True
        else:
            cost += float(record["cost_usd"])
    return calls, None if unknown else cost


def cascade_block(
    pairs: CascadePairs, labels: list[Record], prices: Mapping[str, Price]
) -> R.CascadeBlock:
    """The cascade section of the strong judge's block."""
    plan = pairs.plan
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
    )
    if len(pairs.keys) == 0:
        return block
    versus = cascade_vs_strong(pairs.accepted, pairs.verdict_ab, strong, label_pair, label_outcome)
    first_calls, first_cost = _calls_and_cost(pairs.first_records, prices.get(plan.first_pass))
    strong_records = [r for v in pairs.strong.values() for r in v.orders.values()]
    strong_calls, strong_cost = _calls_and_cost(strong_records, prices.get(plan.strong))
    per_call = None if strong_cost is None or not strong_calls else strong_cost / strong_calls
    alone_calls = 2 * len(pairs.keys)
    escalated_calls = 2 * (len(pairs.keys) - int(pairs.accepted.sum()))
    alone_cost = None if per_call is None else per_call * alone_calls
    cascade_cost = (
        None if per_call is None or first_cost is None else first_cost + per_call * escalated_calls
    )
    block.cascade = R.CascadeSide(
        agreement=_proportion(versus.cascade),
        calls=first_calls + escalated_calls,
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


def mark_comparisons(tasks: list[R.TaskView], pairs: CascadePairs) -> None:
    """Say on each of the strong judge's comparisons who decided it (the lean kept small)."""
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
            )
