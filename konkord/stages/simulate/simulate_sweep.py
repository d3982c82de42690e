"""How a study's power grows with its size: separation of adjacent pairs against task counts.

`konkord simulate --sweep-runs` reruns the plan of `konkord.stages.simulate.simulate` at each task count
of a grid and plots, per adjacent pair of the true order, the share of runs that separate it.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from xml.sax.saxutils import escape

import numpy as np

from konkord.stages.simulate.simulate import (
    SEPARATION_TARGET,
    Plan,
    run_plan,
    strengths_from_spread,
    truth_of,
)
from konkord.stats.bt import FloatArray


@dataclass(frozen=True)
class Sweep:
    """Separation probability of each adjacent pair against the number of tasks."""

    tasks: tuple[int, ...]
    separated: FloatArray  # (len(tasks), adjacent pairs)
    labels: tuple[str, ...]  # "m1 > m2" per adjacent pair
    marked: int | None = None  # the study's own size, drawn as a vertical line
    needed: tuple[int | None, ...] = field(default=())


def sweep(plan: Plan, grid: tuple[int, ...], names: list[str], runs: int) -> Sweep:
    """Separation of every adjacent pair at each task count of `grid` (with `runs` runs each)."""
    small = replace(plan, runs=runs, label_budget=0, resamples=min(plan.resamples, 200))
    truth = truth_of(plan)
    rows = [run_plan(small, n).separated for n in grid]
    table = np.vstack(rows)
    labels = tuple(f"{names[a]} > {names[b]}" for a, b in itertools.pairwise(truth.order))
    needed = tuple(tasks_needed(grid, table[:, k]) for k in range(table.shape[1]))
    return Sweep(tuple(grid), table, labels, plan.n_tasks, needed)


def tasks_needed(grid: tuple[int, ...], separated: FloatArray) -> int | None:
    """The task count at which separation reaches 80%, interpolated on log tasks; None if never."""
    for k, value in enumerate(separated):
        if value >= SEPARATION_TARGET:
            if k == 0:
                return grid[0]
            lo, hi = math.log(grid[k - 1]), math.log(grid[k])
            before = float(separated[k - 1])
            share = (SEPARATION_TARGET - before) / max(1e-9, float(value) - before)
            return math.ceil(math.exp(lo + share * (hi - lo)) - 1e-9)
    return None


def gap_plan(plan: Plan, gap_logits: float) -> Plan:
    """The same study on a field evenly spaced at `gap_logits`, to price a given gap."""
    spaced = strengths_from_spread(plan.n_models, gap_logits * (plan.n_models - 1))
    return replace(plan, strength=spaced, label_budget=0)


def tasks_for_gap(plan: Plan, gap_logits: float, grid: tuple[int, ...], runs: int) -> int | None:
    """Tasks at which an adjacent pair `gap_logits` apart separates 80% of the time."""
    spaced = gap_plan(plan, gap_logits)
    names = [f"g{k}" for k in range(plan.n_models)]
    table = sweep(spaced, grid, names, runs).separated
    return tasks_needed(grid, table.mean(axis=1))


_COLOURS = (
    "#1b6ca8",
    "#d1495b",
    "#2e933c",
    "#edae49",
    "#7b2d8b",
    "#00798c",
    "#8c564b",
    "#e377c2",
    "#555555",
    "#bcbd22",
)


def sweep_svg(result: Sweep, title: str) -> str:
    """An SVG line plot: separation probability (y) against number of tasks (x, log scale)."""
    width, height = 640, 400
    left, right, top, bottom = 60, 190, 40, 50
    plot_w, plot_h = width - left - right, height - top - bottom
    lo, hi = math.log(min(result.tasks)), math.log(max(result.tasks))

    def x(tasks: float) -> float:
        return left + (math.log(tasks) - lo) / max(1e-9, hi - lo) * plot_w

    def y(prob: float) -> float:
        return top + (1.0 - prob) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<text x="{left}" y="22" font-size="14">{escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="#999"/>',
    ]
    for prob in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0):
        dash = ' stroke-dasharray="4 3"' if prob == SEPARATION_TARGET else ""
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y(prob):.1f}" y2="{y(prob):.1f}" '
            f'stroke="#ddd"{dash}/>'
            f'<text x="{left - 8}" y="{y(prob) + 4:.1f}" text-anchor="end">{prob:.0%}</text>'
        )
    for tasks in result.tasks:
        parts.append(
            f'<text x="{x(tasks):.1f}" y="{top + plot_h + 16}" text-anchor="middle">{tasks}</text>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2}" y="{height - 12}" text-anchor="middle">'
        "tasks (log scale)</text>"
        f'<text x="16" y="{top + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {top + plot_h / 2})">P(adjacent pair separated)</text>'
    )
    if result.marked:
        mx = x(result.marked)
        parts.append(
            f'<line x1="{mx:.1f}" x2="{mx:.1f}" y1="{top}" y2="{top + plot_h}" stroke="#333" '
            f'stroke-dasharray="2 3"/><text x="{mx + 3:.1f}" y="{top + 12}">this study</text>'
        )
    for k, label in enumerate(result.labels):
        colour = _COLOURS[k % len(_COLOURS)]
        points = " ".join(
            f"{x(t):.1f},{y(float(p)):.1f}"
            for t, p in zip(result.tasks, result.separated[:, k], strict=True)
        )
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>'
        )
        ly = top + 10 + 18 * k
        parts.append(
            f'<line x1="{left + plot_w + 12}" x2="{left + plot_w + 32}" y1="{ly}" y2="{ly}" '
            f'stroke="{colour}" stroke-width="2"/>'
            f'<text x="{left + plot_w + 38}" y="{ly + 4}">{escape(label)}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
