"""The style-control block of a judge: the ranking with its taste for length and formatting
taken out, each style coefficient in words, and the same fit on people's labels beside it.

Style features are counted once per answer (`task_source.answer_features`) and kept in the results file
with the answer. For each judge, its combined verdicts (both orders, as for the plain ranking)
are refitted with the pairs' normalised style differences as covariates
(`konkord.stats.style_fit`), with the same task bootstrap, and the ranking goes through the
same floors and sign test as the plain one (`konkord.stats.rank`). People's labels, where there
are enough, get the same fit, so each coefficient of the judge stands beside people's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from konkord.configuration.runspec import RunSpec
from konkord.configuration.turns import task_clusters
from konkord.evidence.combined_columns import CombinedColumns, columns_of, index_map
from konkord.evidence.log import Record
from konkord.evidence.verdicts import CombinedVerdict
from konkord.results import schema as R
from konkord.stages.current import interval
from konkord.stages.report.freshness import ReportOptions
from konkord.stats.style_features import FEATURE_RULES, FEATURE_WORDS, FEATURES

if TYPE_CHECKING:
    from konkord.stats.ranking import Ranking
    from konkord.stats.resample import Interval
    from konkord.stats.style_boot import StyleBootstrap

# People's fit has M - 1 strengths and up to five coefficients to estimate; below this many
# labelled comparisons their intervals span most of the scale and say nothing.
MIN_PEOPLE_COMPARISONS = 40
# What each feature's sign means, for the sentence: (more of it, less of it, the unit).
_PREFERS = {
    "tokens": ("the longer answer", "the shorter answer", "length"),
    "headers": ("the answer with more headers", "the answer with fewer headers", "header count"),
    "list_items": ("the answer with more list items", "the answer with fewer list items",
                   "list-item count"),
    "bold": ("the answer with more bold text", "the answer with less bold text", "bold count"),
    "code_blocks": ("the answer with more code blocks", "the answer with fewer code blocks",
                    "code-block count"),
}
Item = tuple[str, str, str, float]  # task_id, model_a, model_b, model_a's score


@dataclass(frozen=True)
class _Fit:
    """A fitted side: the style bootstrap, its ranking, and what it rested on."""

    boot: StyleBootstrap
    ranking: Ranking
    intervals: dict[str, Interval]
    n: int


def _fit(
    spec: RunSpec,
    items: list[Item] | CombinedColumns,
    features: dict[tuple[str, str], dict[str, int]],
    active: list[str] | None,
    options: ReportOptions,
) -> tuple[_Fit | None, list[str]]:
    """Fit the style-controlled model to `items` (dropping pairs with an answer unread)."""
    from konkord import stats
    from konkord.stats.gate import gate
    from konkord.stats.style_boot import style_bootstrap
    from konkord.stats.style_features import feature_matrix, normalised_difference
    from konkord.stats.style_fit import style_data

    models = list(spec.models)
    index = {m: k for k, m in enumerate(models)}
    task_ids = [t.id for t in spec.suite.tasks]
    task_index = task_clusters(task_ids)
    # Each answer's row made once and picked per pair: a pair list has each answer 19 times
    # over at 20 models (380,000 rows built in Python at 20 models x 1,000 tasks otherwise).
    row = {key: k for k, key in enumerate(features)}
    kept = (
        _kept_items(items, row, index, task_index)
        if isinstance(items, list)
        else _kept_columns(items, row, index, task_index)
    )
    if kept is None:
        return None, []
    task_at, i, j, score, first_row, second_row = kept
    table = feature_matrix(list(features.values()))
    x = normalised_difference(table[first_row], table[second_row])
    if active is None:
        active = [name for k, name in enumerate(FEATURES) if np.any(x[:, k] != 0.0)]
    if not active:
        return None, []
    x = x[:, [FEATURES.index(name) for name in active]]
    comp = stats.comparisons(
        task_at, i, j, score, n_models=len(models), n_tasks=len(task_ids)
    )
    boot = style_bootstrap(style_data(comp, x), n_resamples=options.resamples, seed=options.seed)
    gated = gate(boot.bootstrap, comp)  # the one gate: floors and the exact sign test
    return _Fit(boot, gated.ranking, dict(gated.intervals), len(score)), active


# (task index, model_a index, model_b index, model_a's score, model_a's answer's feature row,
# model_b's) of the pairs a fit keeps
_Kept = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _kept_items(
    items: list[Item],
    row: dict[tuple[str, str], int],
    index: dict[str, int],
    task_index: dict[str, int],
) -> _Kept | None:
    """The pairs with both answers' features, between the run's models, on the suite's
    tasks; None when there is none."""
    in_suite = {task_id for task_id in {it[0] for it in items} if task_id in task_index}
    kept = [
        it for it in items
        if (it[0], it[1]) in row and (it[0], it[2]) in row
        and it[1] in index and it[2] in index and it[0] in in_suite
    ]  # fmt: skip
    if not kept:
        return None
    return (
        np.array([task_index[t] for t, _, _, _ in kept], dtype=np.int64),
        np.array([index[a] for _, a, _, _ in kept], dtype=np.int64),
        np.array([index[b] for _, _, b, _ in kept], dtype=np.int64),
        np.array([s for _, _, _, s in kept], dtype=np.float64),
        np.array([row[(t, a)] for t, a, _, _ in kept], dtype=np.int64),
        np.array([row[(t, b)] for t, _, b, _ in kept], dtype=np.int64),
    )


def _kept_columns(
    columns: CombinedColumns,
    row: dict[tuple[str, str], int],
    index: dict[str, int],
    task_index: dict[str, int],
) -> _Kept | None:
    """`_kept_items` of complete combined verdicts, read from their columns."""
    first, second = (
        columns.lookup_pairs("task", side, lambda task, model: row.get((task, model)))
        for side in ("model_a", "model_b")
    )
    i = columns.index_of("model_a", index_map(index))
    j = columns.index_of("model_b", index_map(index))
    # `[]` rather than `get`: the index answers for a conversation's turns in `[]` only
    t = columns.index_of(
        "task", lambda task: task_index[task] if task in task_index else None  # noqa: SIM401
    )
    at = np.flatnonzero((first >= 0) & (second >= 0) & (i >= 0) & (j >= 0) & (t >= 0))
    if not len(at):
        return None
    return t[at], i[at], j[at], columns.score[at], first[at], second[at]


def _side(fit: _Fit, spec: RunSpec, plain_order: list[str], who: str) -> R.StyleFitSide:
    from konkord import stats

    models = list(spec.models)
    ranking = fit.ranking
    point = fit.boot.bootstrap.point
    ivs = fit.intervals
    ewr, beta = ivs["expected_win_rate"], ivs["log_strength"]
    active = point.comparisons > 0
    order = [k for k in ranking.order.tolist() if active[k]]
    ratings = []
    for position, k in enumerate(order, start=1):
        name = models[k]
        plain = plain_order.index(name) + 1 if name in plain_order else position
        ratings.append(
            R.StyleRating(
                model=name,
                win_rate_vs_field=interval(float(point.expected_win_rate[k]),
                                           float(ewr.lower[k]), float(ewr.upper[k])),
                log_strength=interval(float(point.log_strength[k]), float(beta.lower[k]),
                                      float(beta.upper[k])),
                rank_best=int(ranking.rank_best[k]) or None,
                rank_worst=int(ranking.rank_worst[k]) or None,
                position=position,
                plain_position=plain,
                movement=plain - position,
            )
        )
    if ranking.claims:
        claims = [f"With style taken out, {text}" for text in stats.describe_claims(ranking, models)]
    else:
        claims = ["With style taken out, the data supports no ordering."]
    return R.StyleFitSide(status="fitted", comparisons=fit.n, ratings=ratings, claims=claims,
                          summary=f"{who}: {fit.n} comparisons")


def _sentence(who: str, feature: str, iv: R.Interval) -> str:
    """"This judge prefers the longer answer: +0.41 [0.30, 0.52] in log-odds per unit of
    normalised length difference", or "no clear preference" when the interval holds 0."""
    more, less, unit = _PREFERS[feature]
    assert iv.estimate is not None
    figure = f"{iv.estimate:+.2f} [{iv.low:.2f}, {iv.high:.2f}]"
    tail = f"in log-odds per unit of normalised {unit} difference"
    plural = who.lower() == "people"
    if iv.low is not None and iv.low > 0:
        return f"{who} prefer{'' if plural else 's'} {more}: {figure} {tail}"
    if iv.high is not None and iv.high < 0:
        return f"{who} prefer{'' if plural else 's'} {less}: {figure} {tail}"
    return f"{who} show{'' if plural else 's'} no clear preference for {unit}: {figure} {tail}"


