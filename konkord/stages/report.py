"""The report stage: evidence in, one versioned results file out (results/<run>.json).

Everything the site shows is computed here, once: ratings with task-bootstrap intervals, rank
groups and claims from pairwise differences, diagnostics, cost, the calibration block, and
every answer and verdict per task. The judge prompt is read back from the evidence, never
recomposed from the suite, so the site prints what actually ran.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from konkord import __version__
from konkord import results as R
from konkord.errors import KonkordError
from konkord.evidence import EvidenceLog, Record
from konkord.llm import is_offline_model
from konkord.runspec import RunSpec
from konkord.stages.run import current_answers
from konkord.verdicts import (
    CombinedVerdict,
    answer_sha,
    combine_verdicts,
    current_frame_hash,
    judges_in_log,
    load_verdicts,
)

DEFAULT_RESAMPLES = 1000
ResampleUnit = Literal["task", "judgments"]


@dataclass(frozen=True)
class ReportOptions:
    """How intervals are made; part of what a results file records about itself."""

    resamples: int = DEFAULT_RESAMPLES
    seed: int = 0
    unit: ResampleUnit = "task"


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _interval(estimate: float, low: float, high: float) -> R.Interval:
    return R.Interval(estimate=_finite(estimate), low=_finite(low), high=_finite(high))


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


def answer_shas(answers: dict[tuple[str, str], Record]) -> dict[tuple[str, str], str]:
    """(task, model) -> sha of the current good answer, to tell fresh verdicts from stale ones."""
    return {
        key: answer_sha(rec["text"])
        for key, rec in answers.items()
        if rec.get("error") is None and rec.get("text") is not None
    }


def system_prompt_for(log: EvidenceLog, frame_hash: str | None) -> str | None:
    """The exact system prompt stored under a frame hash."""
    if frame_hash is None:
        return None
    record = log.latest("prompts").get((frame_hash,))
    return None if record is None else str(record.get("system_prompt"))


def _score(winner: str | None, model_a: str) -> float:
    if winner == "tie":
        return 0.5
    return 1.0 if winner == model_a else 0.0


def _judge_block(
    spec: RunSpec,
    log: EvidenceLog,
    judge: str,
    combined: list[CombinedVerdict],
    records: list[Record],
    answers: dict[tuple[str, str], Record],
    options: ReportOptions,
) -> R.JudgeBlock:
    from konkord import stats

    models = list(spec.models)
    model_index = {m: k for k, m in enumerate(models)}
    task_ids = [t.id for t in spec.suite.tasks]
    task_index = {t: k for k, t in enumerate(task_ids)}
    done = [
        c for c in combined if c.complete and c.model_a in model_index and c.model_b in model_index
    ]
    if not done:
        raise KonkordError(
            f'run "{spec.name}": judge {judge} has no pair judged in both orders yet; '
            f"run `konkord judge --run {spec.name} --judge {judge}`"
        )
    comp = stats.comparisons(
        [task_index[c.task_id] for c in done],
        [model_index[c.model_a] for c in done],
        [model_index[c.model_b] for c in done],
        [_score(c.winner, c.model_a) for c in done],
        n_models=len(models),
        n_tasks=len(task_ids),
    )
    graph = stats.connectivity(comp)
    if not graph.connected:
        parts = "; ".join(
            "{" + ", ".join(models[i] for i in part) + "}" for part in graph.components
        )
        raise KonkordError(
            f'run "{spec.name}", judge {judge}: the comparison graph is disconnected ({parts}); '
            "models in different parts were never compared, so no common scale exists. "
            "Judge the missing pairs first"
        )
    boot = stats.bootstrap(
        comp, n_resamples=options.resamples, seed=options.seed, mode=options.unit
    )
    intervals = boot.intervals()
    ranking = stats.rank(boot)
    point = boot.point
    group_best_rank: dict[int, int] = {}
    for position, model in enumerate(ranking.order.tolist(), start=1):
        group_best_rank.setdefault(int(ranking.rank_group[model]), position)

    def iv(name: str, k: int, value: float) -> R.Interval:
        return _interval(value, float(intervals[name].lower[k]), float(intervals[name].upper[k]))

    ratings = []
    for k in ranking.order.tolist():
        group = int(ranking.rank_group[k])
        ratings.append(
            R.ModelRating(
                model=models[k],
                rank=group_best_rank[group],
                rank_group=group,
                log_strength=iv("log_strength", k, float(point.log_strength[k])),
                rating=iv("rating", k, float(point.rating[k])),
                win_rate_vs_field=iv("expected_win_rate", k, float(point.expected_win_rate[k])),
                raw_win_rate=iv("raw_win_rate", k, float(point.raw_win_rate[k])),
                comparisons=int(point.comparisons[k]),
            )
        )
    diffs = ranking.differences
    order = ranking.order.tolist()
    pairwise = []
    for pos, a in enumerate(order):
        for b in order[pos + 1 :]:
            pairwise.append(
                R.PairComparison(
                    model_i=models[a],
                    model_j=models[b],
                    diff=_interval(
                        float(diffs.estimate[a, b]),
                        float(diffs.lower[a, b]),
                        float(diffs.upper[a, b]),
                    ),
                    p_above=float(diffs.prob_above[a, b]),
                    separated=bool(diffs.lower[a, b] > 0 or diffs.upper[a, b] < 0),
                )
            )
    matrix: list[list[float | None]] = [
        [None if a == b else float(diffs.prob_above[a, b]) for b in order] for a in order
    ]
    # describe_claims writes one sentence per model that is above any other, in rank order;
    # the same grouping here names the models of each sentence without parsing it.
    below: dict[int, list[int]] = {}
    for claim in ranking.claims:
        below.setdefault(claim.upper, []).append(claim.lower)
    uppers = [k for k in ranking.order.tolist() if k in below]
    claims = [
        R.Claim(kind="above", text=text, models=[models[k]] + [models[b] for b in below[k]])
        for k, text in zip(uppers, stats.describe_claims(ranking, models), strict=False)
    ]
    for sep in ranking.separations:
        upper, lower = models[sep.upper], models[sep.lower]
        needed = sep.tasks_needed
        text = (
            f"{upper} and {lower} are not separated: the interval of their difference contains 0."
        )
        if needed is not None:
            text += (
                f" At the gap observed, about {needed} tasks would separate them "
                f"(this run has {len(task_ids)})."
            )
        claims.append(
            R.Claim(kind="not_separated", text=text, models=[upper, lower], tasks_needed=needed)
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
        bootstrap=R.BootstrapInfo(
            unit=options.unit,
            resamples=options.resamples,
            seed=options.seed,
            method=boot.interval_method,
        ),
    )


def _diagnostics(
    spec: RunSpec,
    comp: Any,
    combined: list[CombinedVerdict],
    records: list[Record],
    answers: dict[tuple[str, str], Record],
    point: Any,
    models: list[str],
    task_ids: list[str],
) -> R.Diagnostics:
    from konkord import stats

    complete = [c for c in combined if c.complete]
    flips_by_pair: dict[str, list[bool]] = {}
    flips_by_task: dict[str, list[bool]] = {}
    for c in complete:
        flips_by_pair.setdefault(f"{c.model_a} vs {c.model_b}", []).append(c.flipped)
        flips_by_task.setdefault(c.task_id, []).append(c.flipped)

    def keyed(groups: dict[str, list[bool]]) -> list[R.KeyedRate]:
        rows = [
            R.KeyedRate(key=k, proportion=proportion(sum(v), len(v))) for k, v in groups.items()
        ]
        return sorted(rows, key=lambda r: (-(r.proportion.rate or 0.0), r.key))

    first = second = ties = 0
    failures: dict[str, int] = {}
    for rec in records:
        if rec.get("kind") == "failure":
            reason = str(rec.get("reason"))
            failures[reason] = failures.get(reason, 0) + 1
            continue
        if rec.get("reconstructed"):
            # Imported combined votes carry no real order; they say nothing about position.
            continue
        pos = rec.get("position_winner")
        if pos == "1":
            first += 1
        elif pos == "2":
            second += 1
        else:
            ties += 1
    cycles = stats.cycle_rate(comp)
    consistency = stats.consistency(point.log_strength)
    n_pairs_expected = 0
    good = {k for k, rec in answers.items() if rec.get("error") is None}
    for task in task_ids:
        present = [m for m in models if (task, m) in good]
        n_pairs_expected += len(present) * (len(present) - 1) // 2
    verdicts_present = sum(1 for r in records if r.get("kind") == "verdict")
    fit = point
    return R.Diagnostics(
        flip_rate=proportion(sum(c.flipped for c in complete), len(complete)),
        flips_by_pair=keyed(flips_by_pair),
        flips_by_task=keyed(flips_by_task),
        positional=R.Positional(
            first=first, second=second, ties=ties, share_first=proportion(first, first + second)
        ),
        cycles=R.Cycles(
            cyclic=cycles.cyclic,
            decided_triples=cycles.decided,
            undecided_triples=cycles.undecided,
            rate=_finite(cycles.rate),
        ),
        connected=True,
        components=[models],
        consistency=_finite(consistency.mean),
        failures_by_reason=dict(sorted(failures.items())),
        coverage=R.Coverage(
            answers_present=len(good),
            answers_expected=len(task_ids) * len(models),
            verdicts_present=verdicts_present,
            verdicts_expected=2 * n_pairs_expected,
            incomplete_pairs=sum(1 for c in combined if not c.complete),
            failed_answers=sum(1 for rec in answers.values() if rec.get("error") is not None),
        ),
        fit=R.FitInfo(
            iterations=int(fit.iterations),
            gradient_norm=float(fit.gradient_norm),
            converged=bool(fit.converged),
        ),
    )


def _cost_line(
    who: str, role: Literal["generation", "judge"], records: Sequence[Record]
) -> R.CostLine:
    paid = [
        r for r in records if r.get("text") is not None or r.get("kind") in {"verdict", "failure"}
    ]
    unknown = sum(1 for r in paid if r.get("cost_usd") is None and r.get("tokens_out") is not None)
    known = sum(float(r["cost_usd"]) for r in paid if r.get("cost_usd") is not None)
    latencies = [float(r["latency_s"]) for r in paid if r.get("latency_s") is not None]
    return R.CostLine(
        who=who,
        role=role,
        calls=len(paid),
        tokens_in=sum(int(r.get("tokens_in") or 0) for r in paid),
        tokens_out=sum(int(r.get("tokens_out") or 0) for r in paid),
        cost_usd=None if unknown else round(known, 6),
        known_cost_usd=round(known, 6),
        unknown_price_calls=unknown,
        median_latency_s=round(statistics.median(latencies), 4) if latencies else None,
    )


def _task_views(
    spec: RunSpec,
    answers: dict[tuple[str, str], Record],
    combined_by_judge: dict[str, list[CombinedVerdict]],
    labels: list[Record],
    checks: dict[tuple[str, str, str], Record],
) -> list[R.TaskView]:
    labels_by_item: dict[tuple[str, str, str], list[R.LabelView]] = {}
    for rec in labels:
        if rec.get("winner") is None:
            continue
        key = (rec["task_id"], rec["model_a"], rec["model_b"])
        labels_by_item.setdefault(key, []).append(
            R.LabelView(labeller=str(rec["labeller"]), winner=str(rec["winner"]))
        )
    views = []
    for task in spec.suite.tasks:
        answer_views = []
        for model in spec.models:
            answer = answers.get((task.id, model))
            if answer is None:
                continue
            rec = answer
            answer_views.append(
                R.AnswerView(
                    model=model,
                    text=rec.get("text"),
                    finish_reason=rec.get("finish_reason"),
                    error=rec.get("error"),
                    tokens_out=rec.get("tokens_out"),
                    cost_usd=rec.get("cost_usd"),
                    latency_s=rec.get("latency_s"),
                    checks=[
                        R.CheckView(
                            check=check,
                            passed=bool(checks[(task.id, model, check)].get("passed")),
                            reason=checks[(task.id, model, check)].get("reason"),
                            sandbox=checks[(task.id, model, check)].get("sandbox"),
                        )
                        for check in task.checks
                        if (task.id, model, check) in checks
                    ],
                )
            )
        comparisons = []
        for judge, combined in combined_by_judge.items():
            for c in combined:
                if c.task_id != task.id:
                    continue
                orders = []
                for order in ("ab", "ba"):
                    verdict = c.orders.get(order)
                    if verdict is None:
                        continue
                    rec = verdict
                    orders.append(
                        R.OrderVerdict(
                            order=order,  # type: ignore[arg-type]
                            shown_first=c.model_a if order == "ab" else c.model_b,
                            position_winner=rec.get("position_winner"),
                            winner=rec.get("winner"),
                            rationale=rec.get("rationale"),
                            failure=None
                            if rec.get("kind") == "verdict"
                            else f"{rec.get('reason')}: {rec.get('detail') or ''}".strip(": "),
                        )
                    )
                comparisons.append(
                    R.ComparisonView(
                        judge=judge,
                        model_a=c.model_a,
                        model_b=c.model_b,
                        winner=c.winner,
                        flipped=c.flipped,
                        complete=c.complete,
                        orders=orders,
                        labels=labels_by_item.get((task.id, c.model_a, c.model_b), []),
                    )
                )
        views.append(
            R.TaskView(
                id=task.id,
                prompt=task.prompt,
                reference=task.reference,
                answers=answer_views,
                comparisons=comparisons,
            )
        )
    return views


def _current_labels(log: EvidenceLog) -> list[Record]:
    return [r for r in log.latest("labels").values() if r.get("winner") is not None]


def _current_checks(spec: RunSpec) -> dict[tuple[str, str, str], Record]:
    """Check results made on the answers the run holds now (stale ones are left out)."""
    from konkord.stages.check import current_check_results

    return current_check_results(spec)


def _objective(
    spec: RunSpec,
    checks: dict[tuple[str, str, str], Record],
    combined: list[CombinedVerdict],
    records: list[Record],
    labels: list[Record],
) -> dict[str, Any] | None:
    """The judge (and people) against executed tests, where the suite's tasks declare tests."""
    import dataclasses

    from konkord.stats.objective import objective_block

    passed = {(t, m): bool(r.get("passed")) for (t, m, c), r in checks.items() if c == "tests"}
    if not passed:
        return None
    block = objective_block(
        combined,
        passed,
        labels=[(r["task_id"], r["model_a"], r["model_b"], r["winner"]) for r in labels] or None,
        calls=[r for r in records if r.get("kind") == "verdict"],
    )
    out: dict[str, Any] = dataclasses.asdict(block)
    return out


