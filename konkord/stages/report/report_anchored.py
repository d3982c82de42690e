"""The human-anchored ranking of one judge: its verdicts on every pair, corrected by people's
labels on a random sample (prediction-powered Bradley-Terry, `konkord.stats.ppi`).

The judge-only ranking says what the judge would say with endless tasks; this one says what
people would say, and its interval covers people's ranking even when the judge is biased.
The labels-only ranking is shown beside it, so a reader sees what the judge adds: the
effective number of labels is how many labels alone would give the same precision.

Inclusion probabilities: labels record the chance the seeded labelling queue drew them
(`konkord.stages.label.design`). The report recomputes them for how far the queue actually got
(people stop when they like), from the recorded seed or the run's label plan; labels with no
queue behind them (imported ones) are taken as a simple random sample of the judged pairs,
and the results file says which.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from konkord.configuration.runspec import RunSpec
from konkord.configuration.turns import task_clusters
from konkord.evidence.log import Record
from konkord.evidence.verdicts import CombinedVerdict
from konkord.results import schema as R
from konkord.stages.current import interval
from konkord.stats.bt import Comparisons
from konkord.stats.ppi import AnchoredData
from konkord.stats.resample import Bootstrap

MIN_LABELS = 30


@dataclass(frozen=True)
class _Labelled:
    task_id: str
    model_a: str
    model_b: str
    score_a: float  # people's mean score for model_a
    seeds: frozenset[int]
    sources: frozenset[str]


def _labelled_comparisons(labels: Sequence[Record]) -> list[_Labelled]:
    """One entry per labelled (task, model_a, model_b): people's mean score for model_a."""
    scores: dict[tuple[str, str, str], list[float]] = {}
    seeds: dict[tuple[str, str, str], set[int]] = {}
    sources: dict[tuple[str, str, str], set[str]] = {}
    for rec in labels:
        key = (str(rec["task_id"]), str(rec["model_a"]), str(rec["model_b"]))
        winner = rec.get("winner")
        if winner == key[1]:
            score = 1.0
        elif winner == key[2]:
            score = 0.0
        elif winner == "tie":
            score = 0.5
        else:
            continue
        scores.setdefault(key, []).append(score)
        if rec.get("sample_seed") is not None:
            seeds.setdefault(key, set()).add(int(rec["sample_seed"]))
        sources.setdefault(key, set()).add(str(rec.get("source", "human")))
    return [
        _Labelled(*key, float(np.mean(v)), frozenset(seeds.get(key, ())),
                  frozenset(sources.get(key, ())))
        for key, v in sorted(scores.items())
    ]


def _inclusion(
    spec: RunSpec, labelled: list[_Labelled], judged: int, pool: Sequence[object] | None
) -> tuple[list[float], str, int]:
    """Inclusion probability per labelled comparison, the design's name, and skipped items."""
    from konkord.stages.label.design import inclusion_probabilities, queue_prefix
    from konkord.stages.label.sample import Comparison, stratified_order

    seeds: set[int] = set().union(*(item.seeds for item in labelled))
    imported = any("import" in item.sources for item in labelled)
    if len(seeds) == 1 and pool and not imported:
        design = "recorded"
    elif not seeds and spec.label_plan.n > 0 and pool and not imported:
        design = "label_plan"  # labels from before seeds were recorded: the plan's queue
    else:
        share = len(labelled) / max(judged, 1)
        return [min(1.0, share)] * len(labelled), "assumed_random", 0
    seed = next(iter(seeds)) if seeds else spec.label_plan.seed
    comparisons = [c for c in pool if isinstance(c, Comparison)]
    order = stratified_order(comparisons, seed)
    wanted = [Comparison(i.task_id, i.model_a, i.model_b) for i in labelled]
    reach = queue_prefix(order, wanted)
    probabilities = inclusion_probabilities(comparisons, reach)
    chosen = set(wanted)
    skipped = sum(1 for c in order[:reach] if c not in chosen)
    out = [probabilities.get(c, 0.0) for c in wanted]
    if any(p <= 0.0 for p in out):  # a label outside the queue's reach: no design holds
        share = len(labelled) / max(judged, 1)
        return [min(1.0, share)] * len(labelled), "assumed_random", 0
    return out, design, skipped


def _ratings(boot: Bootstrap, comp: Comparisons, models: list[str]) -> list[R.AnchoredRating]:
    """Models best first with win-rate intervals (the fit's jackknife t) and rank ranges,
    through the one gate (`konkord.stats.gate`: floors from the raw counts, the exact sign
    test over tasks)."""
    from konkord.stats.gate import gate

    gated = gate(boot, comp)
    ivs, ranking = gated.intervals, gated.ranking
    out = []
    for k in ranking.order.tolist():
        if not np.isfinite(ivs["expected_win_rate"].lower[k]):
            continue  # a model without comparisons has no place in this ranking
        out.append(
            R.AnchoredRating(
                model=models[k],
                win_rate_vs_field=interval(
                    float(boot.point.expected_win_rate[k]),
                    float(ivs["expected_win_rate"].lower[k]),
                    float(ivs["expected_win_rate"].upper[k]),
                ),
                log_strength=interval(
                    float(boot.point.log_strength[k]),
                    float(ivs["log_strength"].lower[k]),
                    float(ivs["log_strength"].upper[k]),
                ),
                rank_best=int(ranking.rank_best[k]) or len(models),
                rank_worst=int(ranking.rank_worst[k]) or len(models),
            )
        )
    return out


