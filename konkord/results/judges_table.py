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
    cost_per_1000: float | None  # None: a price unknown, or no cost recorded (cost_recorded)
    cost_recorded: bool
    median_latency_s: float | None
    by_turn: list[R.GroupCalibration] = field(default_factory=list)  # multi-turn tasks only
    # model -> place in this judge's ranking by point estimate (1 = top), ties broken by the fit
    places: dict[str, int] = field(default_factory=dict)
    # a cascade: the strong judge's row holds the cascade's verdicts (first pass where accepted)
    cascade_first_pass: str | None = None


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
        # Imported verdicts (MT-Bench) carry no tokens, price or time: nothing was recorded,
        # which is not the same as free.
        recorded = cost is not None and bool(
            cost.tokens_in or cost.tokens_out or cost.median_latency_s is not None
        )
        per_1000 = (
            None
            if cost is None or cost.cost_usd is None or not calls or not recorded
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
                cost_recorded=recorded,
                median_latency_s=cost.median_latency_s if cost else None,
                places={r.model: k for k, r in enumerate(block.ratings, start=1)},
                by_turn=list(cal.by_turn) if cal.status == "calibrated" else [],
                cascade_first_pass=block.cascade.first_pass if block.cascade else None,
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
    """Dollars per 1,000 judgments; "unknown" without a price, "n/a" when no cost was recorded."""
    if not row.cost_recorded:
        return "n/a"
    return "unknown" if row.cost_per_1000 is None else f"${row.cost_per_1000:.2f}"


def latency(row: JudgeRow) -> str:
    """The median seconds per call, as "1.23s"."""
    return "n/a" if row.median_latency_s is None else f"{row.median_latency_s:.2f}s"