def evidence_date(log: EvidenceLog) -> str | None:
    """The newest record's date: what the site prints, so rebuilds stay byte-identical."""
    newest = ""
    for stream in ("answers", "verdicts", "labels", "checks"):
        for rec in log.records(stream):
            newest = max(newest, str(rec.get("created_at") or ""))
    return newest[:10] or None


CalibrationHook = Callable[..., R.Calibration]


def _calibration(
    spec: RunSpec,
    log: EvidenceLog,
    judge: str,
    combined: list[CombinedVerdict],
    answers: dict[tuple[str, str], Record],
    labels: list[Record],
) -> R.Calibration:
    """The calibration block for one judge (uncalibrated, never 0% or 100%, without labels)."""
    if not labels:
        return R.Calibration(status="uncalibrated")
    try:
        from konkord.stages.calibrate import calibration_block
    except ImportError:
        return R.Calibration(status="uncalibrated")
    block: R.Calibration = calibration_block(spec, log, judge, combined, answers, labels)
    return block


EVIDENCE_STREAMS = ("answers", "verdicts", "prompts", "labels", "checks")


def inputs_digest(spec: RunSpec, options: ReportOptions = ReportOptions()) -> str:
    """A hash of everything a results file is computed from, to tell when it is stale."""
    import hashlib

    digest = hashlib.sha256()
    digest.update(f"{__version__}|{options}|{spec.models}|{spec.judges}".encode())
    digest.update(spec.suite.model_dump_json().encode())
    for stream in EVIDENCE_STREAMS:
        path = spec.run_dir / f"{stream}.jsonl"
        digest.update(stream.encode())
        if path.exists():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:24]


