"""The Judges page of a run (the judge table, the panel ranking, a rank-by-judge picture) and
the judges-across-runs list of the runs index. The rows come from `konkord.stages.report.judges`, the
same assembly `konkord judges` prints, so the page and the terminal cannot disagree."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup, escape

from konkord.results.judges_table import (
    PANEL,
    JudgeTable,
    judge_table,
    latency,
    money_per_1000,
    split_text,
)
from konkord.results.schema import Kappa, Proportion, Results, TaskMean
from konkord.site.formatting import justified_digits

# Distinct on white and for the common colour-vision deficiencies (Okabe-Ito), then greys.
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#000000", "#999999")


DASH = "\u2060–\u2060"  # an en dash joined to its numbers, so an interval never breaks


def _cell(main: str, detail: str = "", muted: bool = False) -> dict[str, Any]:
    """A table cell: the figure, and its interval and count in a smaller second line."""
    return {"main": main, "detail": detail, "muted": muted}


def cell_proportion(value: Proportion | None, missing: str = "n/a") -> dict[str, Any]:
    if value is None or value.rate is None:
        return _cell(missing, muted=True)
    # As on the leaderboard: 81% (74-87%), not 81.2%, when the interval spans points.
    digits = justified_digits(value.low, value.high)
    span = (
        ""
        if value.low is None or value.high is None
        else f"{100 * value.low:.{digits}f}{DASH}{100 * value.high:.{digits}f}%, "
    )
    return _cell(f"{100 * value.rate:.{digits}f}%", f"{span}{value.k} of {value.n}")


def cell_kappa(value: Kappa | None, missing: str = "n/a") -> dict[str, Any]:
    if value is None or value.value is None:
        return _cell(missing, muted=True)
    span = "" if value.low is None or value.high is None else f"{value.low:.2f} to {value.high:.2f}"
    return _cell(f"{value.value:.2f}", span)


def cell_task_mean(value: TaskMean | None, missing: str = "n/a") -> dict[str, Any]:
    if value is None or value.estimate is None:
        return _cell(missing, muted=True)
    span = (
        ""
        if value.low is None or value.high is None
        else f"{value.low:.2f}{DASH}{value.high:.2f}, "
    )
    return _cell(f"{value.estimate:.2f}", f"{span}{value.tasks} tasks")


def _num(value: float) -> str:
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _short(label: str, limit: int = 26) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def rank_by_judge(
    models: Sequence[str], columns: Sequence[tuple[str, Mapping[str, int]]], title: str
) -> Markup:
    """Each model's place (1 = top) under each column (the panel, then every judge), joined by a
    line per model: lines that cross show where judges rank models differently."""
    n = len(models)
    # As narrow as the names allow: a phone shrinks the picture to its width, and short
    # names keep its text at 10 px or more at 390 px; long ones scroll instead (class "wide").
    longest = max((len(_short(m)) for m in models), default=4)
    label_width = min(230, 34 + 7 * longest)
    column_gap, row_height, top = 50, 26, 30
    width = label_width + 16 + column_gap * max(len(columns) - 1, 0) + 24
    wide = " wide" if width > 360 else ""
    height = top + row_height * max(n, 1) + 10

    def x(k: int) -> float:
        return label_width + 16 + column_gap * k

    def y(place: int) -> float:
        return top + row_height * (place - 1) + row_height / 2

    parts = [
        f'<svg class="ranks{wide}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    for k, (name, _) in enumerate(columns):
        parts.append(
            f'<text x="{_num(x(k))}" y="{top - 12}" text-anchor="middle" class="tick">'
            f"{escape(name)}</text>"
        )
    for place in range(1, n + 1):
        parts.append(
            f'<text x="{label_width - 4}" y="{_num(y(place) + 4)}" text-anchor="end" '
            f'class="tick">{place}</text>'
        )
    first = columns[0][1] if columns else {}
    for index, model in enumerate(models):
        colour = PALETTE[index % len(PALETTE)]
        points = [(k, places[model]) for k, (_, places) in enumerate(columns) if model in places]
        tip = f"{model}: " + ", ".join(
            f"{name} {places[model]}" for name, places in columns if model in places
        )
        parts.append(f"<g><title>{escape(tip)}</title>")
        if model in first:
            parts.append(
                f'<text x="{label_width - 24}" y="{_num(y(first[model]) + 4)}" text-anchor="end" '
                f'class="label">{escape(_short(model))}</text>'
            )
        if len(points) > 1:
            path = " ".join(f"{_num(x(k))},{_num(y(p))}" for k, p in points)
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2.5" '
                'class="rank-line"/>'
            )
        for k, p in points:
            parts.append(
                f'<circle cx="{_num(x(k))}" cy="{_num(y(p))}" r="5" fill="{colour}" '
                'class="rank-point"/>'
            )
        parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))


COLUMNS = (
    ("people", "Agreement with people"),
    ("kappa", "Cohen's kappa"),
    ("tests", "Agreement with tests"),
    ("consensus", "Consensus match"),
    ("consistency", "Consistency within tasks"),
    ("flips", "Order flips"),
    ("split", "Positional split"),
    ("longer", "Longer answer won"),
    ("failures", "Failures"),
    ("cost", "Cost per 1,000 comparisons"),
    ("latency", "Median latency"),
)


def length_above_people(results: Results) -> list[dict[str, Any]]:
    """Judges whose style-controlled length coefficient exceeds people's (the difference's
    interval above 0), each with the two coefficients and their difference."""
    out = []
    for number, block in enumerate(results.judge_blocks, start=1):
        style = block.style
        if style is None or not style.length_above_people:
            continue
        length = next(c for c in style.coefficients if c.feature == "tokens")
        out.append({"label": f"J{number}", "judge": block.judge, "coefficient": length})
    return out


def judges_context(results: Results) -> dict[str, Any]:
    """What templates/judges.html shows: rows pre-formatted where a figure is not a plain
    proportion, the panel ranking with each judge's place, and the picture."""
    table: JudgeTable = judge_table(results)
    no_consensus = "needs 3 judges" if table.consensus_note else "n/a"
    rows = [
        {
            "row": row,
            "label": f"J{row.number}",
            # "sim-judge/x:a=1,b=2" -> "sim-judge/x" and "a=1, b=2", so a long name wraps
            "name": row.judge.partition(":")[0],
            "params": ", ".join(row.judge.partition(":")[2].split(",")),
            "cells": {
                "people": cell_proportion(row.people, "no labels"),
                "kappa": cell_kappa(row.kappa),
                "tests": cell_proportion(row.tests, "no tests"),
                "consensus": cell_task_mean(row.consensus, no_consensus),
                "consistency": cell_task_mean(row.consistency),
                "flips": cell_proportion(row.flip_rate),
                "split": _cell(
                    split_text(row.first_shown),
                    ""
                    if row.first_shown.rate is None
                    else f"{row.first_shown.k} of {row.first_shown.n}",
                ),
                "longer": cell_proportion(row.longer),
                "failures": _cell(str(row.failures), f"of {row.calls}"),
                "cost": _cell(money_per_1000(row)),
                "latency": _cell(latency(row)),
            },
            "by_turn": row.by_turn,
            "ranked": row.has_block,
        }
        for row in table.rows
    ]
    people = table.people
    reference = {
        "people": cell_proportion(people.agreement if people else None, "no overlap"),
        "kappa": cell_kappa(people.kappa if people else None),
        "longer": cell_proportion(table.people_longer),
    }
    columns: list[tuple[str, Mapping[str, int]]] = []
    if table.panel:
        columns.append(("panel", {r.model: k for k, r in enumerate(table.panel, start=1)}))
    columns += [(f"J{row.number}", row.places) for row in table.rows if row.has_block]
    picture = rank_by_judge(
        table.models,
        columns,
        "Each model's place under the panel (all judges pooled) and under each judge",
    )
    return {
        "length_above_people": length_above_people(results),
        "table": table,
        "rows": rows,
        "reference": reference,
        "columns": COLUMNS,
        "panel_name": PANEL,
        "picture": picture if len(columns) > 1 else None,  # one column compares nothing
    }


