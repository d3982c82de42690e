"""The judge table's rows, assembled when the table is shown (by `konkord judges` and the
Judges page) from the results file: the `judge_panel` section that `report` computed, and the
judge blocks' calibration, diagnostics and cost. Reading calibration here, not copying it at
report time, keeps the table current after `konkord calibrate` rewrites those blocks.

Light on purpose (the results models only), so the site imports it without numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from konkord.results import schema as R

PANEL = "panel (all judges pooled)"


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
    cost_per_1000: float | None  # None: unknown (no recorded cost and no price in runs.json)
    median_latency_s: float | None
    by_turn: list[R.GroupCalibration] = field(default_factory=list)  # multi-turn tasks only
    # model -> place in this judge's ranking by point estimate (1 = top), ties broken by the fit
    places: dict[str, int] = field(default_factory=dict)
    # a cascade: its own row, named for what it is (`quick -> steward at 0.8`), holding the
    # cascade's verdicts (the first pass's where accepted, the strong judge's elsewhere)
    cascade_first_pass: str | None = None
    # "judge", "cascade", or a cascade's judge on its own: "strong_alone", "first_pass"
    role: str = "judge"
    note: str | None = None  # what the row is, where it is not simply a judge
    people_decided: R.Proportion | None = None  # first pass: on the pairs it decided
    has_block: bool = True  # whether the leaderboard has a ranking under this row's number
    # the block's same-family notes ("judge X shares the openai family with ..."), repeated
    # here so that a reader of the table alone meets the caveat too
    self_family: list[str] = field(default_factory=list)


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


def _per_1000(cost: R.CostLine | None) -> float | None:
    """Dollars per 1,000 calls under the one cost rule; None (unknown) where any call's cost
    is unknown, imported verdicts with no recorded cost included."""
    if cost is None or cost.cost_usd is None or not cost.calls:
        return None
    return 1000.0 * cost.cost_usd / cost.calls


def judge_table(results: R.Results) -> JudgeTable:
    """Rows for every judge of a run, sorted by agreement with people where every judge has
    labels to compare with, else by consensus match where there is one, else as listed."""
    panel = results.judge_panel
    standing_of = {s.judge: s for s in panel.standings} if panel else {}
    costs = {c.who: c for c in results.cost if c.role == "judge"}
    rows = []
    for number, block in enumerate(results.judge_blocks, start=1):
        cal, diag = block.calibration, block.diagnostics
        standing = standing_of.get(block.judge)
        name = block.cascade.route if block.cascade and block.cascade.route else block.judge
        cost = costs.get(name) or costs.get(block.judge)
        rows.append(
            JudgeRow(
                number=number,
                judge=name,
                people=cal.agreement if cal.status == "calibrated" else None,
                kappa=cal.kappa if cal.status == "calibrated" else None,
                tests=_tests(cal.objective),
                consensus=standing.consensus_match if standing else None,
                consistency=standing.consistency if standing else None,
                flip_rate=diag.flip_rate,
                first_shown=diag.positional.share_first,
                longer=standing.length_preference if standing else None,
                failures=sum(diag.failures_by_reason.values()),
                calls=cost.calls if cost else 0,
                cost_per_1000=_per_1000(cost),
                median_latency_s=cost.median_latency_s if cost else None,
                places={r.model: k for k, r in enumerate(block.ratings, start=1)},
                by_turn=list(cal.by_turn) if cal.status == "calibrated" else [],
                cascade_first_pass=block.cascade.first_pass if block.cascade else None,
                role="cascade" if block.cascade else "judge",
                self_family=[note.text for note in block.self_family],
                note=(
                    f"a cascade: first pass {block.cascade.first_pass} decided "
                    f"{block.cascade.decided_first_pass} of {block.cascade.pairs} pairs, "
                    "the strong judge the rest"
                    if block.cascade
                    else None
                ),
            )
        )
    for number, route in enumerate(results.routes, start=len(rows) + 1):
        cal = route.calibration
        cost = costs.get(route.judge)
        decided = route.calibration_decided
        rows.append(
            JudgeRow(
                number=number,
                judge=route.name,
                people=cal.agreement if cal.status == "calibrated" else None,
                kappa=cal.kappa if cal.status == "calibrated" else None,
                tests=None,
                consensus=None,
                consistency=None,
                flip_rate=route.flip_rate,
                first_shown=route.positional.share_first,
                longer=None,
                failures=route.failures,
                calls=cost.calls if cost else 0,
                cost_per_1000=_per_1000(cost),
                median_latency_s=cost.median_latency_s if cost else None,
                role=route.role,
                note=(
                    f"the strong judge of {route.cascade}, on its own verdicts only "
                    f"({route.pairs} pairs)"
                    if route.role == "strong_alone"
                    else f"the first pass of {route.cascade}: every pair it judged "
                    f"({route.pairs}); it decided {route.decided}"
                ),
                people_decided=(
                    decided.agreement if decided and decided.status == "calibrated" else None
                ),
                has_block=False,
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


# Shared by the terminal table (stages.report.judges_print) and the Judges page (site).


def split_text(p: R.Proportion) -> str:
    """The positional split as "68/32": first-shown against second-shown wins, in percent."""
    if p.rate is None:
        return "n/a"
    first = round(100 * p.rate)
    return f"{first}/{100 - first}"


def money_per_1000(row: JudgeRow) -> str:
    """Dollars per 1,000 judgments under the one cost rule; "unknown" where it is unknown."""
    return "unknown" if row.cost_per_1000 is None else f"${row.cost_per_1000:.2f}"


def latency(row: JudgeRow) -> str:
    """The median seconds per call, as "1.23s"."""
    return "n/a" if row.median_latency_s is None else f"{row.median_latency_s:.2f}s"