def _claims(boot: Bootstrap, comp: Comparisons, models: list[str]) -> list[str]:
    """One sentence per model that is supported above others, in rank order (gated)."""
    from konkord.stats.gate import gate

    ranking = gate(boot, comp).ranking
    below: dict[int, list[str]] = {}
    for claim in ranking.claims:
        below.setdefault(claim.upper, []).append(models[claim.lower])
    return [
        f"Anchored to people, {models[k]} ranks above {', '.join(below[k])}."
        for k in ranking.order.tolist()
        if k in below
    ]


def _disagreements(
    judge: R.JudgeBlock, anchored: Bootstrap, comp: Comparisons, models: list[str]
) -> list[str]:
    """Where the judge-only ranking and the anchored one part: pairs put in the other order,
    and orderings the judge's data supports but the anchored ranking does not (both gated)."""
    from konkord.stats.gate import gate

    ranking = gate(anchored, comp).ranking
    diffs = ranking.differences
    index = {m: k for k, m in enumerate(models)}
    out = []
    for pair in judge.pairwise:
        if pair.model_i not in index or pair.model_j not in index:
            continue
        upper, lower = pair.model_i, pair.model_j  # the judge's order
        a, b = index[upper], index[lower]
        if diffs.estimate[a, b] < 0:
            strength = "significantly" if ranking.supported[b, a] else "though not significantly"
            out.append(
                f"The judge ranks {upper} above {lower}; anchored to people, {lower} is "
                f"above {upper} ({strength})."
            )
        elif pair.separated and not ranking.supported[a, b]:
            out.append(
                f"The judge's data separates {upper} above {lower}; anchored to people, "
                "the difference is not significant."
            )
    return out


def _holdout(
    judge: R.JudgeBlock,
    half: Bootstrap,
    all_labels: Bootstrap,
    models: list[str],
    used: int,
    total: int,
    seed: int,
) -> R.AnchoredHoldout:
    """The anchored ranking from half the labels, held against the ranking from all of them."""
    half_iv = half.intervals()["expected_win_rate"]
    all_iv = all_labels.intervals()["expected_win_rate"]
    judged = {r.model: r.win_rate_vs_field for r in judge.ratings}
    rows = []
    for k, model in enumerate(models):
        truth = float(all_labels.point.expected_win_rate[k])
        anchored = interval(
            float(half.point.expected_win_rate[k]), float(half_iv.lower[k]),
            float(half_iv.upper[k]),
        )
        jv = judged.get(model, R.Interval(estimate=None))
        rows.append(
            R.HoldoutRow(
                model=model,
                all_labels=interval(truth, float(all_iv.lower[k]), float(all_iv.upper[k])),
                anchored_half=anchored,
                judge_only=jv,
                anchored_covers=bool(
                    anchored.low is not None and anchored.high is not None
                    and anchored.low <= truth <= anchored.high
                ),
                judge_covers=bool(
                    jv.low is not None and jv.high is not None and jv.low <= truth <= jv.high
                ),
            )
        )
    rows.sort(key=lambda r: -(r.all_labels.estimate or 0.0))
    hits = sum(r.anchored_covers for r in rows)
    judge_hits = sum(r.judge_covers for r in rows)
    summary = (
        f"Held out: from the judge's verdicts and a random half of the labels ({used} of "
        f"{total}), the anchored interval holds the win rate that all {total} labels give for "
        f"{hits} of {len(rows)} models; the judge-only interval holds it for {judge_hits}."
    )
    return R.AnchoredHoldout(labels_used=used, labels_all=total, seed=seed, rows=rows,
                             summary=summary)


