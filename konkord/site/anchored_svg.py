"""The human-anchored ranking beside the judge's: two intervals per model on one axis.

For each model (in the judge's rank order) the upper line is the judge-only interval of its
win rate against the field, the lower one the interval anchored to people. A model whose two
lines part is one the judge sees differently from how people would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from markupsafe import Markup, escape

from konkord.results.schema import AnchoredRating, Interval, ModelRating
from konkord.site.svg import (
    FOREST_PAD,
    FOREST_WIDTH,
    axis_parts,
    svg_label,
    svg_number,
    svg_percent,
)

ROW_HEIGHT = 50


def _line(iv: Interval, y: float, css: str, scale: Callable[[float], float]) -> list[str]:
    out = []
    if iv.low is not None and iv.high is not None:
        out.append(
            f'<line x1="{svg_number(scale(iv.low))}" y1="{svg_number(y)}" x2="{svg_number(scale(iv.high))}" '
            f'y2="{svg_number(y)}" class="interval {css}"/>'
        )
    if iv.estimate is not None:
        out.append(
            f'<circle cx="{svg_number(scale(iv.estimate))}" cy="{svg_number(y)}" r="4.5" class="point {css}"/>'
        )
    return out


def anchored_plot(
    judge: Sequence[ModelRating], anchored: Sequence[AnchoredRating], title: str
) -> Markup:
    """Judge-only and anchored win-rate intervals, one pair of lines per model."""
    by_model = {r.model: r for r in anchored}
    rows = [(r, by_model[r.model]) for r in judge if r.model in by_model]
    # Labels stand above their two lines (as in the forest plot), so the picture stays
    # narrow and its text legible when a phone shrinks it.
    width = FOREST_WIDTH
    top = 22
    axis_y = top + ROW_HEIGHT * len(rows)
    height = axis_y + 26
    plot = width - 2 * FOREST_PAD

    def x(value: float) -> float:
        return FOREST_PAD + plot * min(max(value, 0.0), 1.0)

    parts = [
        f'<svg class="forest anchored" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    for index in range(len(rows)):
        band = "band-a" if index % 2 else "band-b"
        parts.append(
            f'<rect x="0" y="{svg_number(top + ROW_HEIGHT * index)}" width="{width}" '
            f'height="{ROW_HEIGHT}" class="{band}"/>'
        )
    parts += axis_parts(x, top, axis_y, row_height=ROW_HEIGHT)
    for index, (judged, people) in enumerate(rows):
        row_top = top + ROW_HEIGHT * index
        j, p = judged.win_rate_vs_field, people.win_rate_vs_field
        summary = (
            f"{judged.model}: judge {svg_percent(j.estimate)} ({svg_percent(j.low)} to {svg_percent(j.high)}); "
            f"anchored to people {svg_percent(p.estimate)} ({svg_percent(p.low)} to {svg_percent(p.high)})"
        )
        parts.append(f'<g class="row"><title>{escape(summary)}</title>')
        parts.append(
            f'<text x="{FOREST_PAD}" y="{svg_number(row_top + 14)}" class="label">'
            f"{escape(svg_label(judged.model, 54))}</text>"
        )
        parts += _line(j, row_top + 26, "judge-only", x)
        parts += _line(p, row_top + 40, "people", x)
        parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))