def build_results(spec: RunSpec, options: ReportOptions = ReportOptions()) -> R.Results:
    """Compute everything the site needs for one run."""
    log = EvidenceLog(spec.run_dir)
    if not log.exists():
        raise KonkordError(
            f'run "{spec.name}" has no evidence in {spec.run_dir}; '
            f"run `konkord run --run {spec.name}`"
        )
    answers = good_answers(spec, log)
    shas = answer_shas(answers)
    judges = list(dict.fromkeys([*spec.judges, *judges_in_log(log)]))
    if not judges:
        raise KonkordError(
            f'run "{spec.name}" has no verdicts; '
            f"run `konkord judge --run {spec.name} --judge MODEL`"
        )
    labels = _current_labels(log)
    checks = _current_checks(spec)
    blocks = []
    combined_by_judge: dict[str, list[CombinedVerdict]] = {}
    cost = [
        _cost_line(m, "generation", [r for (t, mm), r in answers.items() if mm == m])
        for m in spec.models
    ]
    for judge in judges:
        records = load_verdicts(log, judge, answer_shas=shas)
        combined = combine_verdicts(records)
        combined_by_judge[judge] = combined
        block = _judge_block(spec, log, judge, combined, records, answers, options)
        block.calibration = _calibration(spec, log, judge, combined, answers, labels)
        block.calibration.objective = _objective(spec, checks, combined, records, labels)
        blocks.append(block)
        cost.append(_cost_line(judge, "judge", records))
    suite = spec.suite
    return R.Results(
        konkord_version=__version__,
        run=spec.name,
        evidence_date=evidence_date(log),
        inputs_digest=inputs_digest(spec, options),
        simulated=all(is_offline_model(m) for m in [*spec.models, *judges]),
        suite=R.SuiteInfo(
            name=suite.name,
            path=str(spec.suite_path),
            rubric=suite.rubric,
            answer_language=suite.answer_language,
            context=suite.context,
            task_count=len(suite.tasks),
        ),
        models=list(spec.models),
        judges=judges,
        judge_blocks=blocks,
        cost=cost,
        pass_rates=_pass_rates(spec, log, answers, checks),
        tasks=_task_views(spec, answers, combined_by_judge, labels, checks),
    )


