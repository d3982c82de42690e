"""Inline SVG plots made in Python: no JavaScript, no external files, no plotting library.

The plots read only what the results file holds (intervals, P(row above column)); every label
is escaped, because model names come from runs.json and are not ours to trust.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

ROW_HEIGHT = 26
LABEL_WIDTH = 210
PLOT_WIDTH = 380
MARGIN = 14


@dataclass(frozen=True)
class ForestRow:
    """One model's estimate and 95% interval, on a 0..1 scale (None = undefined)."""

    label: str
    estimate: float | None
    low: float | None
    high: float | None
    group: int


def svg_number(value: float) -> str:
    """Coordinates rounded to a tenth: small files, and byte-identical output across runs."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def svg_percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def svg_label(label: str, limit: int = 30) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


# The forest plot stacks each label above its interval, so the picture stays 400 units wide
# and its text stays legible when a phone shrinks it to the screen (13 units -> 11.6 px at 390).
FOREST_WIDTH = 400
FOREST_ROW = 40
FOREST_PAD = 20


LABEL_STRIP = 19  # the top of each row, where its label stands: no grid line crosses it


def axis_parts(
    x: Callable[[float], float],
    top: float,
    bottom: float,
    label_mid: bool = True,
    row_height: float | None = None,
) -> list[str]:
    """Grid lines and tick labels at 0, 25, 50, 75 and 100%; the 50% line (the field average)
    stands out. Drawn after the row bands, so no band hides a line. With `row_height`, each
    line stops short of every row's label strip, so no label is written over a line."""
    spans = [(top, bottom)]
    if row_height:
        rows = round((bottom - top) / row_height)
        spans = [
            (top + row_height * k + LABEL_STRIP, top + row_height * (k + 1)) for k in range(rows)
        ]
    parts = []
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        css = "mid" if tick == 0.5 else "grid"
        dash = ' stroke-dasharray="5 3"' if tick == 0.5 else ""
        for y1, y2 in spans:
            parts.append(
                f'<line x1="{svg_number(x(tick))}" y1="{svg_number(y1)}" x2="{svg_number(x(tick))}" '
                f'y2="{svg_number(y2)}" class="{css}"{dash}/>'
            )
        parts.append(
            f'<text x="{svg_number(x(tick))}" y="{svg_number(bottom + 18)}" text-anchor="middle" '
            f'class="tick">{tick * 100:.0f}%</text>'
        )
    if label_mid:
        parts.append(
            f'<text x="{svg_number(x(0.5) + 4)}" y="{svg_number(top - 3)}" class="tick mid-label">'
            "50%: an average opponent</text>"
        )
    return parts


def forest_plot(rows: Sequence[ForestRow], title: str) -> Markup:
    """Win rate against the field with its interval, one row per model in rank order.

    The dashed line at 50% is the field average: a model whose interval crosses it is not
    shown to differ from an average opponent.
    """
    width = FOREST_WIDTH
    top = 22
    axis_y = top + FOREST_ROW * len(rows)
    height = axis_y + 26
    plot = width - 2 * FOREST_PAD

    def x(value: float) -> float:
        return FOREST_PAD + plot * min(max(value, 0.0), 1.0)

    parts = [
        f'<svg class="forest" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    for index, row in enumerate(rows):
        band = "band-a" if row.group % 2 else "band-b"
        parts.append(
            f'<rect x="0" y="{svg_number(top + FOREST_ROW * index)}" width="{width}" '
            f'height="{FOREST_ROW}" class="{band}"/>'
        )
    parts += axis_parts(x, top, axis_y, row_height=FOREST_ROW)
    for index, row in enumerate(rows):
        y0 = top + FOREST_ROW * index
        y = y0 + 28
        summary = f"{row.label}: {svg_percent(row.estimate)} ({svg_percent(row.low)} to {svg_percent(row.high)})"
        parts.append(f'<g class="row"><title>{escape(summary)}</title>')
        parts.append(
            f'<text x="{FOREST_PAD}" y="{svg_number(y0 + 14)}" class="label">'
            f"{escape(svg_label(row.label, 54))}</text>"
        )
        if row.low is not None and row.high is not None:
            parts.append(
                f'<line x1="{svg_number(x(row.low))}" y1="{svg_number(y)}" x2="{svg_number(x(row.high))}" '
                f'y2="{svg_number(y)}" class="interval"/>'
            )
        if row.estimate is not None:
            parts.append(
                f'<circle cx="{svg_number(x(row.estimate))}" cy="{svg_number(y)}" r="5" class="point"/>'
            )
        parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))


def _cell_colour(p: float | None) -> str:
    """Blue when the row model is above, orange when below, pale near 50%."""
    if p is None:
        return "#d9d9d9"
    p = min(max(p, 0.0), 1.0)
    if p >= 0.5:
        t = (p - 0.5) * 2
        low, high = (247, 247, 247), (33, 102, 172)
    else:
        t = (0.5 - p) * 2
        low, high = (247, 247, 247), (178, 88, 24)
    rgb = tuple(round(a + (b - a) * t) for a, b in zip(low, high, strict=True))
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def heatmap(
    labels: Sequence[str],
    matrix: Sequence[Sequence[float | None]],
    title: str,
    supported: Sequence[Sequence[bool]] | None = None,
) -> Markup:
    """P(row model above column model) as a grid; columns are numbered to stay readable.
    A cell of `supported` (row above column is a claim the data supports) is outlined."""
    n = len(labels)
    cell = 44
    left = 30  # rows are numbered like the columns; the legend under the plot names them
    top = 26
    width = left + cell * n + 4
    height = top + cell * n + 4
    parts = [
        f'<svg class="heatmap" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    for j in range(n):
        parts.append(
            f'<text x="{svg_number(left + cell * j + cell / 2)}" y="{top - 8}" text-anchor="middle" '
            f'class="tick">{j + 1}</text>'
        )
    for i, row_label in enumerate(labels):
        y = top + cell * i
        parts.append(
            f'<text x="{left - 8}" y="{svg_number(y + cell / 2 + 4)}" text-anchor="end" '
            f'class="label">{i + 1}</text>'
        )
        for j in range(n):
            p = matrix[i][j] if i < len(matrix) and j < len(matrix[i]) else None
            if i == j:
                p = None
            colour = _cell_colour(p)
            text_class = "cell-dark" if p is not None and abs(p - 0.5) > 0.3 else "cell-light"
            shown = "" if i == j else svg_percent(p)
            marked = bool(supported and i != j and supported[i][j])
            tip = (
                f"P({row_label} above {labels[j]}) = {svg_percent(p)}"
                + ("; supported ordering" if marked else "")
                if i != j
                else f"{row_label} (itself)"
            )
            outline = ' stroke="#111" stroke-width="2.5"' if marked else ""
            parts.append(
                f"<g><title>{escape(tip)}</title>"
                f'<rect x="{left + cell * j}" y="{y}" width="{cell - 2}" height="{cell - 2}" '
                f'fill="{colour}"{outline}/>'
                f'<text x="{svg_number(left + cell * j + cell / 2 - 1)}" y="{svg_number(y + cell / 2 + 3)}" '
                f'text-anchor="middle" class="{text_class}">{shown}</text></g>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))
