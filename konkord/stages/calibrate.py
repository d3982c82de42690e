"""The calibrate stage: what the human labels say about each judge, stored in the results file.

Each human label is joined to the judge's combined verdict for the same (task, model pair), in
model terms, so a person who saw the answers in the other order is still compared fairly. One
comparison is one (judge verdict, label) pair: an item labelled by three people counts three
times, which is how published tables (MT-Bench) count. Agreement is split by whether the judge's
two orders agreed, so a judge that follows the position is told apart from one that chooses
wrongly. Without labels a judge is "uncalibrated", never 0% or 100%.

Labeller ids: `name#2`, `name#3`... are a second and third vote of the same person on the same
item (the evidence key holds one label per labeller and item, and imported data can hold more);
they count as separate comparisons but as one person in `labellers` and `per_labeller`.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from konkord import results as R
from konkord.errors import KonkordError
from konkord.evidence import EvidenceLog, Record
from konkord.runspec import RunSpec
from konkord.stages.calibrate_print import format_calibration
from konkord.stages.current import answer_shas, good_answers
from konkord.stages.methods import describe
from konkord.stats.agreement import (
    CATEGORIES,
    Agreement,
    agreement_without_ties,
    confusion_matrix,
    exact_agreement,
    kappa_bootstrap,
    length_quartiles,
    proportion,
)
from konkord.verdicts import CombinedVerdict

__all__ = [
    "calibrate_run",
    "calibration_block",
    "format_calibration",
    "labeller_person",
    "task_turn",
]

KAPPA_RESAMPLES = 1000
KAPPA_SEED = 0
TURN = re.compile(r"-t(\d+)$")


def labeller_person(labeller: str) -> str:
    """The person behind a labeller id (`expert_3#2` is expert_3's second vote on an item)."""
    return labeller.split("#", 1)[0]


def task_turn(task_id: str) -> int | None:
    """The turn of a multi-turn task id (`q81-t2` -> 2), or None for a single-turn task."""
    match = TURN.search(task_id)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class _Comparison:
    """One label set beside the judge's combined verdict on the same item."""

    task_id: str
    model_a: str
    model_b: str
    labeller: str
    human: int
    judge: int
    verdict: CombinedVerdict
    length: float | None


@dataclass(frozen=True)
class _Label:
    task_id: str
    model_a: str
    model_b: str
    labeller: str
    code: int


def _code(winner: object, model_a: str, model_b: str) -> int | None:
    if winner == model_a:
        return 0
    if winner == model_b:
        return 1
    if winner == "tie":
        return 2
    return None


def _labels(records: Iterable[Record]) -> list[_Label]:
    """Standing labels in model terms with model_a < model_b; unreadable ones are dropped."""
    out = []
    for rec in records:
        model_a, model_b = sorted((str(rec.get("model_a")), str(rec.get("model_b"))))
        code = _code(rec.get("winner"), model_a, model_b)
        if code is None:
            continue
        out.append(_Label(str(rec["task_id"]), model_a, model_b, str(rec["labeller"]), code))
    return out


def _proportion(k: int, n: int) -> R.Proportion:
    result = proportion(k, n)
    if n == 0:
        return R.Proportion(k=0, n=0, rate=None)
    return R.Proportion(k=k, n=n, rate=result.rate, low=result.low, high=result.high)


def _from_agreement(agreement: Agreement) -> R.Proportion:
    """The results-file form; task-clustered bounds with the plain Wilson ones beside them."""
    if agreement.n == 0:
        return R.Proportion(k=0, n=0, rate=None)
    if not agreement.clusters:
        return _proportion(agreement.k, agreement.n)
    return R.Proportion(
        k=agreement.k,
        n=agreement.n,
        rate=agreement.rate,
        low=_finite(agreement.low),
        high=_finite(agreement.high),
        plain_low=_finite(agreement.plain_low),
        plain_high=_finite(agreement.plain_high),
        clusters=agreement.clusters,
    )


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _kappa(x: list[int], y: list[int], clusters: list[str], exchangeable: bool = False) -> R.Kappa:
    estimate = kappa_bootstrap(
        np.array(x, dtype=np.int_),
        np.array(y, dtype=np.int_),
        clusters=np.array(clusters, dtype=object) if clusters else None,
        n_resamples=KAPPA_RESAMPLES,
        seed=KAPPA_SEED,
        exchangeable=exchangeable,
    )
    return R.Kappa(
        value=_finite(estimate.value), low=_finite(estimate.low), high=_finite(estimate.high)
    )


def _answer_length(
    answers: dict[tuple[str, str], Record], task_id: str, model_a: str, model_b: str
) -> float | None:
    texts = [answers.get((task_id, m), {}).get("text") for m in (model_a, model_b)]
    if any(not isinstance(t, str) for t in texts):
        return None
    return (len(str(texts[0])) + len(str(texts[1]))) / 2


def _human_pairs(labels: list[_Label]) -> tuple[list[int], list[int], list[str], int]:
    """Every pair of labels on the same item (published counting): codes, tasks, items shared."""
    by_item: dict[tuple[str, str, str], list[_Label]] = {}
    for label in labels:
        by_item.setdefault((label.task_id, label.model_a, label.model_b), []).append(label)
    first: list[int] = []
    second: list[int] = []
    tasks: list[str] = []
    shared = 0
    for (task_id, _, _), group in by_item.items():
        if len(group) < 2:
            continue
        shared += 1
        for one, two in itertools.combinations(sorted(group, key=lambda g: g.labeller), 2):
            first.append(one.code)
            second.append(two.code)
            tasks.append(task_id)
    return first, second, tasks, shared


def _human_human(labels: list[_Label]) -> R.HumanHuman | None:
    if len({labeller_person(label.labeller) for label in labels}) < 2:
        return None
    first, second, tasks, shared = _human_pairs(labels)
    if not first:
        return None
    return R.HumanHuman(
        agreement=_from_agreement(exact_agreement(first, second, tasks)),
        agreement_no_ties=_from_agreement(agreement_without_ties(first, second, tasks)),
        kappa=_kappa(first, second, tasks, exchangeable=True),
        shared_items=shared,
    )


Group = tuple[list[int], list[int], list[str]]
"""Human codes, judge codes and the task of each comparison in one group."""


def _keyed(groups: dict[str, Group], labels: dict[str, str] | None = None) -> list[R.KeyedRate]:
    rows = []
    for key, (x, y, tasks) in groups.items():
        rows.append(
            R.KeyedRate(
                key=key,
                label=None if labels is None else labels.get(key),
                proportion=_from_agreement(exact_agreement(x, y, tasks)),
            )
        )
    return rows


def _group(comparisons: list[_Comparison], key: Callable[[_Comparison], str]) -> dict[str, Group]:
    groups: dict[str, Group] = {}
    for c in comparisons:
        human, judge, tasks = groups.setdefault(key(c), ([], [], []))
        human.append(c.human)
        judge.append(c.judge)
        tasks.append(c.task_id)
    return groups


def _length_quartiles(comparisons: list[_Comparison]) -> list[R.KeyedRate]:
    measured = [(c, c.length) for c in comparisons if c.length is not None]
    if not measured:
        return []
    split = length_quartiles([length for _, length in measured])
    groups: dict[str, Group] = {}
    labels: dict[str, str] = {}
    for q, span in enumerate(split.ranges):
        if span is None:
            continue
        key = f"Q{q + 1}"
        labels[key] = f"mean answer length {span[0]}-{span[1]} characters"
        groups[key] = ([], [], [])
    for (c, _), q in zip(measured, split.quartile.tolist(), strict=True):
        groups[f"Q{q + 1}"][0].append(c.human)
        groups[f"Q{q + 1}"][1].append(c.judge)
        groups[f"Q{q + 1}"][2].append(c.task_id)
    return _keyed(groups, labels)


def _by_turn(comparisons: list[_Comparison], labels: list[_Label]) -> list[R.GroupCalibration]:
    turns = sorted({t for c in comparisons if (t := task_turn(c.task_id)) is not None})
    if not turns or any(task_turn(c.task_id) is None for c in comparisons):
        return []
    out = []
    for turn in turns:
        inside = [c for c in comparisons if task_turn(c.task_id) == turn]
        human = [c.human for c in inside]
        judge = [c.judge for c in inside]
        tasks = [c.task_id for c in inside]
        out.append(
            R.GroupCalibration(
                key=f"turn {turn}",
                label=f"tasks whose id ends in -t{turn}",
                agreement=_from_agreement(exact_agreement(human, judge, tasks)),
                agreement_no_ties=_from_agreement(agreement_without_ties(human, judge, tasks)),
                human_human=_human_human([x for x in labels if task_turn(x.task_id) == turn]),
            )
        )
    return out


def _verdict_text(record: Record | None) -> str | None:
    if record is None:
        return None
    if record.get("kind") != "verdict":
        return f"failure: {record.get('reason')}"
    return None if record.get("winner") is None else str(record.get("winner"))


def _rationale(record: Record | None) -> str | None:
    return None if record is None or record.get("rationale") is None else str(record["rationale"])


def _disagreement(c: _Comparison) -> R.Disagreement:
    names = (c.model_a, c.model_b, "tie")
    ab, ba = c.verdict.orders.get("ab"), c.verdict.orders.get("ba")
    return R.Disagreement(
        task_id=c.task_id,
        model_a=c.model_a,
        model_b=c.model_b,
        labeller=c.labeller,
        human=names[c.human],
        judge_combined=names[c.judge],
        flipped=c.verdict.flipped,
        judge_ab=_verdict_text(ab),
        judge_ba=_verdict_text(ba),
        rationale_ab=_rationale(ab),
        rationale_ba=_rationale(ba),
    )


def calibration_block(
    spec: RunSpec,
    log: EvidenceLog,
    judge: str,
    combined: list[CombinedVerdict],
    answers: dict[tuple[str, str], Record],
    labels: Iterable[Record],
) -> R.Calibration:
    """The calibration block of one judge: every standing label against the judge's verdict."""
    standing = _labels(labels)
    persons = sorted({labeller_person(label.labeller) for label in standing})
    verdicts = {
        (c.task_id, c.model_a, c.model_b): c
        for c in combined
        if c.complete and c.judge == judge and c.winner is not None
    }
    comparisons: list[_Comparison] = []
    for label in standing:
        verdict = verdicts.get((label.task_id, label.model_a, label.model_b))
        if verdict is None:
            continue
        judge_code = _code(verdict.winner, label.model_a, label.model_b)
        if judge_code is None:
            continue
        comparisons.append(
            _Comparison(
                label.task_id,
                label.model_a,
                label.model_b,
                label.labeller,
                label.code,
                judge_code,
                verdict,
                _answer_length(answers, label.task_id, label.model_a, label.model_b),
            )
        )
    unmatched = len(standing) - len(comparisons)
    if not comparisons:
        return R.Calibration(
            status="uncalibrated",
            labels=len(standing),
            labellers=persons,
            unmatched_labels=unmatched,
            human_human=_human_human(standing),
        )
    human = [c.human for c in comparisons]
    judged = [c.judge for c in comparisons]
    tasks = [c.task_id for c in comparisons]
    consistent = [c for c in comparisons if not c.verdict.flipped]
    flipped = [c for c in comparisons if c.verdict.flipped]
    items = {(c.task_id, c.model_a, c.model_b): c.verdict.flipped for c in comparisons}
    task_order = {t.id: k for k, t in enumerate(spec.suite.tasks)}

    def agree(group: list[_Comparison]) -> R.Proportion:
        return _from_agreement(
            exact_agreement(
                [c.human for c in group], [c.judge for c in group], [c.task_id for c in group]
            )
        )

    by_task = _keyed(
        dict(
            sorted(
                _group(comparisons, lambda c: c.task_id).items(),
                key=lambda kv: (task_order.get(kv[0], len(task_order)), kv[0]),
            )
        )
    )
    by_pair = _keyed(
        dict(sorted(_group(comparisons, lambda c: f"{c.model_a} vs {c.model_b}").items()))
    )
    per_labeller = _keyed(
        dict(sorted(_group(comparisons, lambda c: labeller_person(c.labeller)).items()))
    )
    return R.Calibration(
        status="calibrated",
        labels=len(standing),
        labellers=persons,
        unmatched_labels=unmatched,
        agreement=_from_agreement(exact_agreement(human, judged, tasks)),
        kappa=_kappa(human, judged, tasks),
        confusion=R.Confusion(
            categories=list(CATEGORIES),
            matrix=confusion_matrix(human, judged).tolist(),
        ),
        agreement_no_ties=_from_agreement(agreement_without_ties(human, judged, tasks)),
        agreement_consistent=agree(consistent),
        agreement_flipped=agree(flipped),
        flip_rate=_proportion(sum(items.values()), len(items)),
        by_task=by_task,
        by_pair=by_pair,
        by_length_quartile=_length_quartiles(comparisons),
        per_labeller=per_labeller,
        by_turn=_by_turn(comparisons, standing),
        human_human=_human_human(standing),
        disagreements=[_disagreement(c) for c in comparisons if c.human != c.judge],
    )


def calibrate_run(
    spec: RunSpec, judge: str | None = None, echo: Callable[[str], None] = print
) -> dict[str, R.Calibration]:
    """Recompute the calibration blocks of a run's results file from its labels, and print them.

    The rest of the file (ratings, diagnostics, the objective block) is left as `report` wrote it.
    """
    from konkord.label.labels import current_labels
    from konkord.results import read_results, write_results
    from konkord.stages.cascade_print import format_cascade
    from konkord.stages.cascade_report import cascade_block
    from konkord.stages.cascade_view import cascade_of, final_records
    from konkord.verdicts import combine_verdicts, load_verdicts

    path = spec.results_path
    if not path.exists():
        raise KonkordError(
            f'run "{spec.name}" has no results file at {path}; '
            f"run `konkord report --run {spec.name}` first"
        )
    results = read_results(path)
    judges = [b.judge for b in results.judge_blocks]
    if judge is not None and judge not in judges:
        raise KonkordError(
            f'{path}: no block for judge "{judge}" (judges: {", ".join(judges) or "none"}); '
            f"judge with it and run `konkord report --run {spec.name}` first"
        )
    log = EvidenceLog(spec.run_dir)
    answers = good_answers(spec, log)
    shas = answer_shas(answers)
    labels = list(current_labels(log).values())
    out: dict[str, R.Calibration] = {}
    for block in results.judge_blocks:
        if judge is not None and block.judge != judge:
            continue
        records = load_verdicts(log, block.judge, answer_shas=shas)
        cascade = cascade_of(spec, log, block.judge, shas)
        if cascade is not None:  # the block ranks the cascade's verdicts: calibrate those
            records = final_records(cascade)
            block.cascade = cascade_block(cascade, labels, spec.prices)
        combined = combine_verdicts(records)
        calibration = calibration_block(spec, log, block.judge, combined, answers, labels)
        calibration.objective = block.calibration.objective
        block.calibration = calibration
        describe(block, results.suite.task_count)
        out[block.judge] = calibration
        for line in format_calibration(block.judge, calibration):
            echo(line)
        for line in format_cascade(block.cascade) if block.cascade is not None else []:
            echo(line)
    write_results(results, path)
    echo(f"updated {path}")
    return out
