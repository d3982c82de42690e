"""The run's pair design, kept in the evidence log: which (task, pair) comparisons are owed.

`all` owes every pair. `random` owes K balanced, connected pairs per task drawn from the
design's seed; `adaptive` owes a balanced start and then, round by round, the pairs that
`konkord.stats.design.next_round` gives to unseparated neighbours. Each round (the start
included) is appended to `designs.jsonl` with its rows and, for adaptive rounds, each
neighbouring pair's status and reason, before any of its calls is made: a rerun after a kill
reads the rounds back, judges what is still owed and goes on from the last round, so it
continues the same design and pays nothing twice.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from konkord.configuration.runspec import RunSpec
from konkord.evidence.log import EvidenceLog, Record, now_iso

if TYPE_CHECKING:  # the statistics (scipy) are imported where a design is made, not by
    # every command that asks which pairs the design owes (a fixed design owes all)
    from konkord.stats import PairwiseDifferences
    from konkord.stats.design import IntArray

Pair = tuple[str, str, str]  # (task_id, model_a, model_b), model_a < model_b
STREAM = "designs"


def design_key(spec: RunSpec) -> str:
    """The design as one text, the key its rounds are recorded under."""
    return json.dumps(spec.design.as_json(), sort_keys=True)


def budget_pairs(spec: RunSpec) -> int:
    """An adaptive budget in pair judgings: each pair costs two calls per judge of the run."""
    return spec.design.budget // (2 * max(1, len(spec.judges)))


def rounds(spec: RunSpec, log: EvidenceLog) -> list[Record]:
    """The recorded rounds of the run's current design, in order."""
    key = design_key(spec)
    found = [r for r in log.latest(STREAM).values() if r.get("design") == key]
    return sorted(found, key=lambda r: int(r["round"]))


def _named(spec: RunSpec, rows: IntArray) -> list[Pair]:
    tasks = [t.id for t in spec.suite.tasks]
    out = []
    for task, i, j in rows.tolist():
        a, b = sorted((spec.models[i], spec.models[j]))
        out.append((tasks[task], a, b))
    return out


