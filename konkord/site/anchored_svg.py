"""The human-anchored ranking beside the judge's: two intervals per model on one axis.

For each model (in the judge's rank order) the upper line is the judge-only interval of its
win rate against the field, the lower one the interval anchored to people. A model whose two
lines part is one the judge sees differently from how people would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from markupsafe import Markup, escape

from konkord.results import AnchoredRating, Interval, ModelRating
from konkord.site.svg import LABEL_WIDTH, MARGIN, PLOT_WIDTH, _num, _pct, _short

ROW_HEIGHT = 34


def _line(iv: Interval, y: float, css: str, scale: Callable[[float], float]) -> list[str]:
    out = []
    if iv.low is not None and iv.high is not None:
        out.append(
            f'<line x1="{_num(scale(iv.low))}" y1="{_num(y)}" x2="{_num(scale(iv.high))}" '
            f'y2="{_num(y)}" class="interval {css}"/>'
        )
    if iv.estimate is not None:
        out.append(
            f'<circle cx="{_num(scale(iv.estimate))}" cy="{_num(y)}" r="4.5" class="point {css}"/>'
        )
    return out


def anchored_plot(
    judge: Sequence[ModelRating], anchored: Sequence[AnchoredRating], title: str
) -> Markup:
    """Judge-only and anchored win-rate intervals, one pair of lines per model."""
    by_model = {r.model: r for r in anchored}
    rows = [(r, by_model[r.model]) for r in judge if r.model in by_model]
    width = LABEL_WIDTH + PLOT_WIDTH + MARGIN
    height = MARGIN + ROW_HEIGHT * len(rows) + 30

    def x(value: float) -> float:
        return LABEL_WIDTH + PLOT_WIDTH * min(max(value, 0.0), 1.0)

    parts = [
        f'<svg class="forest anchored" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    axis_y = MARGIN + ROW_HEIGHT * len(rows)
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        dash = ' stroke-dasharray="4 3"' if tick == 0.5 else ""
        parts.append(
            f'<line x1="{_num(x(tick))}" y1="{MARGIN - 6}" x2="{_num(x(tick))}" y2="{axis_y}" '
            f'class="grid"{dash}/>'
            f'<text x="{_num(x(tick))}" y="{axis_y + 18}" text-anchor="middle" '
            f'class="tick">{tick * 100:.0f}%</text>'
        )
    for index, (judged, people) in enumerate(rows):
        top = MARGIN + ROW_HEIGHT * index
        band = "band-a" if index % 2 else "band-b"
        parts.append(
            f'<rect x="0" y="{_num(top)}" width="{width}" height="{ROW_HEIGHT}" class="{band}"/>'
        )
        j, p = judged.win_rate_vs_field, people.win_rate_vs_field
        summary = (
            f"{judged.model}: judge {_pct(j.estimate)} ({_pct(j.low)} to {_pct(j.high)}); "
            f"anchored to people {_pct(p.estimate)} ({_pct(p.low)} to {_pct(p.high)})"
        )
        parts.append(f'<g class="row"><title>{escape(summary)}</title>')
        parts.append(
            f'<text x="{LABEL_WIDTH - 8}" y="{_num(top + ROW_HEIGHT / 2 + 4)}" text-anchor="end" '
            f'class="label">{escape(_short(judged.model))}</text>'
        )
        parts += _line(j, top + ROW_HEIGHT * 0.32, "judge-only", x)
        parts += _line(p, top + ROW_HEIGHT * 0.68, "people", x)
        parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))
