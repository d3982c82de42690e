"""The judge table: the judges of a run compared with people, with executed tests and with each
other, one row per judge, read against the people's agreement with each other.

`judge_panel` computes, at report time, what only the evidence can give (consensus match,
consistency, length preference, the pooled panel ranking) into the results file's
`judge_panel` section. `judge_table` assembles the rows from that section and the judge blocks
(calibration, diagnostics, cost) when the table is shown, so `konkord calibrate`, which rewrites
the calibration blocks, never leaves the table behind.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from konkord import results as R
from konkord.evidence import EvidenceLog, Record
from konkord.runspec import RunSpec
from konkord.stages.current import finite, proportion
from konkord.stages.report_ranking import ReportOptions, judge_block
from konkord.verdicts import CombinedVerdict

PANEL = "panel (all judges pooled)"


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
    items: Iterable[tuple[str, str, str, str | None]], answers: dict[tuple[str, str], Record]
) -> R.Proportion:
    """(task, model_a, model_b, winner) items -> longer-answer share among decided ones."""
    from konkord.stats.judges import length_preference

    length_a, length_b, score = [], [], []
    for task_id, model_a, model_b, winner in items:
        text_a = answers.get((task_id, model_a), {}).get("text")
        text_b = answers.get((task_id, model_b), {}).get("text")
        if winner is None or text_a is None or text_b is None:
            continue
        length_a.append(len(text_a))
        length_b.append(len(text_b))
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
    from konkord.stats.judges import (
        MIN_JUDGES_FOR_CONSENSUS,
        consensus_match,
        panel_wins,
        task_consistency,
    )

    judges = list(combined_by_judge)
    models = list(spec.models)
    model_index = {m: k for k, m in enumerate(models)}
    task_index = {t.id: k for k, t in enumerate(spec.suite.tasks)}
    done = {
        judge: [
            c
            for c in combined
            if c.complete
            and c.winner is not None
            and c.model_a in model_index
            and c.model_b in model_index
            and c.task_id in task_index
        ]
        for judge, combined in combined_by_judge.items()
    }
    rows = [
        (g, task_index[c.task_id], model_index[c.model_a], model_index[c.model_b])
        for g, judge in enumerate(judges)
        for c in done[judge]
    ]
    scores = [_score(c.winner, c.model_a) for judge in judges for c in done[judge]]
    wins = panel_wins(
        [r[0] for r in rows],
        [r[1] for r in rows],
        [r[2] for r in rows],
        [r[3] for r in rows],
        scores,
        n_judges=len(judges),
        n_models=len(models),
        n_tasks=len(task_index),
    )
    resampling = {"n_resamples": options.resamples, "seed": options.seed}
    steadiness = task_consistency(wins, **resampling)
    match = (
        consensus_match(wins, **resampling).figure
        if len(judges) >= MIN_JUDGES_FOR_CONSENSUS
        else None
    )
    standings = [
        R.JudgeStanding(
            judge=judge,
            consensus_match=None if match is None else _task_mean(match, g),
            consistency=_task_mean(steadiness, g),
            length_preference=_length_preference(
                ((c.task_id, c.model_a, c.model_b, c.winner) for c in done[judge]), answers
            ),
        )
        for g, judge in enumerate(judges)
    ]
    panel = R.JudgePanel(
        standings=standings,
        judges_needed=MIN_JUDGES_FOR_CONSENSUS,
        people_length_preference=(
            _length_preference(
                ((r["task_id"], r["model_a"], r["model_b"], r["winner"]) for r in labels), answers
            )
            if labels
            else None
        ),
    )
    if len(judges) >= 2:
        pooled = [c for judge in judges for c in done[judge]]
        block = judge_block(spec, log, PANEL, pooled, [], answers, options)
        panel.panel_ratings = block.ratings
        panel.panel_rank_groups = block.rank_groups
        panel.bootstrap = block.bootstrap
    return panel


# -- the table, assembled when shown ------------------------------------------------------------


@dataclass(frozen=True)
class JudgeRow:
    """One judge's line of the table; None where a figure does not apply (no labels, no tests,
    fewer than three judges, unknown prices)."""

    number: int  # the judge's place in the run's list (its block is judge-<number>)
    judge: str
    people: R.Proportion | None
    kappa: R.Kappa | None
    tests: R.Proportion | None
    consensus: R.TaskMean | None
    consistency: R.TaskMean | None
    flip_rate: R.Proportion
    first_shown: R.Proportion  # share of decided single calls won by the answer shown first
    longer: R.Proportion | None
    failures: int
    calls: int
    cost_per_1000: float | None
    median_latency_s: float | None
    # model -> place in this judge's ranking by point estimate (1 = top), ties broken by the fit
    places: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class JudgeTable:
    """The rows in reading order, what they are sorted by, and the reference line."""

    rows: list[JudgeRow]
    sorted_by: str
    people: R.HumanHuman | None  # people against each other, where two labelled one item
    people_longer: R.Proportion | None
    consensus_note: str | None  # why there is no consensus match, when there is none
    panel: list[R.ModelRating]
    panel_rank_groups: list[list[str]]
    models: list[str]  # panel order (else the first judge's)


def _tests(objective: dict[str, Any] | None) -> R.Proportion | None:
    """Agreement with executed tests: picks of the passing answer among objective pairs."""
    overall = ((objective or {}).get("judge") or {}).get("overall")
    if not overall or not overall.get("n"):
        return None
    return R.Proportion(
        k=int(overall["picks_passing"]),
        n=int(overall["n"]),
        rate=overall.get("rate"),
        low=overall.get("low"),
        high=overall.get("high"),
    )


def judge_table(results: R.Results) -> JudgeTable:
    """Rows for every judge of a run, sorted by agreement with people where every judge has
    labels to compare with, else by consensus match where there is one, else as listed."""
    panel = results.judge_panel
    standings = {s.judge: s for s in panel.standings} if panel else {}
    costs = {c.who: c for c in results.cost if c.role == "judge"}
    rows = []
    for number, block in enumerate(results.judge_blocks, start=1):
        cal, diag = block.calibration, block.diagnostics
        standing = standings.get(block.judge)
        cost = costs.get(block.judge)
        calls = cost.calls if cost else 0
        per_1000 = (
            None
            if cost is None or cost.cost_usd is None or not calls
            else 1000.0 * cost.cost_usd / calls
        )
        rows.append(
            JudgeRow(
                number=number,
                judge=block.judge,
                people=cal.agreement if cal.status == "calibrated" else None,
                kappa=cal.kappa if cal.status == "calibrated" else None,
                tests=_tests(cal.objective),
                consensus=standing.consensus_match if standing else None,
                consistency=standing.consistency if standing else None,
                flip_rate=diag.flip_rate,
                first_shown=diag.positional.share_first,
                longer=standing.length_preference if standing else None,
                failures=sum(diag.failures_by_reason.values()),
                calls=calls,
                cost_per_1000=per_1000,
                median_latency_s=cost.median_latency_s if cost else None,
                places={r.model: k for k, r in enumerate(block.ratings, start=1)},
            )
        )
    sorted_by = "the order the run lists its judges"
    if rows and all(r.people is not None and r.people.rate is not None for r in rows):
        rows.sort(key=lambda r: -(r.people.rate or 0.0) if r.people else 0.0)
        sorted_by = "agreement with people"
    elif rows and all(r.consensus is not None and r.consensus.estimate is not None for r in rows):
        rows.sort(key=lambda r: -(r.consensus.estimate or 0.0) if r.consensus else 0.0)
        sorted_by = "consensus match"
    people = next(
        (b.calibration.human_human for b in results.judge_blocks if b.calibration.human_human),
        None,
    )
    needed = panel.judges_needed if panel else 3
    note = None
    if len(rows) < needed:
        note = f"Consensus match needs {needed} judges or more: this run has {len(rows)}" + (
            ", so it needs a third." if len(rows) == 2 else "."
        )
    ratings = list(panel.panel_ratings) if panel else []
    first = results.judge_blocks[0].ratings if results.judge_blocks else []
    return JudgeTable(
        rows=rows,
        sorted_by=sorted_by,
        people=people,
        people_longer=panel.people_length_preference if panel else None,
        consensus_note=note,
        panel=ratings,
        panel_rank_groups=list(panel.panel_rank_groups) if panel else [],
        models=[r.model for r in (ratings or first)],
    )
