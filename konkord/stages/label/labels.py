"""Human labels in the evidence log: written the moment they are given, withdrawn by superseding.

A label is keyed by (task_id, model_a, model_b, labeller); the latest record for a key wins.
Undo never deletes a line: it appends a record for the same key with `winner` null, so the
history of what a person clicked stays in the log and in git.
"""

from __future__ import annotations

from konkord.evidence.log import EvidenceLog, Record, now_iso, record_key
from konkord.stages.label.sample import Comparison, LabelKey

SOURCES = ("human", "simulated", "import")


def _check_models(item: Comparison, shown_first: str | None) -> None:
    if shown_first is not None and shown_first not in (item.model_a, item.model_b):
        raise ValueError(
            f"shown_first {shown_first!r} is neither {item.model_a!r} nor {item.model_b!r}"
        )


def record_label(
    log: EvidenceLog,
    item: Comparison,
    winner: str,
    labeller: str,
    shown_first: str,
    source: str = "human",
    inclusion_probability: float | None = None,
    sample_seed: int | None = None,
) -> Record:
    """Append one label durably (fsynced before returning) and return the record written.

    `winner` is in model terms: item.model_a, item.model_b or "tie". `inclusion_probability`
    is the chance the labelling queue (seed `sample_seed`) drew this comparison for the
    planned number of labels (`konkord.stages.label.design`); a human-anchored ranking weights the
    label by its inverse.
    """
    if winner not in (item.model_a, item.model_b, "tie"):
        raise ValueError(
            f"winner {winner!r} must be {item.model_a!r}, {item.model_b!r} or 'tie'"
        )
    if source not in SOURCES:
        raise ValueError(f"source {source!r} must be one of {', '.join(SOURCES)}")
    if not labeller.strip():
        raise ValueError("labeller must not be empty")
    _check_models(item, shown_first)
    record = _label(item, labeller, winner, shown_first, source)
    if inclusion_probability is not None:
        if not 0.0 < inclusion_probability <= 1.0:
            raise ValueError(f"inclusion_probability {inclusion_probability} is outside (0, 1]")
        record["inclusion_probability"] = round(float(inclusion_probability), 12)
    if sample_seed is not None:
        record["sample_seed"] = int(sample_seed)
    log.append("labels", record)
    return record


def withdraw_label(
    log: EvidenceLog,
    item: Comparison,
    labeller: str,
    shown_first: str | None = None,
    source: str = "human",
) -> Record:
    """Append a record with winner null that supersedes this labeller's label for `item`."""
    _check_models(item, shown_first)
    record = _label(item, labeller, None, shown_first, source)
    log.append("labels", record)
    return record


def _label(
    item: Comparison, labeller: str, winner: str | None, shown_first: str | None, source: str
) -> Record:
    """A label record as the log keeps it (a withdrawal's winner is None)."""
    return {
        "kind": "label",
        "task_id": item.task_id,
        "model_a": item.model_a,
        "model_b": item.model_b,
        "labeller": labeller,
        "winner": winner,
        "shown_first": shown_first,
        "source": source,
        "created_at": now_iso(),
    }


def current_labels(log: EvidenceLog) -> dict[LabelKey, Record]:
    """The latest label per (task_id, model_a, model_b, labeller), withdrawn ones left out."""
    out: dict[LabelKey, Record] = {}
    for key, record in log.latest("labels").items():
        if record.get("winner") is not None:
            task_id, model_a, model_b, labeller = key
            out[(task_id, model_a, model_b, labeller)] = record
    return out


def last_label(log: EvidenceLog, labeller: str) -> Record | None:
    """This labeller's most recently given label that still stands, or None."""
    records = log.records("labels")
    latest: dict[tuple[object, ...], int] = {}
    for index, record in enumerate(records):
        latest[record_key("labels", record)] = index
    for index in range(len(records) - 1, -1, -1):
        record = records[index]
        if (
            record.get("labeller") == labeller
            and record.get("winner") is not None
            and latest[record_key("labels", record)] == index
        ):
            return record
    return None


def undo_last_label(log: EvidenceLog, labeller: str) -> Record | None:
    """Withdraw this labeller's last standing label; return the withdrawn label, or None."""
    record = last_label(log, labeller)
    if record is None:
        return None
    item = Comparison(record["task_id"], record["model_a"], record["model_b"])
    withdraw_label(
        log, item, labeller, record.get("shown_first"), record.get("source", "human")
    )
    return record
