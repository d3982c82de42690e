"""What the report and calibrate stages both read from a run: the answers the run holds now,
their hashes (to tell fresh verdicts from stale ones), and Wilson proportions.

It sits below both stages so neither imports the other for these.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from konkord.configuration.runspec import RunSpec
from konkord.evidence.log import EvidenceLog, Record
from konkord.evidence.verdicts import VerdictRecord
from konkord.results import schema as R
from konkord.stages.run import current_answers


def finite(value: float) -> float | None:
    """A float for the results file: NaN and infinities become None (JSON has neither)."""
    return float(value) if np.isfinite(value) else None


def interval(estimate: float, low: float, high: float) -> R.Interval:
    """An estimate with its bounds, each None where it is not finite."""
    return R.Interval(estimate=finite(estimate), low=finite(low), high=finite(high))


def proportion(k: int, n: int) -> R.Proportion:
    """k of n with a Wilson 95% interval; undefined (None) with n == 0."""
    from konkord.stats import wilson_interval

    if n == 0:
        return R.Proportion(k=0, n=0, rate=None)
    low, high = wilson_interval(k, n)
    return R.Proportion(k=k, n=n, rate=k / n, low=low, high=high)


def good_answers(spec: RunSpec, log: EvidenceLog) -> dict[tuple[str, str], Record]:
    """The current answer per (task, model) for this run's models and settings."""
    answers = current_answers(log, spec.suite, spec.settings)
    return {key: rec for key, rec in answers.items() if key[1] in spec.models}


def system_prompt_for(log: EvidenceLog, frame_hash: str | None) -> str | None:
    """The exact system prompt stored under a frame hash."""
    if frame_hash is None:
        return None
    record = log.latest("prompts").get((frame_hash,))
    return None if record is None else str(record.get("system_prompt"))


def current_labels(log: EvidenceLog) -> list[Record]:
    """The labels that stand now (a withdrawn label has no winner), each with model_a <
    model_b as verdicts have: the label app writes them so, but a label written the other way
    round says the same and must count the same everywhere (its winner is a name, so it needs
    no change), not only where a reader happens to sort the pair itself."""
    latest: dict[tuple[str, str, str, str], Record] = {}
    for record in log.records("labels"):
        a, b = sorted((str(record.get("model_a")), str(record.get("model_b"))))
        oriented = record if a == record.get("model_a") else {**record, "model_a": a, "model_b": b}
        latest[(str(record.get("task_id")), a, b, str(record.get("labeller")))] = oriented
    return [r for r in latest.values() if r.get("winner") is not None]


def evidence_date(log: EvidenceLog) -> str | None:
    """The newest record's date: what the site prints, so rebuilds stay byte-identical."""
    from konkord.evidence.verdict_table import verdict_table

    newest = ""
    for stream in ("answers", "labels", "checks"):
        for rec in log.records(stream):
            newest = max(newest, str(rec.get("created_at") or ""))
    table = verdict_table(log)  # the verdicts' columns: their dates are a handful of codes
    dates = table.coded["created_at"]
    for code in np.flatnonzero(np.bincount(dates)).tolist() if len(dates) else []:
        newest = max(newest, str(table.get_code(code) or ""))
    return newest[:10] or None


def positional(records: Sequence[VerdictRecord]) -> R.Positional:
    """How often the answer shown first won, over a judge's single calls."""
    from konkord.evidence.verdict_table import rows_of_one_table

    first = second = ties = unobserved = 0
    found = rows_of_one_table(records)
    if found is not None:  # the log's columns: a count over arrays rather than a loop
        table, rows = found
        extra = table.extra_at(rows)
        observed = table.coded["kind"][rows] != table.code_of("failure")
        if extra:
            imported = np.array(
                [bool(extra.get(i, {}).get("reconstructed"))
                 or extra.get(i, {}).get("source") == "import" for i in rows.tolist()]
            )  # fmt: skip
            unobserved = int((observed & imported).sum())
            observed &= ~imported
        position = table.coded["position_winner"][rows][observed]
        first = int((position == table.code_of("1")).sum())
        second = int((position == table.code_of("2")).sum())
        ties = len(position) - first - second
        records = []
    for rec in records:
        if rec.get("kind") == "failure":
            continue
        if rec.get("reconstructed") or rec.get("source") == "import":
            # Imported votes are combined verdicts written out as two orders: which position
            # won each order was never observed, so they say nothing about position.
            unobserved += 1
            continue
        pos = rec.get("position_winner")
        if pos == "1":
            first += 1
        elif pos == "2":
            second += 1
        else:
            ties += 1
    return R.Positional(
        first=first,
        second=second,
        ties=ties,
        share_first=proportion(first, first + second),
        measurable=bool(first + second + ties) or not unobserved,
        not_measurable_why=None
        if first + second + ties or not unobserved
        else (
            f"all {unobserved} order records were imported: the source published one "
            "combined verdict per pair, written here as two orders that agree by "
            "construction, so which position the judge favoured was never observed"
        ),
    )
