"""The one cost rule (`konkord.stages.decisions.call_cost`) over a judge's verdict records at
once, read from the log's columns: at 380,000 calls, a Python loop asking each record for six
fields costs seconds; the same figures from numpy arrays cost milliseconds. Same numbers, same
sums in the same order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from konkord.configuration.runs_config import Price
from konkord.evidence.verdict_table import VerdictTable, rows_of_one_table
from konkord.evidence.verdicts import VerdictRecord

# What the rule gives over a set of calls: calls, tokens in, tokens out, dollars known,
# calls of unknown cost, and the latencies recorded (a list, or an array from the columns).
Tally = tuple[int, int, int, float, int, "list[float] | np.ndarray"]


def _calls(table: VerdictTable, rows: np.ndarray) -> tuple[np.ndarray, dict[int, Any]]:
    """Which rows are calls (`decisions.is_call`) and the kept-as-written fields of rows."""
    extra = table.extra_at(rows)
    kind = table.coded["kind"][rows]
    codes = [table.code_of("verdict"), table.code_of("failure")]
    call = np.isin(kind, [c for c in codes if c >= 0])
    if extra:
        texts = np.array([extra.get(i, {}).get("text") is not None for i in rows.tolist()])
        call |= texts
    return call, extra


def cost_of_rows(
    records: Sequence[VerdictRecord], price: Price | None, simulated: bool
) -> Tally | None:
    """`decisions.cost_of`'s tally when every record is a row of one table, None otherwise;
    `simulated`: whether the caller is a simulated model (its recorded $0 is a placeholder)."""
    found = rows_of_one_table(records)
    if found is None:
        return None
    table, rows = found
    call, extra = _calls(table, rows)
    rows = rows[call]
    samples = [len(extra.get(i, {}).get("samples") or [None]) for i in rows.tolist()] if extra else None
    calls = sum(samples) if samples is not None else len(rows)
    tokens_in, _ = table.number("tokens_in", rows)
    tokens_out, has_out = table.number("tokens_out", rows)
    recorded, has_cost = table.number("cost_usd", rows)
    placeholder = has_cost & (recorded == 0) & simulated & (price is not None)
    use_recorded = has_cost & ~placeholder
    failure = table.coded["kind"][rows] == table.code_of("failure")
    nothing_billed = ~use_recorded & ~has_cost & failure & ~has_out
    priced = ~use_recorded & ~nothing_billed & ((tokens_in != 0) | (tokens_out != 0))
    if price is None:
        priced[:] = False
    dollars = np.zeros(len(rows))
    dollars[use_recorded] = recorded[use_recorded]
    if price is not None:
        dollars[priced] = (
            tokens_in[priced] * price.input_per_million
            + tokens_out[priced] * price.output_per_million
        ) / 1e6
    known_rows = use_recorded | nothing_billed | priced
    unknown = int((~known_rows).sum())
    # Summed in record order, as the loop does: a running sum adds one value at a time (a
    # plain sum would add in pairs, another rounding); + 0.0 as the loop's start (-0.0 -> 0.0).
    known_dollars = dollars[known_rows]
    known = float(np.cumsum(known_dollars)[-1]) + 0.0 if len(known_dollars) else 0.0
    latency, has_latency = table.number("latency_s", rows)
    tally = (calls, int(tokens_in.sum()), int(tokens_out.sum()), known, unknown,
             latency[has_latency])
    return tally


def latencies_of_rows(records: Sequence[VerdictRecord]) -> list[float] | None:
    """The latencies `decisions.call_latencies` gives, from the columns; None when the records
    are not rows of one table."""
    found = rows_of_one_table(records)
    if found is None:
        return None
    table, rows = found
    call, _ = _calls(table, rows)
    latency, has_latency = table.number("latency_s", rows[call])
    values: list[float] = latency[has_latency].tolist()
    return values


def median(values: list[float] | np.ndarray) -> float:
    """`statistics.median(values)`, the same float, by a partial sort in numpy (at 380,000
    latencies, sorting Python floats cost a tenth of a second); values with a NaN, whose
    place in a sort is arbitrary, go to statistics itself."""
    import statistics

    data = np.asarray(values, dtype=np.float64)
    if len(data) < 2 or np.isnan(data).any():
        return float(statistics.median(data.tolist()))
    k = len(data) // 2
    if len(data) % 2:
        return float(np.partition(data, k)[k])
    low, high = np.partition(data, [k - 1, k])[[k - 1, k]].tolist()
    return float((low + high) / 2)