def anchored_block(
    spec: RunSpec,
    judge: R.JudgeBlock,
    done: Sequence[CombinedVerdict],
    labels: Sequence[Record],
    pool: Sequence[object] | None,
    resamples: int,
    seed: int,
) -> R.AnchoredRanking | None:
    """The anchored ranking for one judge, or None when the run has no labels at all.

    `done` are the judge's combined verdicts on pairs judged in both orders; `labels` the
    current labels; `pool` the run's comparison pool (for the queue's design), if known.
    """
    from konkord.stats.ppi import (
        anchored_bootstrap,
        anchored_data,
        effective_labels,
        win_rate_variance,
    )

    models = list(spec.models)
    model_index = {m: k for k, m in enumerate(models)}
    task_ids = [t.id for t in spec.suite.tasks]
    task_index = task_clusters(task_ids)
    judge_score = {}
    for c in done:
        if c.model_a in model_index and c.model_b in model_index and c.task_id in task_index:
            score = 0.5 if c.winner == "tie" else (1.0 if c.winner == c.model_a else 0.0)
            judge_score[(c.task_id, c.model_a, c.model_b)] = score
    labelled = [
        item for item in _labelled_comparisons(labels)
        if (item.task_id, item.model_a, item.model_b) in judge_score
    ]
    if not labels:
        return None
    if len(labelled) < MIN_LABELS:
        return R.AnchoredRanking(
            status="too_few_labels", labels=len(labelled), min_labels=MIN_LABELS,
            judged=len(judge_score),
            summary=(
                f"A ranking anchored to people needs at least {MIN_LABELS} labelled "
                f"comparisons that the judge also decided; this run has {len(labelled)}."
            ),
        )
    inclusion, design, skipped = _inclusion(spec, labelled, len(judge_score), pool)
    keys = list(judge_score)

    def pack(items: Sequence[_Labelled], probabilities: Sequence[float]) -> AnchoredData:
        return anchored_data(
            (
                [task_index[t] for t, _, _ in keys],
                [model_index[a] for _, a, _ in keys],
                [model_index[b] for _, _, b in keys],
                [judge_score[k] for k in keys],
            ),
            (
                [task_index[i.task_id] for i in items],
                [model_index[i.model_a] for i in items],
                [model_index[i.model_b] for i in items],
                [i.score_a for i in items],
            ),
            [judge_score[(i.task_id, i.model_a, i.model_b)] for i in items],
            probabilities,
            len(models),
            len(task_ids),
        )

    from konkord.stats import comparisons

    # What each ranking rests on, for the gate: the judge's outcomes (anchored), the labels.
    judged = comparisons(
        [task_index[t] for t, _, _ in keys],
        [model_index[a] for _, a, _ in keys],
        [model_index[b] for _, _, b in keys],
        [judge_score[k] for k in keys],
        n_models=len(models),
        n_tasks=len(task_ids),
    )
    people = comparisons(
        [task_index[i.task_id] for i in labelled],
        [model_index[i.model_a] for i in labelled],
        [model_index[i.model_b] for i in labelled],
        [i.score_a for i in labelled],
        n_models=len(models),
        n_tasks=len(task_ids),
    )
    data = pack(labelled, inclusion)
    anchored = anchored_bootstrap(data, n_resamples=resamples, seed=seed)
    labels_only = anchored_bootstrap(data, lam=0.0, n_resamples=resamples, seed=seed)
    n_eff = effective_labels(
        len(labelled),
        win_rate_variance(labels_only.bootstrap),
        win_rate_variance(anchored.bootstrap),
    )
    disagreements = _disagreements(judge, anchored.bootstrap, judged, models)
    worth = ""
    if np.isfinite(n_eff):
        worth = (
            f" With the judge, they are worth about {n_eff:.0f} labels alone"
            f" (the judge adds about {max(0.0, n_eff - len(labelled)):.0f})."
        )
    summary = (
        f"What people would conclude, estimated from the judge's verdicts on all "
        f"{len(judge_score)} compared pairs and {len(labelled)} labelled by people, "
        f"the labels correcting the judge's bias.{worth}"
    )
    holdout = None
    if any("import" in item.sources for item in labelled):
        half = np.random.default_rng([seed, 19]).permutation(len(labelled))[: len(labelled) // 2]
        items = [labelled[k] for k in sorted(half.tolist())]
        half_fit = anchored_bootstrap(
            pack(items, [inclusion[k] / 2 for k in sorted(half.tolist())]),
            n_resamples=resamples, seed=seed,
        )
        holdout = _holdout(judge, half_fit.bootstrap, labels_only.bootstrap, models,
                           len(items), len(labelled), seed)
    return R.AnchoredRanking(
        holdout=holdout,
        status="anchored",
        labels=len(labelled),
        min_labels=MIN_LABELS,
        judged=len(judge_score),
        design=design,  # type: ignore[arg-type]
        selected_not_labelled=skipped,
        lam=round(anchored.lam, 4),
        effective_labels=round(n_eff, 1) if np.isfinite(n_eff) else None,
        clipped_pair_scores=anchored.clipped_pair_scores,
        clipped_resamples=anchored.clipped_resamples,
        resamples=anchored.resamples,
        ratings=_ratings(anchored.bootstrap, judged, models),
        labels_only=_ratings(labels_only.bootstrap, people, models),
        claims=_claims(anchored.bootstrap, judged, models),
        disagreements=disagreements,
        summary=summary,
        method=(
            f"prediction-powered Bradley-Terry (PPI++, power tuning lambda = {anchored.lam:.2f}),"
            f" {anchored.bootstrap.interval_method} intervals (each task left out in turn,"
            " t with tasks - 1 degrees of freedom, win rates on the log-odds scale) and a task"
            f" bootstrap of {resamples} resamples; labels weighted by 1 / inclusion probability"
            f" ({design.replace('_', ' ')})"
        ),
    )