def start_design(spec: RunSpec) -> list[Pair]:
    """The first round: K pairs per task (random), or the adaptive design's balanced start."""
    from konkord.stats.design import random_design, start_pairs_per_task

    m, n_tasks = len(spec.models), len(spec.suite.tasks)
    d = spec.design
    k = (
        d.k
        if d.kind == "random"
        else start_pairs_per_task(m, n_tasks, budget_pairs(spec), d.start_share)
    )
    k = min(k, m * (m - 1) // 2)
    return _named(spec, random_design(m, n_tasks, k, d.seed))


def designed_pairs(spec: RunSpec, log: EvidenceLog) -> set[Pair] | None:
    """Every (task, pair) the design owes so far; None under `all` (every pair)."""
    if spec.design.kind == "all":
        return None
    recorded = rounds(spec, log)
    owed: set[Pair] = set()
    if not recorded or int(recorded[0]["round"]) != 0:
        owed.update(start_design(spec))
    for record in recorded:
        owed.update((str(t), str(a), str(b)) for t, a, b in record["rows"])
    return owed


def record_start(spec: RunSpec, log: EvidenceLog) -> None:
    """Record round 0 (the start) once, before any of its calls."""
    if spec.design.kind == "all" or rounds(spec, log):
        return
    log.append(
        STREAM,
        {
            "kind": "round", "design": design_key(spec), "round": 0, "label": spec.design.label,
            "rows": [list(p) for p in start_design(spec)], "pairs": [], "stop": None,
            "budget_calls": spec.design.budget or None, "created_at": now_iso(),
        },
    )  # fmt: skip


Fit = Callable[[], "tuple[np.ndarray, np.ndarray, PairwiseDifferences, float] | None"]


def choose_round(spec: RunSpec, log: EvidenceLog, fit: Fit) -> Record | None:
    """Choose, record and return the next adaptive round, or None when the design is done.

    `fit` gives the current ranking as (order, supported, difference intervals, the widening of
    its family-wise bar) from the report's fit, floors and sign test, or None when there is
    none to fit yet."""
    from konkord.stats.design import next_round

    recorded = rounds(spec, log)
    if spec.design.kind != "adaptive" or not recorded or recorded[-1].get("stop"):
        return None
    fitted = fit()
    if fitted is None:
        return None
    order, supported, differences, widen = fitted
    models = {name: k for k, name in enumerate(spec.models)}
    tasks = {t.id: k for k, t in enumerate(spec.suite.tasks)}
    m = len(spec.models)
    owed = designed_pairs(spec, log) or set()
    judged = np.zeros((len(tasks), m, m), dtype=bool)
    for task, a, b in owed:
        i, j = sorted((models[a], models[b]))
        judged[tasks[task], i, j] = True
    budget = budget_pairs(spec)
    number = int(recorded[-1]["round"]) + 1
    choice = next_round(
        order, supported, differences, judged,
        pairs_left=budget - len(owed),
        round_pairs=max(1, math.ceil(spec.design.round_share * budget)),
        seed=spec.design.seed * 100_003 + number,
        widen=widen,
    )  # fmt: skip
    record: Record = {
        "kind": "round", "design": design_key(spec), "round": number, "label": spec.design.label,
        "rows": [list(p) for p in _named(spec, choice.design)],
        "pairs": [
            {"upper": spec.models[c.upper], "lower": spec.models[c.lower], "status": c.status,
             "reason": c.reason, "tasks": c.tasks_given}
            for c in choice.pairs
        ],
        "stop": choice.stop, "budget_calls": spec.design.budget, "created_at": now_iso(),
    }  # fmt: skip
    log.append(STREAM, record)
    return None if choice.stop else record


def design_summary(spec: RunSpec, log: EvidenceLog) -> str | None:
    """One line for the judge's summary and the methodology: the design, its rounds and why
    it stopped; None under `all`."""
    if spec.design.kind == "all":
        return None
    recorded = rounds(spec, log)
    owed = designed_pairs(spec, log) or set()
    m, n_tasks = len(spec.models), len(spec.suite.tasks)
    possible = n_tasks * m * (m - 1) // 2
    line = (
        f"design {spec.design.label}: {len(owed):,} of {possible:,} task pairs "
        f"({100 * len(owed) / max(1, possible):.0f}%)"
    )
    if spec.design.kind == "adaptive":
        stop = recorded[-1].get("stop") if recorded else None
        line += f", {max(0, len(recorded) - 1)} adaptive round(s)"
        line += f"; stopped: {stop}" if stop else "; not finished"
    return line


def _known(tasks: dict[str, int], task_id: str) -> bool:
    """Whether a verdict's task id is one of the suite's tasks or a turn of one."""
    try:
        tasks[task_id]
    except KeyError:
        return False
    return True


def ranking_fit(spec: RunSpec, log: EvidenceLog, judge: str, fhash: str) -> Fit:
    """The report's fit of one judge's verdicts (task bootstrap, floors and sign test), for
    `choose_round`: None while the comparisons are not connected."""
    from konkord import stats
    from konkord.configuration.turns import task_clusters
    from konkord.evidence.verdicts import combine_verdicts, load_verdicts
    from konkord.stats.gate import gate

    def fit() -> tuple[np.ndarray, np.ndarray, PairwiseDifferences, float] | None:
        models = {name: k for k, name in enumerate(spec.models)}
        tasks = task_clusters([t.id for t in spec.suite.tasks])  # a turn counts for its task
        done = [
            c for c in combine_verdicts(load_verdicts(log, judge, fhash))
            if c.complete and c.model_a in models and c.model_b in models
            and _known(tasks, c.task_id)
        ]  # fmt: skip
        if not done:
            return None
        comp = stats.comparisons(
            [tasks[c.task_id] for c in done],
            [models[c.model_a] for c in done],
            [models[c.model_b] for c in done],
            [1.0 if c.winner == c.model_a else 0.5 if c.winner == "tie" else 0.0 for c in done],
            n_models=len(models),
            n_tasks=len(tasks),
        )
        if len(stats.connectivity(comp).components) > 1:
            return None
        ranking = gate(stats.bootstrap(comp), comp).ranking
        widen = 1.0 if ranking.family is None else ranking.family.final_factor
        return ranking.order, ranking.supported, ranking.differences, widen

    return fit


def planned_rounds_line(spec: RunSpec, judges: tuple[str, ...]) -> str | None:
    """What a dry run says of the design: the calls of each round chosen so far, what the
    later rounds may call, and the cap across them all."""
    if spec.design.kind == "all":
        return None
    log = EvidenceLog(spec.run_dir)
    owed = designed_pairs(spec, log) or set()
    per_pair = 2 * len(judges)
    if spec.design.kind == "random":
        return f"design {spec.design.label}: {len(owed) * per_pair:,} calls in one round"
    recorded = rounds(spec, log)
    sizes = [(int(r["round"]), len(r["rows"])) for r in recorded] or [(0, len(start_design(spec)))]
    chosen = "; ".join(f"round {number}: {size * per_pair:,} calls" for number, size in sizes)
    budget = spec.design.budget
    if recorded and recorded[-1].get("stop"):
        return f"design {spec.design.label}: {chosen}; stopped: {recorded[-1]['stop']}"
    round_pairs = max(1, math.ceil(spec.design.round_share * budget_pairs(spec)))
    later = math.ceil(max(0, budget_pairs(spec) - len(owed)) / round_pairs)
    return (
        f"design {spec.design.label}: {chosen}; then up to {later} round(s) of up to "
        f"{round_pairs * per_pair:,} calls each; at most {budget:,} calls across all rounds"
    )