def people_items(labels: Sequence[Record]) -> list[Item]:
    """People's labels as one item per labelled (task, pair): the mean score of model_a."""
    scores: dict[tuple[str, str, str], list[float]] = {}
    for rec in labels:
        key = (str(rec["task_id"]), str(rec["model_a"]), str(rec["model_b"]))
        winner = rec.get("winner")
        if winner is None:
            continue
        score = 0.5 if winner == "tie" else 1.0 if winner == key[1] else 0.0
        scores.setdefault(key, []).append(score)
    return [(t, a, b, float(np.mean(v))) for (t, a, b), v in sorted(scores.items())]


def style_block(
    spec: RunSpec,
    block: R.JudgeBlock,
    done: Sequence[CombinedVerdict],
    labels: Sequence[Record],
    features: dict[tuple[str, str], dict[str, int]],
    options: ReportOptions,
) -> R.StyleControl | None:
    """The style-control block of one judge; None when no judged pair has both answers' text
    (an imported run without answers), no pair differs in any feature (nothing to take out)
    or the run switched style control off."""
    from konkord.stats.resample import bootstrap_interval

    if not spec.style_control:
        return None
    columns = columns_of(done)
    items: list[Item] | CombinedColumns = (
        [
            (c.task_id, c.model_a, c.model_b,
             0.5 if c.winner == "tie" else 1.0 if c.winner == c.model_a else 0.0)
            for c in done
        ]
        if columns is None or not columns.complete.all()
        else columns
    )  # fmt: skip
    judge_fit, active = _fit(spec, items, features, None, options)
    if judge_fit is None:
        return None
    plain_order = [r.model for r in block.ratings]
    judge_side = _side(judge_fit, spec, plain_order, "judge")
    people_side: R.StyleFitSide | None = None
    people_fit: _Fit | None = None
    labelled = people_items(labels)
    if labelled:
        usable = [it for it in labelled
                  if (it[0], it[1]) in features and (it[0], it[2]) in features]
        if len(usable) >= MIN_PEOPLE_COMPARISONS:
            people_fit, _ = _fit(spec, usable, features, active, options)
        if people_fit is not None:
            people_side = _side(people_fit, spec, plain_order, "people")
        else:
            people_side = R.StyleFitSide(
                status="too_few_labels", comparisons=len(usable),
                min_comparisons=MIN_PEOPLE_COMPARISONS,
                summary=(
                    f"People's style coefficients need at least {MIN_PEOPLE_COMPARISONS} "
                    f"labelled comparisons with both answers' text; this run has {len(usable)}."
                ),
            )
    coefficients = []
    length_above: bool | None = None
    jb = judge_fit.boot
    j_iv = jb.coefficient_intervals()
    p_iv = None if people_fit is None else people_fit.boot.coefficient_intervals()
    for name in FEATURES:
        if name not in active:
            coefficients.append(R.StyleCoefficient(
                feature=name, description=FEATURE_WORDS[name],
                text=f"No judged pair of answers differs in {FEATURE_WORDS[name]}: not estimated.",
            ))
            continue
        k = active.index(name)
        judge_iv = interval(float(jb.style.coefficients[k]), float(j_iv.lower[k]),
                            float(j_iv.upper[k]))
        text = _sentence("This judge", name, judge_iv)
        people_iv = difference = None
        if people_fit is not None and p_iv is not None:
            pb = people_fit.boot
            people_iv = interval(float(pb.style.coefficients[k]), float(p_iv.lower[k]),
                                 float(p_iv.upper[k]))
            point = float(jb.style.coefficients[k] - pb.style.coefficients[k])
            draws = jb.coefficients[:, k] - pb.coefficients[:, k]
            diff = bootstrap_interval(np.array(point), draws, method="percentile")
            difference = interval(point, float(diff.lower), float(diff.upper))
            text += "; " + _sentence("people", name, people_iv)
            if name == "tokens":
                length_above = bool(difference.low is not None and difference.low > 0)
        coefficients.append(R.StyleCoefficient(
            feature=name, description=FEATURE_WORDS[name], judge=judge_iv, people=people_iv,
            difference=difference, text=text + ".",
        ))
    moved = [r for r in judge_side.ratings if r.movement]
    summary = (
        "Taking style out changes no model's place."
        if not moved
        else "Taking style out moves "
        + ", ".join(f"{r.model} {'up' if r.movement > 0 else 'down'} {abs(r.movement)}"
                    for r in moved) + "."
    )
    if length_above:
        summary += " This judge rewards length more than people do."
    return R.StyleControl(
        features=active,
        feature_rules=[FEATURE_RULES[name] for name in FEATURES],
        judge=judge_side,
        people=people_side,
        coefficients=coefficients,
        length_above_people=length_above,
        summary=summary,
        method=(
            "Bradley-Terry with style covariates: P(a beats b) = sigmoid(beta_a - beta_b + "
            "sum_k gamma_k x_k), x_k = (a_k - b_k) / (a_k + b_k) for each feature (0 when both "
            "are 0); ties half a win, both orders combined as for the plain ranking, the same "
            "prior on strengths and on each coefficient; win rates are against the field with "
            f"every style difference at 0. Task bootstrap, {options.resamples} resamples ("
            + ("the plain ranking's own: the two differ by the covariates alone"
               if options.unit == "task" else
               "of tasks, where the plain ranking here resamples single judgments")
            + "), expanded BCa; the judge-minus-people difference is a percentile interval of the "
            "two bootstraps' draws taken as independent (they resample different comparisons)."
        ),
        resamples=options.resamples,
        converged=int(jb.bootstrap.n_converged),
    )
