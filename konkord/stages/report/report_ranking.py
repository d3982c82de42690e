"""The ranking part of a judge's block in the results file: ratings with task-bootstrap
intervals, pairwise differences, rank groups, claims, and the diagnostics of the fit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from konkord.configuration.runspec import RunSpec
from konkord.configuration.turns import conversation_count, task_clusters
from konkord.errors import KonkordError
from konkord.evidence.combined_columns import (
    CombinedList,
    columns_of,
    dense_codes,
    distinct,
    index_map,
)
from konkord.evidence.log import EvidenceLog, Record
from konkord.evidence.verdict_rows import rows_of_one_table
from konkord.evidence.verdicts import CombinedVerdict, VerdictRecord, current_frame_hash
from konkord.results import schema as R
from konkord.stages.current import finite, interval, positional, proportion, system_prompt_for
from konkord.stages.report.freshness import ReportOptions
from konkord.stages.report.report_turns import above_claims, comparisons_of, turn_lines

DISCONNECTED_HANDLING = (
    "kept and fitted like the others: the prior (half a virtual win and loss against an "
    "average model) keeps each part's strengths finite and pulls them to the average, so such "
    "resamples widen the intervals rather than being dropped"
)


def judge_block(
    spec: RunSpec,
    log: EvidenceLog,
    judge: str,
    combined: list[CombinedVerdict],
    records: Sequence[VerdictRecord],
    answers: dict[tuple[str, str], Record],
    options: ReportOptions,
) -> R.JudgeBlock:
    from konkord import stats
    from konkord.stats.gate import gate
    from konkord.stats.ranking_text import not_separated_text

    models = list(spec.models)
    model_index = {m: k for k, m in enumerate(models)}
    task_ids = [t.id for t in spec.suite.tasks]
    task_index = task_clusters(task_ids)
    done, columns = _done(combined, model_index, task_index)
    if not done:
        raise KonkordError(
            f'run "{spec.name}": judge {judge} has no pair judged in both orders yet; '
            f"run `konkord judge --run {spec.name} --judge {judge}`"
        )
    if columns is not None:  # the same lists, from the columns
        task_at, i, j, score = columns
        comp = stats.comparisons(
            task_at, i, j, score, n_models=len(models), n_tasks=len(task_ids)
        )
    else:
        comp = comparisons_of(done, task_index, model_index, len(task_ids))
    has_comparisons = np.bincount(np.concatenate([comp.i, comp.j]), minlength=len(models)) > 0
    graph = stats.connectivity(comp)
    parts = [part for part in graph.components if has_comparisons[list(part)].any()]
    if len(parts) > 1:
        named = "; ".join("{" + ", ".join(models[i] for i in part) + "}" for part in parts)
        raise KonkordError(
            f'run "{spec.name}", judge {judge}: the comparison graph is disconnected ({named}); '
            "models in different parts were never compared, so no common scale exists. "
            "Judge the missing pairs first"
        )
    boot = stats.bootstrap(
        comp, n_resamples=options.resamples, seed=options.seed, mode=options.unit
    )
    gated = gate(boot, comp)  # the one gate: floors and the exact sign test
    intervals, ranking = gated.intervals, gated.ranking
    point = boot.point

    def iv(name: str, k: int, value: float) -> R.Interval:
        if not has_comparisons[k]:
            return R.Interval(estimate=None)
        return interval(value, float(intervals[name].lower[k]), float(intervals[name].upper[k]))

    ratings = []
    for k in ranking.order.tolist():
        best, worst = int(ranking.rank_best[k]), int(ranking.rank_worst[k])
        ratings.append(
            R.ModelRating(
                model=models[k],
                rank=best if best else len(models),
                rank_group=int(ranking.rank_group[k]),
                rank_best=best or None,
                rank_worst=worst or None,
                log_strength=iv("log_strength", k, float(point.log_strength[k])),
                rating=iv("rating", k, float(point.rating[k])),
                win_rate_vs_field=iv("expected_win_rate", k, float(point.expected_win_rate[k])),
                raw_win_rate=iv("raw_win_rate", k, float(point.raw_win_rate[k])),
                comparisons=int(point.comparisons[k]),
            )
        )
    diffs = ranking.differences
    sign = ranking.sign
    order = ranking.order.tolist()
    pairwise = []
    for pos, a in enumerate(order):
        for b in order[pos + 1 :]:
            if not (has_comparisons[a] and has_comparisons[b]):
                continue  # a model without comparisons has no difference to anyone
            pairwise.append(
                R.PairComparison(
                    model_i=models[a],
                    model_j=models[b],
                    diff=interval(
                        float(diffs.estimate[a, b]),
                        float(diffs.lower[a, b]),
                        float(diffs.upper[a, b]),
                    ),
                    p_above=float(diffs.prob_above[a, b]),
                    separated=bool(ranking.supported[a, b] or ranking.supported[b, a]),
                    interval_excludes_zero=diffs.separated(a, b),
                    family_excludes_zero=None
                    if ranking.family is None
                    else ranking.family.excludes_zero(a, b),
                    sign_test_p=None if sign is None else float(sign.p_value[a, b]),
                )
            )
    matrix: list[list[float | None]] = [
        [
            None
            if a == b or not (has_comparisons[a] and has_comparisons[b])
            else float(diffs.prob_above[a, b])
            for b in order
        ]
        for a in order
    ]
    claims = above_claims(ranking, models)
    for sep in ranking.separations:
        upper, lower = models[sep.upper], models[sep.lower]
        claims.append(
            R.Claim(
                kind="not_separated",
                text=not_separated_text(upper, lower, sep, conversation_count(task_ids)),
                models=[upper, lower],
                tasks_needed=sep.tasks_needed,
            )
        )
    return R.JudgeBlock(
        judge=judge,
        frame_hash=current_frame_hash(log, judge),
        system_prompt=system_prompt_for(log, current_frame_hash(log, judge)),
        ratings=ratings,
        pairwise=pairwise,
        p_above_matrix=matrix,
        rank_groups=[[models[k] for k in group] for group in ranking.groups],
        claims=claims,
        diagnostics=_diagnostics(spec, comp, combined, records, answers, point, models, task_ids),
        by_turn=turn_lines(models, done, task_index, options),
        design=_design_info(spec, log, done, len(task_ids)),
        bootstrap=R.BootstrapInfo(
            unit=options.unit,
            resamples=options.resamples,
            seed=options.seed,
            method=boot.interval_method,
            fits=boot.n_fits,
            converged=boot.n_converged,
            disconnected_resamples=boot.n_disconnected,
            disconnected_handling=DISCONNECTED_HANDLING,
            family_factors=[]
            if ranking.family is None
            else [step.factor for step in ranking.family.steps],
        ),
    )


def _done(
    combined: list[CombinedVerdict], model_index: dict[str, int], task_index: dict[str, int]
) -> tuple[list[CombinedVerdict], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None]:
    """The complete verdicts between the run's models, and where the list has its columns,
    the comparisons' (task index, model_a index, model_b index, model_a's score) read from
    them; None then when a task is not in the index (the pair-by-pair path says which)."""
    columns = columns_of(combined)
    if columns is None:
        done = [
            c
            for c in combined
            if c.complete and c.model_a in model_index and c.model_b in model_index
        ]
        return done, None
    i = columns.index_of("model_a", index_map(model_index))
    j = columns.index_of("model_b", index_map(model_index))
    at = np.flatnonzero(columns.complete & (i >= 0) & (j >= 0))
    assert isinstance(combined, CombinedList)
    done = combined.take(at)
    # `[]` rather than `get`: the index answers for a conversation's turns in `[]` only
    tasks = columns.take(at).index_of(
        "task", lambda task: task_index[task] if task in task_index else None  # noqa: SIM401
    )
    if (tasks < 0).any():
        return done, None
    return done, (tasks, i[at], j[at], columns.score[at])


def _design_info(
    spec: RunSpec, log: EvidenceLog, done: list[CombinedVerdict], n_tasks: int
) -> R.DesignInfo:
    """The run's pair design and how many of all possible task pairs were judged."""
    from konkord.stages.judge.design import rounds

    recorded = rounds(spec, log) if spec.design.kind == "adaptive" else []
    m = len(spec.models)
    return R.DesignInfo(
        label=spec.design.label,
        judged=_distinct_pairs(done),
        possible=n_tasks * m * (m - 1) // 2,
        rounds=max(0, len(recorded) - 1),
        stopped=recorded[-1].get("stop") if recorded else None,
    )


