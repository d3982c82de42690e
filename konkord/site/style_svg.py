"""The style coefficients of a judge beside people's: two intervals per feature on one axis.

Each row is a style feature; the upper line is the judge's coefficient with its 95% interval,
the lower one people's (where there are enough labels). The axis is log-odds per unit of
normalised difference, centred on 0 (no preference): right of it, the answer with more of
the feature is preferred. A judge line right of people's is a taste people do not share.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from markupsafe import Markup, escape

from konkord.results.schema import Interval, StyleCoefficient
from konkord.site.svg import FOREST_PAD, FOREST_WIDTH, LABEL_STRIP

ROW_HEIGHT = 50


def _coord(value: float) -> str:
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _figure(iv: Interval | None) -> str:
    if iv is None or iv.estimate is None:
        return "not estimated"
    return f"{iv.estimate:+.2f} ({iv.low:.2f} to {iv.high:.2f})"


def _line(iv: Interval | None, y: float, css: str, x: Callable[[float], float]) -> list[str]:
    if iv is None or iv.estimate is None:
        return []
    out = []
    if iv.low is not None and iv.high is not None:
        out.append(
            f'<line x1="{_coord(x(iv.low))}" y1="{_coord(y)}" x2="{_coord(x(iv.high))}" '
            f'y2="{_coord(y)}" class="interval {css}"/>'
        )
    out.append(f'<circle cx="{_coord(x(iv.estimate))}" cy="{_coord(y)}" r="4.5" '
               f'class="point {css}"/>')
    return out


def _reach(rows: Sequence[StyleCoefficient]) -> float:
    """Half the axis: the largest bound shown, at least 1, rounded up to a whole number."""
    bounds = [1.0]
    for row in rows:
        for iv in (row.judge, row.people):
            if iv is not None:
                bounds += [abs(v) for v in (iv.estimate, iv.low, iv.high) if v is not None]
    return float(min(int(max(bounds)) + 1, 20))


def style_plot(rows: Sequence[StyleCoefficient], title: str) -> Markup:
    """Judge and people coefficient intervals, one pair of lines per estimated feature
    (intervals past the axis's reach, at most 20, are cut at its edge)."""
    rows = [r for r in rows if r.judge is not None]
    width = FOREST_WIDTH
    top = 22
    axis_y = top + ROW_HEIGHT * len(rows)
    height = axis_y + 26
    reach = _reach(rows)
    plot = width - 2 * FOREST_PAD

    def x(value: float) -> float:
        return FOREST_PAD + plot * (min(max(value, -reach), reach) + reach) / (2 * reach)

    parts = [
        f'<svg class="forest style-coefficients" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    for index in range(len(rows)):
        band = "band-a" if index % 2 else "band-b"
        parts.append(f'<rect x="0" y="{_coord(top + ROW_HEIGHT * index)}" width="{width}" '
                     f'height="{ROW_HEIGHT}" class="{band}"/>')
    for tick in (-reach, -reach / 2, 0.0, reach / 2, reach):
        css = "mid" if tick == 0.0 else "grid"
        dash = ' stroke-dasharray="5 3"' if tick == 0.0 else ""
        # each line stops short of every row's label strip: no label is written over a line
        for index in range(len(rows)):
            y1, y2 = top + ROW_HEIGHT * index + LABEL_STRIP, top + ROW_HEIGHT * (index + 1)
            parts.append(
                f'<line x1="{_coord(x(tick))}" y1="{_coord(y1)}" x2="{_coord(x(tick))}" '
                f'y2="{_coord(y2)}" class="{css}"{dash}/>'
            )
        parts.append(
            f'<text x="{_coord(x(tick))}" y="{_coord(axis_y + 18)}" text-anchor="middle" '
            f'class="tick">{"0" if tick == 0.0 else f"{tick:+g}"}</text>'
        )
    parts.append(f'<text x="{_coord(x(0.0) + 4)}" y="{top - 3}" class="tick mid-label">'
                 "0: no preference</text>")
    for index, row in enumerate(rows):
        row_top = top + ROW_HEIGHT * index
        summary = (f"{row.description}: judge {_figure(row.judge)}; "
                   f"people {_figure(row.people)}")
        parts.append(f'<g class="row"><title>{escape(summary)}</title>')
        parts.append(f'<text x="{FOREST_PAD}" y="{_coord(row_top + 14)}" class="label">'
                     f"{escape(row.description)}</text>")
        parts += _line(row.judge, row_top + 26, "judge-only", x)
        parts += _line(row.people, row_top + 40, "people", x)
        parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))
