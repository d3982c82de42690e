"""The per-turn lines of a judge's block: for each turn of the suite's conversations, the raw
share of comparisons each model won, and that turn's own ranking made the way every ranking is
(Bradley-Terry, task bootstrap, the floors and the exact sign test of `stats.gate`).

A turn's verdicts are resampled by task, as the whole ranking resamples them: within one turn a
task holds one unit, so its comparisons stay together. In a suite that mixes conversations and
single-turn tasks, a single-turn task is a conversation of one turn and counts as turn 1 (the
line says how many); the MT-Bench import, whose tasks are its questions' turns ("q81-t2"), takes
the same path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from konkord.configuration.turns import conversation_turn, split_unit
from konkord.evidence.combined_columns import columns_of, distinct
from konkord.evidence.verdicts import CombinedVerdict, model_a_score
from konkord.results import schema as R
from konkord.stages.current import interval
from konkord.stages.report.freshness import ReportOptions

if TYPE_CHECKING:
    from konkord.stats.pairs import Comparisons
    from konkord.stats.ranking import Ranking


def comparisons_of(
    verdicts: list[CombinedVerdict],
    task_index: dict[str, int],
    model_index: dict[str, int],
    n_tasks: int,
) -> Comparisons:
    """The fit's comparisons of combined verdicts, one by one (where no columns hold them)."""
    from konkord import stats

    return stats.comparisons(
        [task_index[c.task_id] for c in verdicts],
        [model_index[c.model_a] for c in verdicts],
        [model_index[c.model_b] for c in verdicts],
        [model_a_score(c.winner, c.model_a) for c in verdicts],
        n_models=len(model_index),
        n_tasks=n_tasks,
    )


def above_claims(ranking: Ranking, models: list[str]) -> list[R.Claim]:
    """The supported orderings of a gated ranking, one claim per model above any other, with
    the models each names (so a caveat can find them)."""
    from konkord import stats

    # describe_claims writes one sentence per model that is above any other, in rank order;
    # the same grouping here names the models of each sentence without parsing it.
    below: dict[int, list[int]] = {}
    for claim in ranking.claims:
        below.setdefault(claim.upper, []).append(claim.lower)
    uppers = [k for k in ranking.order.tolist() if k in below]
    return [
        R.Claim(kind="above", text=text, models=[models[k]] + [models[b] for b in below[k]])
        for k, text in zip(uppers, stats.describe_claims(ranking, models), strict=False)
    ]


def turn_lines(
    models: list[str],
    done: list[CombinedVerdict],
    task_index: dict[str, int],
    options: ReportOptions,
) -> list[R.TurnLine]:
    """One line per turn: each model's share won, and the turn's gated ranking; none where no
    verdict is on a conversation's turn."""
    tasks = _task_ids(done)  # each task's turn read once, not once per verdict
    if not any(split_unit(task_id)[1] is not None for task_id in tasks):
        return []
    turn_of = {task_id: conversation_turn(task_id)[1] for task_id in tasks}
    by_turn: dict[int, list[CombinedVerdict]] = {}
    for c in done:
        by_turn.setdefault(turn_of[c.task_id], []).append(c)
    return [
        _turn_line(turn, models, verdicts, task_index, options)
        for turn, verdicts in sorted(by_turn.items())
    ]


def _turn_line(
    turn: int,
    models: list[str],
    verdicts: list[CombinedVerdict],
    task_index: dict[str, int],
    options: ReportOptions,
) -> R.TurnLine:
    won = dict.fromkeys(models, 0.0)
    played = dict.fromkeys(models, 0)
    for c in verdicts:
        score = model_a_score(c.winner, c.model_a)
        won[c.model_a] += score
        won[c.model_b] += 1.0 - score
        played[c.model_a] += 1
        played[c.model_b] += 1
    units = {c.task_id for c in verdicts}
    line = R.TurnLine(
        turn=turn,
        pairs=len(verdicts),
        win_rate={m: (won[m] / played[m] if played[m] else None) for m in models},
        tasks=len({task_index[u] for u in units}),
        single_turn_tasks=sum(1 for u in units if split_unit(u)[1] is None),
    )
    return _ranked(line, models, verdicts, task_index, options)


def _ranked(
    line: R.TurnLine,
    models: list[str],
    verdicts: list[CombinedVerdict],
    task_index: dict[str, int],
    options: ReportOptions,
) -> R.TurnLine:
    """The line with the turn's own ranking: the report's fit, bootstrap and gate."""
    from konkord import stats
    from konkord.stats.gate import gate
    from konkord.stats.ranking_text import not_separated_text

    model_index = {m: k for k, m in enumerate(models)}
    comp = comparisons_of(
        verdicts, task_index, model_index, max(task_index.values(), default=-1) + 1
    )
    present = np.bincount(np.concatenate([comp.i, comp.j]), minlength=len(models)) > 0
    parts = [p for p in stats.connectivity(comp).components if present[list(p)].any()]
    if len(parts) > 1:
        return line.model_copy(
            update={
                "note": f"no ranking for turn {line.turn}: its comparisons fall into "
                f"{len(parts)} parts that were never compared with each other"
            }
        )
    boot = stats.bootstrap(comp, n_resamples=options.resamples, seed=options.seed, mode=options.unit)
    gated = gate(boot, comp)
    share = gated.intervals["expected_win_rate"]
    ranking = gated.ranking
    ratings = [
        R.TurnRating(
            model=models[k],
            rank_best=int(ranking.rank_best[k]) or None,
            rank_worst=int(ranking.rank_worst[k]) or None,
            win_rate_vs_field=interval(
                float(boot.point.expected_win_rate[k]), float(share.lower[k]), float(share.upper[k])
            )
            if present[k]
            else R.Interval(estimate=None),
            comparisons=int(boot.point.comparisons[k]),
        )
        for k in ranking.order.tolist()
    ]
    # As the whole ranking says it: the supported orderings, then why each unordered
    # neighbour is not ordered (a wide interval, or a sign test over too few tasks); how many
    # tasks would separate them is said once, for the whole ranking.
    claims = above_claims(ranking, models)
    claims += [
        R.Claim(
            kind="not_separated",
            text=not_separated_text(upper, lower, sep, line.tasks, plan=False),
            models=[upper, lower],
        )
        for sep in ranking.separations
        for upper, lower in [(models[sep.upper], models[sep.lower])]
    ]
    return line.model_copy(update={"ratings": ratings, "claims": claims})


def _task_ids(done: list[CombinedVerdict]) -> set[str]:
    """The tasks of the verdicts: from their columns where the list has them (the verdicts
    themselves are then not made: `MadeWhenRead`)."""
    columns = columns_of(done)
    if columns is None:
        return {c.task_id for c in done}
    return {columns.values[code] for code in distinct(columns.task).tolist()}
