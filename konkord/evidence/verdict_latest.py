"""The records of one judge that stand, read from the verdict log's columns: the latest per
(task, pair, order) under one frame, and of those the ones made on the answers the run holds
now. `konkord.evidence.verdicts.load_verdicts` gives them as rows; whole-column readers (the
owed calls, the report's combining) take the table and the row indices.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from konkord.evidence.combined_columns import dense_codes, key_runs
from konkord.evidence.verdict_rows import ABSENT, NULL

if TYPE_CHECKING:
    from konkord.evidence.log import EvidenceLog
    from konkord.evidence.verdict_table import VerdictTable


def rows_of_judge(table: VerdictTable, judge: str) -> np.ndarray:
    """The rows of one judge's records, in write order."""
    code = table.code_of(judge)
    return np.flatnonzero(table.coded["judge"] == code) if code >= 0 else np.zeros(0, np.int64)


def latest_verdict_rows(
    log: EvidenceLog,
    judge: str,
    frame_hash: str | None = None,
    answer_shas: Mapping[tuple[str, str], str] | None = None,
) -> tuple[VerdictTable, np.ndarray] | None:
    """`load_verdicts` as the log's table and the indices of its rows, for a reader of whole
    columns (a row object per record is 380,000 of them at 20 models x 1,000 tasks); None
    where `load_verdicts` gives an empty list before looking at any row."""
    from konkord.evidence.verdict_table import verdict_table

    table = verdict_table(log)
    rows = rows_of_judge(table, judge)
    if not len(rows):
        return None
    wanted = frame_hash or table.get(int(rows[-1]), "frame_hash")
    if wanted is None:
        return None
    rows = rows[table.coded["frame_hash"][rows] == table.code_of(wanted)]
    rows = _latest_per_key(table, rows)
    if answer_shas is not None:
        rows = rows[_fresh(table, rows, answer_shas)]
    return table, rows


def _dense(codes: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    """Each code's rank among the distinct codes (all below `size`), and how many there are."""
    distinct, inverse = dense_codes(codes, size)
    return inverse, len(distinct)


def _latest_per_key(table: VerdictTable, rows: np.ndarray) -> np.ndarray:
    """Of rows of one judge and frame, the last per (task, model_a, model_b, order), in the
    order each key was first written (as `EvidenceLog.latest` gives them)."""
    if not len(rows):
        return rows
    key = np.zeros(len(rows), dtype=np.int64)
    for name in ("task_id", "model_a", "model_b", "order"):
        rank, size = _dense(table.coded[name][rows], len(table.pool))
        key = key * size + rank
    # One stable sort groups each key's rows in write order: a group's first is where the
    # key was first written, its last the row that stands (two np.unique calls sorted twice).
    order, starts = key_runs(key)
    first = order[starts]
    last = order[np.append(starts[1:], len(order)) - 1]
    standing: np.ndarray = rows[last[np.argsort(first, kind="stable")]]
    return standing


def _fresh(
    table: VerdictTable, rows: np.ndarray, answer_shas: Mapping[tuple[str, str], str]
) -> np.ndarray:
    """Which rows were made on the answers the run holds now (`is_fresh`, on the columns)."""
    n = len(rows)
    tasks, task_at = dense_codes(table.coded["task_id"][rows].astype(np.int64), len(table.pool))
    both = np.concatenate([table.coded["model_a"][rows], table.coded["model_b"][rows]])
    models, model_at = dense_codes(both.astype(np.int64), len(table.pool))  # a's, then b's
    width = len(models)
    distinct, inverse = dense_codes(np.tile(task_at, 2) * width + model_at, len(tasks) * width)
    # each distinct (task, model) of either side asked once, its names read from plain lists
    task_names = [str(table.get_code(code)) for code in tasks.tolist()]
    model_names = [str(table.get_code(code)) for code in models.tolist()]
    at_task, at_model = np.divmod(distinct, width)
    code_of, sha_of = table.code_of, answer_shas.get
    expected = np.array(
        [
            code_of(sha_of((task_names[t], model_names[m])))
            for t, m in zip(at_task.tolist(), at_model.tolist(), strict=True)
        ],
        dtype=np.int64,
    )[inverse]
    ok = np.ones(n, dtype=bool)
    for k, side in enumerate(("a", "b")):
        held = table.coded[f"answer_{side}_sha"][rows].astype(np.int64)
        held[held == ABSENT] = NULL  # an absent hash reads as None, as `record.get` gives it
        ok &= held == expected[k * n : (k + 1) * n]
    return ok
