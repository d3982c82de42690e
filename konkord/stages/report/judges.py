"""The judges of a run compared with each other, at report time: what only the evidence can
give (consensus match, consistency, length preference, the pooled panel ranking) goes into the
results file's `judge_panel` section. The table's rows are assembled from it when shown, by
`konkord.results.judges_table`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from konkord.configuration.runspec import RunSpec
from konkord.configuration.turns import task_clusters
from konkord.evidence.combined_columns import CombinedColumns, CombinedList, columns_of, index_map
from konkord.evidence.log import EvidenceLog, Record
from konkord.evidence.verdicts import CombinedVerdict, model_a_score
from konkord.results import schema as R
from konkord.results.judges_table import PANEL
from konkord.stages.current import finite, proportion
from konkord.stages.report.freshness import ReportOptions
from konkord.stages.report.report_ranking import judge_block
from konkord.stats.judges import MIN_JUDGES_FOR_CONSENSUS


def _task_mean(figure: Any, k: int) -> R.TaskMean:
    return R.TaskMean(
        estimate=finite(float(figure.mean[k])),
        low=finite(float(figure.lower[k])),
        high=finite(float(figure.upper[k])),
        tasks=int(figure.n_tasks[k]),
    )


def _length_preference(
    items: Iterable[tuple[str, str, str, str | None]], lengths: dict[tuple[str, str], int]
) -> R.Proportion:
    """(task, model_a, model_b, winner) items -> longer-answer share among decided ones;
    `lengths` are the answers' lengths in characters (answers without text left out)."""
    from konkord.stats.judges import length_preference

    length_a, length_b, score = [], [], []
    for task_id, model_a, model_b, winner in items:
        long_a = lengths.get((task_id, model_a))
        long_b = lengths.get((task_id, model_b))
        if winner is None or long_a is None or long_b is None:
            continue
        length_a.append(long_a)
        length_b.append(long_b)
        score.append(model_a_score(winner, model_a))
    pref = length_preference(length_a, length_b, score)
    return proportion(pref.longer_won, pref.decided)


def judge_panel(
    spec: RunSpec,
    log: EvidenceLog,
    combined_by_judge: dict[str, list[CombinedVerdict]],
    answers: dict[tuple[str, str], Record],
    labels: list[Record],
    options: ReportOptions,
) -> R.JudgePanel:
    """Consensus match, consistency and length preference of every judge, and the panel
    ranking (Bradley-Terry over all judges' verdicts pooled, with the same bootstrap)."""
    from konkord.stats.judges import panel_verdicts

    judges = list(combined_by_judge)
    models = list(spec.models)
    model_index = {m: k for k, m in enumerate(models)}
    task_index = task_clusters([t.id for t in spec.suite.tasks])
    # Counted once: every judge's figure and people's read the same answers.
    lengths = {
        key: len(text) for key, rec in answers.items() if (text := rec.get("text")) is not None
    }
    pooled_columns = _pooled_columns(combined_by_judge, model_index, task_index, lengths)
    if pooled_columns is not None:  # the same figures, read from the lists' columns
        return _panel(spec, log, judges, pooled_columns, lengths, labels, answers, options)
    # The index's `in` is a Python call (it answers for a conversation's turns): asked once
    # per task, not once per verdict.
    in_suite = {
        task_id
        for task_id in {c.task_id for combined in combined_by_judge.values() for c in combined}
        if task_id in task_index
    }
    done = {
        judge: [
            c
            for c in combined
            if c.complete
            and c.winner is not None
            and c.model_a in model_index
            and c.model_b in model_index
            and c.task_id in in_suite
        ]
        for judge, combined in combined_by_judge.items()
    }
    pooled = [(g, c) for g, judge in enumerate(judges) for c in done[judge]]
    panel_data = panel_verdicts(
        [g for g, _ in pooled],
        [task_index[c.task_id] for _, c in pooled],
        [model_index[c.model_a] for _, c in pooled],
        [model_index[c.model_b] for _, c in pooled],
        [model_a_score(c.winner, c.model_a) for _, c in pooled],
        n_judges=len(judges),
        n_models=len(models),
        n_tasks=len(task_index),
    )
    preferences = [
        _length_preference(
            ((c.task_id, c.model_a, c.model_b, c.winner) for c in done[judge]), lengths
        )
        for judge in judges
    ]
    return _panel_of(
        spec, log, judges, panel_data, preferences, [c for _, c in pooled], labels, lengths,
        answers, options,
    )  # fmt: skip