def _pass_rates(
    spec: RunSpec,
    log: EvidenceLog,
    answers: dict[tuple[str, str], Record],
    checks: dict[tuple[str, str, str], Record],
) -> list[R.PassRate]:
    """Per-model pass rates per check with task-bootstrap intervals, where checks were run."""
    if not checks:
        return []
    from konkord.stats import wilson_interval
    from konkord.stats.passrates import pass_rates

    models = list(spec.models)
    task_ids = [t.id for t in spec.suite.tasks]
    rows: list[R.PassRate] = []
    for check in sorted({str(k[2]) for k in checks}):
        outcome = np.full((len(task_ids), len(models)), np.nan)
        for t, task_id in enumerate(task_ids):
            for m, model in enumerate(models):
                rec = checks.get((task_id, model, check))
                if rec is not None and (task_id, model) in answers:
                    outcome[t, m] = 1.0 if rec.get("passed") else 0.0
        for rate in pass_rates(outcome, models, check):
            low, high = rate.low, rate.high
            if rate.n:
                # With one answer per task, the task bootstrap of a pass rate collapses to a
                # point at 0/n or n/n; the Wilson interval does not, so the wider one is shown.
                w_low, w_high = wilson_interval(rate.passed, rate.n)
                low = w_low if low is None else min(low, w_low)
                high = w_high if high is None else max(high, w_high)
            rows.append(
                R.PassRate(
                    model=rate.model,
                    check=check,
                    passed=rate.passed,
                    total=rate.n,
                    rate=R.Interval(estimate=rate.rate, low=low, high=high),
                )
            )
    return rows
