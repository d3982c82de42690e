"""The judges of a run compared with each other, at report time: what only the evidence can
give (consensus match, consistency, length preference, the pooled panel ranking) goes into the
results file's `judge_panel` section. The table's rows are assembled from it when shown, by
`konkord.results.judges_table`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from konkord.configuration.runspec import RunSpec
from konkord.configuration.turns import task_clusters
from konkord.evidence.log import EvidenceLog, Record
from konkord.evidence.verdicts import CombinedVerdict
from konkord.results import schema as R
from konkord.results.judges_table import PANEL
from konkord.stages.current import finite, proportion
from konkord.stages.report.freshness import ReportOptions
from konkord.stages.report.report_ranking import judge_block
from konkord.stats.judges import MIN_JUDGES_FOR_CONSENSUS


def _score(winner: str | None, model_a: str) -> float:
    if winner == "tie":
        return 0.5
    return 1.0 if winner == model_a else 0.0


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
        score.append(_score(winner, model_a))
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
    from konkord.stats.judges import panel_figures, panel_verdicts

    judges = list(combined_by_judge)
    models = list(spec.models)
    model_index = {m: k for k, m in enumerate(models)}
    task_index = task_clusters([t.id for t in spec.suite.tasks])
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
        [_score(c.winner, c.model_a) for _, c in pooled],
        n_judges=len(judges),
        n_models=len(models),
        n_tasks=len(task_index),
    )
    figures = panel_figures(panel_data, n_resamples=options.resamples, seed=options.seed)
    # Counted once: every judge's figure and people's read the same answers.
    lengths = {
        key: len(text) for key, rec in answers.items() if (text := rec.get("text")) is not None
    }
    steadiness, match = figures.consistency, figures.consensus
    standings = [
        R.JudgeStanding(
            judge=judge,
            consensus_match=None if match is None else _task_mean(match, g),
            consistency=_task_mean(steadiness, g),
            length_preference=_length_preference(
                ((c.task_id, c.model_a, c.model_b, c.winner) for c in done[judge]), lengths
            ),
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
        pooled_verdicts = [c for _, c in pooled]
        block = judge_block(spec, log, PANEL, pooled_verdicts, [], answers, options)
        panel.panel_ratings = block.ratings
        panel.panel_rank_groups = block.rank_groups
        panel.bootstrap = block.bootstrap
    return panel
