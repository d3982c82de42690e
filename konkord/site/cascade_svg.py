"""What a cascade's threshold trades: the share of pairs the first pass decides against how often
people agree with it there, one point per threshold, with its 95% interval.

Moving right, the first pass decides more and the strong judge is asked less; moving up, what it
decides is more often right. Hollow points are the same rule on one order alone, so the value of
asking both orders shows as the gap between the two series.
"""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

from konkord.results.schema import Proportion, SelectiveRow
from konkord.site.svg import svg_number

WIDTH, HEIGHT = 380, 300
LEFT, TOP, RIGHT, BOTTOM = 56, 16, 16, 44


def _x(share: float) -> float:
    return LEFT + (WIDTH - LEFT - RIGHT) * min(max(share, 0.0), 1.0)


def _y(rate: float) -> float:
    return TOP + (HEIGHT - TOP - BOTTOM) * (1.0 - min(max(rate, 0.0), 1.0))


def _point(
    threshold: float, decided: Proportion, agreement: Proportion, css: str, chosen: bool
) -> list[str]:
    if decided.rate is None or agreement.rate is None:
        return []
    x, y = _x(decided.rate), _y(agreement.rate)
    tip = (
        f"accept at {threshold:.2f}: decides {100 * decided.rate:.0f}% of pairs "
        f"({decided.k} of {decided.n}); people agree on {100 * agreement.rate:.0f}% "
        f"({agreement.k} of {agreement.n})"
    )
    out = [f'<g class="{css}"><title>{escape(tip)}</title>']
    if agreement.low is not None and agreement.high is not None:
        out.append(
            f'<line x1="{svg_number(x)}" y1="{svg_number(_y(agreement.low))}" x2="{svg_number(x)}" '
            f'y2="{svg_number(_y(agreement.high))}" class="interval"/>'
        )
    out.append(f'<circle cx="{svg_number(x)}" cy="{svg_number(y)}" r="{6 if chosen else 4}" class="point"/>')
    return [*out, "</g>"]


# A threshold label's box (12px digits, "0.65"), and where it may stand around its point:
# (dx, dy) of the text's start, and its anchor. Tried in order; a label that fits nowhere is
# left out (the point's tooltip still names its threshold).
LABEL_W, LABEL_H = 30.0, 13.0
_SPOTS = (
    (7, -6, "start"), (7, 15, "start"), (-7, -6, "end"), (-7, 15, "end"),
    (7, -19, "start"), (-7, -19, "end"), (7, 28, "start"), (-7, 28, "end"),
    (-15, 4, "end"), (15, 4, "start"),
)
Box = tuple[float, float, float, float]


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def threshold_labels(points: Sequence[tuple[float, float, str]]) -> list[str]:
    """Text for each (x, y, label), placed so no two labels overlap and each stays inside the
    plot; the points come in order of importance (the chosen threshold first)."""
    placed: list[Box] = []
    out = []
    for x, y, label in points:
        for dx, dy, anchor in _SPOTS:
            left = x + dx if anchor == "start" else x + dx - LABEL_W
            box = (left, y + dy - LABEL_H + 2, left + LABEL_W, y + dy + 2)
            inside = box[0] >= LEFT and box[2] <= WIDTH - 2 and box[1] >= 0
            inside = inside and box[3] <= HEIGHT - BOTTOM
            if inside and not any(_overlaps(box, other) for other in placed):
                placed.append(box)
                out.append(
                    f'<text x="{svg_number(x + dx)}" y="{svg_number(y + dy)}" text-anchor="{anchor}" '
                    f'class="tick threshold">{escape(label)}</text>'
                )
                break
    return out


def selective_plot(rows: Sequence[SelectiveRow], accept_at: float, title: str) -> Markup:
    """Share decided (x) against agreement with people (y), one point per threshold."""
    parts = [
        f'<svg class="selective" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(
            f'<line x1="{svg_number(_x(tick))}" y1="{TOP}" x2="{svg_number(_x(tick))}" '
            f'y2="{HEIGHT - BOTTOM}" class="grid"/>'
            f'<text x="{svg_number(_x(tick))}" y="{HEIGHT - BOTTOM + 19}" text-anchor="middle" '
            f'class="tick">{tick * 100:.0f}%</text>'
            f'<line x1="{LEFT}" y1="{svg_number(_y(tick))}" x2="{WIDTH - RIGHT}" '
            f'y2="{svg_number(_y(tick))}" class="grid"/>'
            f'<text x="{LEFT - 6}" y="{svg_number(_y(tick) + 4)}" text-anchor="end" '
            f'class="tick">{tick * 100:.0f}%</text>'
        )
    parts.append(
        f'<text x="{svg_number((LEFT + WIDTH - RIGHT) / 2)}" y="{HEIGHT - 8}" text-anchor="middle" '
        'class="label">share of pairs the first pass decides</text>'
        f'<text x="14" y="{svg_number((TOP + HEIGHT - BOTTOM) / 2)}" text-anchor="middle" '
        f'class="label" transform="rotate(-90 14 {svg_number((TOP + HEIGHT - BOTTOM) / 2)})">'
        "agreement with people there</text>"
    )
    for row in rows:
        parts += _point(row.threshold, row.one_order_decided, row.one_order_agreement, "one", False)
    labels: list[tuple[float, float, str]] = []
    for row in rows:
        chosen = abs(row.threshold - accept_at) < 1e-9
        parts += _point(row.threshold, row.decided, row.agreement, "both", chosen)
        if row.decided.rate is not None and row.agreement.rate is not None:
            spot = (_x(row.decided.rate), _y(row.agreement.rate), f"{row.threshold:.2f}")
            if chosen:
                labels.insert(0, spot)
            else:
                labels.append(spot)
    parts += threshold_labels(labels)
    parts.append("</svg>")
    return Markup("".join(parts))