def _distinct_pairs(done: list[CombinedVerdict]) -> int:
    """How many distinct (task, model_a, model_b) the verdicts are on."""
    columns = columns_of(done)
    if columns is None:
        return len({(c.task_id, c.model_a, c.model_b) for c in done})
    size = len(columns.values)
    _, task_at = dense_codes(columns.task, size)
    _, a_at = dense_codes(columns.model_a, size)
    models_b, b_at = dense_codes(columns.model_b, size)
    return len(distinct((task_at * (int(a_at.max(initial=0)) + 1) + a_at) * len(models_b) + b_at))


def _flips(
    combined: list[CombinedVerdict],
) -> tuple[dict[str, list[int]], dict[str, list[int]], int, int]:
    """[flips, complete pairs] per "model_a vs model_b" and per task, in the order each key
    is first met, and the flips and complete pairs of all."""
    by_pair: dict[str, list[int]] = {}
    by_task: dict[str, list[int]] = {}
    columns = columns_of(combined)
    if columns is None:
        complete = [c for c in combined if c.complete]
        for c in complete:
            by_pair.setdefault(f"{c.model_a} vs {c.model_b}", [0, 0])
            by_task.setdefault(c.task_id, [0, 0])
            for counted in (by_pair[f"{c.model_a} vs {c.model_b}"], by_task[c.task_id]):
                counted[0] += c.flipped
                counted[1] += 1
        return by_pair, by_task, sum(c.flipped for c in complete), len(complete)
    done = columns.take(np.flatnonzero(columns.complete))
    values = done.values
    models_a, a_at = dense_codes(done.model_a, len(values))
    models_b, b_at = dense_codes(done.model_b, len(values))
    tasks, task_at = dense_codes(done.task, len(values))
    pair_keys, pair_at = dense_codes(a_at * len(models_b) + b_at, len(models_a) * len(models_b))
    width = len(models_b)
    pair_text = [
        f"{values[models_a[k // width]]} vs {values[models_b[k % width]]}"
        for k in pair_keys.tolist()
    ]
    task_text = [values[code] for code in tasks.tolist()]
    for tally, texts, inverse in ((by_pair, pair_text, pair_at), (by_task, task_text, task_at)):
        flips = np.bincount(inverse, weights=done.flipped, minlength=len(texts))
        counts = np.bincount(inverse, minlength=len(texts))
        for text, flipped, count in zip(texts, flips.tolist(), counts.tolist(), strict=True):
            found = tally.setdefault(text, [0, 0])  # the figures sort them: any order will do
            found[0] += int(flipped)
            found[1] += count
    return by_pair, by_task, int(done.flipped.sum()), len(done)