def _panel_of(
    spec: RunSpec,
    log: EvidenceLog,
    judges: list[str],
    panel_data: Any,
    preferences: list[R.Proportion],
    pooled_verdicts: list[CombinedVerdict],
    labels: list[Record],
    lengths: dict[tuple[str, str], int],
    answers: dict[tuple[str, str], Record],
    options: ReportOptions,
) -> R.JudgePanel:
    """The panel from its pooled verdicts (`panel_verdicts`) and each judge's length
    preference."""
    from konkord.stats.judges import panel_figures

    figures = panel_figures(panel_data, n_resamples=options.resamples, seed=options.seed)
    steadiness, match = figures.consistency, figures.consensus
    standings = [
        R.JudgeStanding(
            judge=judge,
            consensus_match=None if match is None else _task_mean(match, g),
            consistency=_task_mean(steadiness, g),
            length_preference=preferences[g],
        )
        for g, judge in enumerate(judges)
    ]
    panel = R.JudgePanel(
        standings=standings,
        judges_needed=MIN_JUDGES_FOR_CONSENSUS,
        people_length_preference=(
            _length_preference(
                ((r["task_id"], r["model_a"], r["model_b"], r["winner"]) for r in labels), lengths
            )
            if labels
            else None
        ),
    )
    if len(judges) >= 2:
        block = judge_block(spec, log, PANEL, pooled_verdicts, [], answers, options)
        panel.panel_ratings = block.ratings
        panel.panel_rank_groups = block.rank_groups
        panel.bootstrap = block.bootstrap
    return panel


_Pooled = tuple[list[CombinedList], list[np.ndarray], list[R.Proportion]]


def _pooled_columns(
    combined_by_judge: dict[str, list[CombinedVerdict]],
    model_index: dict[str, int],
    task_index: dict[str, int],
    lengths: dict[tuple[str, str], int],
) -> _Pooled | None:
    """Each judge's usable verdicts (complete, between the run's models, on the suite's
    tasks), their (task, i, j, score) arrays and the judge's length preference, read from
    the lists' columns; None when a list has none."""
    done: list[CombinedList] = []
    arrays: list[np.ndarray] = []
    preferences: list[R.Proportion] = []
    for combined in combined_by_judge.values():
        columns = columns_of(combined)
        if columns is None:
            return None
        assert isinstance(combined, CombinedList)
        i = columns.index_of("model_a", index_map(model_index))
        j = columns.index_of("model_b", index_map(model_index))
        # `[]` rather than `get`: the index answers for a conversation's turns in `[]` only
        t = columns.index_of(
            "task", lambda task: task_index[task] if task in task_index else None  # noqa: SIM401
        )
        at = np.flatnonzero(columns.complete & (i >= 0) & (j >= 0) & (t >= 0))
        done.append(combined.take(at))
        arrays.append(np.stack([t[at], i[at], j[at]]))
        kept = columns.take(at)
        length_a = _lengths(kept, "model_a", lengths)
        length_b = _lengths(kept, "model_b", lengths)
        known = (length_a >= 0) & (length_b >= 0)
        preferences.append(
            _length_preference_of(length_a[known], length_b[known], kept.score[known])
        )
        arrays.append(kept.score)
    return done, arrays, preferences


def _lengths(
    columns: CombinedColumns, side: str, lengths: dict[tuple[str, str], int]
) -> np.ndarray:
    """The length of each verdict's answer on `side` (-1 where the answer has no text)."""
    return columns.lookup_pairs("task", side, lambda task, model: lengths.get((task, model)))


def _length_preference_of(
    length_a: np.ndarray, length_b: np.ndarray, score: np.ndarray
) -> R.Proportion:
    from konkord.stats.judges import length_preference

    pref = length_preference(length_a, length_b, score)
    return proportion(pref.longer_won, pref.decided)


def _panel(
    spec: RunSpec,
    log: EvidenceLog,
    judges: list[str],
    pooled: _Pooled,
    lengths: dict[tuple[str, str], int],
    labels: list[Record],
    answers: dict[tuple[str, str], Record],
    options: ReportOptions,
) -> R.JudgePanel:
    """`judge_panel` from the pooled columns."""
    from konkord.stats.judges import panel_verdicts

    done, arrays, preferences = pooled
    ids = arrays[0::2]
    scores = arrays[1::2]
    panel_data = panel_verdicts(
        np.repeat(np.arange(len(judges)), [len(d) for d in done]),
        np.concatenate([a[0] for a in ids]),
        np.concatenate([a[1] for a in ids]),
        np.concatenate([a[2] for a in ids]),
        np.concatenate(scores),
        n_judges=len(judges),
        n_models=len(spec.models),
        n_tasks=len(task_clusters([t.id for t in spec.suite.tasks])),
    )
    pooled_verdicts = [c for d in done for c in d] if len(judges) >= 2 else []
    return _panel_of(
        spec, log, judges, panel_data, preferences, pooled_verdicts, labels, lengths,
        answers, options,
    )  # fmt: skip