def _figures(name: str, calibration: Mapping[str, Any], standing: Mapping[str, Any]) -> dict[str, Any]:
    agreement = calibration.get("agreement") or {}
    kappa = calibration.get("kappa") or {}
    consensus = standing.get("consensus_match") or {}
    consistency = standing.get("consistency") or {}
    return {
        "judge": name,
        "agreement": agreement.get("rate"),
        "agreement_low": agreement.get("low"),
        "agreement_high": agreement.get("high"),
        "labels": agreement.get("n"),
        "kappa": kappa.get("value"),
        "consensus": consensus.get("estimate"),
        "consistency": consistency.get("estimate"),
    }


def judge_figures(
    blocks: Sequence[Mapping[str, Any]],
    panel: Mapping[str, Any] | None,
    routes: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Per row of one run's judges table, the figures the runs index lists, from the results
    file's JSON (raw or dumped): agreement with people, kappa, consensus match, consistency.
    A cascade is listed under its own name, its strong judge and first pass on their own
    verdicts (the same rows as `konkord.stages.judges_table`)."""
    standings = {s["judge"]: s for s in (panel or {}).get("standings", [])}
    out = []
    for block in blocks:
        cascade = block.get("cascade") or {}
        name = str(cascade.get("route") or block.get("judge"))
        standing = standings.get(block.get("judge"), {})
        out.append(_figures(name, block.get("calibration") or {}, standing))
    for route in routes:
        out.append(_figures(str(route.get("name")), route.get("calibration") or {}, {}))
    return out


def judges_across_runs(summaries: Sequence[Any]) -> list[dict[str, Any]]:
    """Every judge used on the site, with its figures per run, judges in order of first use."""
    by_judge: dict[str, list[dict[str, Any]]] = {}
    for summary in summaries:
        for figures in getattr(summary, "judge_figures", []):
            by_judge.setdefault(figures["judge"], []).append({**figures, "run": summary.run})
    return [{"judge": judge, "runs": runs} for judge, runs in by_judge.items()]