def _failures(records: Sequence[VerdictRecord]) -> tuple[dict[str, int], int]:
    """The failure records per reason, and how many records are verdicts."""
    failures: dict[str, int] = {}
    found = rows_of_one_table(records)
    if found is not None:  # the log's columns: only the failures are looked at
        table, rows = found
        kinds = table.coded["kind"][rows]
        for i in rows[kinds == table.code_of("failure")].tolist():
            reason = str(table.get(i, "reason"))
            failures[reason] = failures.get(reason, 0) + 1
        return failures, int((kinds == table.code_of("verdict")).sum())
    kinds = [r.get("kind") for r in records]
    for rec, kind in zip(records, kinds, strict=True):
        if kind == "failure":
            reason = str(rec.get("reason"))
            failures[reason] = failures.get(reason, 0) + 1
    return failures, kinds.count("verdict")


def _diagnostics(
    spec: RunSpec,
    comp: Any,
    combined: list[CombinedVerdict],
    records: Sequence[VerdictRecord],
    answers: dict[tuple[str, str], Record],
    point: Any,
    models: list[str],
    task_ids: list[str],
) -> R.Diagnostics:
    from konkord import stats

    flips_by_pair, flips_by_task, flipped, decided = _flips(combined)

    def keyed(groups: dict[str, list[int]]) -> list[R.KeyedRate]:
        rows = [R.KeyedRate(key=k, proportion=proportion(v[0], v[1])) for k, v in groups.items()]
        return sorted(rows, key=lambda r: (-(r.proportion.rate or 0.0), r.key))

    failures, verdicts_present = _failures(records)
    cycles = stats.cycle_rate(comp)
    consistency = stats.consistency_of_wins(stats.win_matrix(comp))
    n_pairs_expected = 0
    judged_ids = spec.suite.judged_ids()  # a conversation is judged turn by turn
    judged = set(judged_ids)
    answers = {k: rec for k, rec in answers.items() if k[0] in judged}
    good = {k for k, rec in answers.items() if rec.get("error") is None}
    judged_pairs: set[tuple[str, str, str]] | None = None  # made only when needed
    for task in judged_ids:
        present = [m for m in models if (task, m) in good]
        if present:
            n_pairs_expected += len(present) * (len(present) - 1) // 2
        else:
            # An imported run may hold verdicts without answers: it owes the pairs it judged.
            if judged_pairs is None:
                judged_pairs = {(c.task_id, c.model_a, c.model_b) for c in combined}
            n_pairs_expected += sum(1 for pair in judged_pairs if pair[0] == task)
    fit = point
    return R.Diagnostics(
        flip_rate=proportion(flipped, decided),
        flips_by_pair=keyed(flips_by_pair),
        flips_by_task=keyed(flips_by_task),
        positional=positional(records),
        cycles=R.Cycles(
            cyclic=cycles.cyclic,
            decided_triples=cycles.decided,
            undecided_triples=cycles.undecided,
            rate=finite(cycles.rate),
        ),
        connected=True,
        components=[models],
        consistency=finite(consistency.mean),
        failures_by_reason=dict(sorted(failures.items())),
        coverage=R.Coverage(
            answers_present=len(good),
            answers_expected=len(judged_ids) * len(models),
            verdicts_present=verdicts_present,
            verdicts_expected=2 * n_pairs_expected,
            incomplete_pairs=len(combined) - decided,
            failed_answers=sum(1 for rec in answers.values() if rec.get("error") is not None),
            truncated_answers=sum(
                1
                for rec in answers.values()
                if rec.get("error") is None and rec.get("finish_reason") == "length"
            ),
        ),
        fit=R.FitInfo(
            iterations=int(fit.iterations),
            gradient_norm=float(fit.gradient_norm),
            converged=bool(fit.converged),
        ),
    )
