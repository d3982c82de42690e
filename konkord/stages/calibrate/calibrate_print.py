"""The terminal view of a calibration block: agreement, kappa and their intervals in a few lines."""

from __future__ import annotations

from konkord.results import schema as R


def _percent(p: R.Proportion | None, digits: int = 1) -> str:
    if p is None or p.rate is None:
        return "undefined (no comparisons)"
    text = f"{100 * p.rate:.{digits}f}% ({p.k} of {p.n}"
    if p.low is not None and p.high is not None:
        text += f", 95% CI {100 * p.low:.{digits}f}% to {100 * p.high:.{digits}f}%"
    plain = (p.plain_low, p.plain_high)
    if (
        p.clusters
        and p.plain_low is not None
        and p.plain_high is not None
        and plain != (p.low, p.high)
    ):
        text += (
            f" by {p.clusters} tasks; plain Wilson {100 * p.plain_low:.{digits}f}%"
            f" to {100 * p.plain_high:.{digits}f}%"
        )
    return text + ")"


def _kappa_text(k: R.Kappa | None) -> str:
    if k is None or k.value is None:
        return "undefined"
    if k.low is None or k.high is None:
        return f"{k.value:.3f} (interval undefined)"
    return f"{k.value:.3f} (95% CI {k.low:.3f} to {k.high:.3f})"


def format_calibration(judge: str, cal: R.Calibration) -> list[str]:
    """The figures of one calibration block as lines for a terminal."""
    if cal.status != "calibrated":
        why = (
            "no labels"
            if not cal.labels
            else f"none of {cal.labels} labels has a verdict of this judge in both orders"
        )
        return [f"{judge}: uncalibrated ({why})"]
    lines = [
        f"{judge}: {cal.labels} label{'s' if cal.labels != 1 else ''} by "
        f"{len(cal.labellers)} labeller{'s' if len(cal.labellers) != 1 else ''}"
        + (
            f" ({cal.unmatched_labels} without a verdict of this judge)"
            if cal.unmatched_labels
            else ""
        ),
        f"  agreement             {_percent(cal.agreement)}",
        f"  agreement, no ties    {_percent(cal.agreement_no_ties)}",
        f"  Cohen's kappa         {_kappa_text(cal.kappa)}",
        f"  flip rate (items)     {_percent(cal.flip_rate)}",
        f"  on consistent pairs   {_percent(cal.agreement_consistent)}",
        f"  on flipped pairs      {_percent(cal.agreement_flipped)}",
    ]
    if cal.confusion is not None:
        lines.append(
            "  confusion (rows: person, columns: judge): "
            + "; ".join(
                f"{name} {row}"
                for name, row in zip(cal.confusion.categories, cal.confusion.matrix, strict=True)
            )
        )
    for group in cal.by_turn:
        folded = group.single_turn_tasks
        counted = (
            f" (and {folded} single-turn task{'s' if folded != 1 else ''}, counted as turn 1)"
            if folded
            else ""
        )
        line = (
            f"  {group.key}{counted}: judge vs people {_short(group.agreement)}, "
            f"without ties {_short(group.agreement_no_ties)}"
        )
        if group.human_human is not None:
            line += (
                f"; people vs people {_short(group.human_human.agreement)}, "
                f"without ties {_short(group.human_human.agreement_no_ties)}"
            )
        lines.append(line)
    hh = cal.human_human
    if hh is not None:
        lines.append(
            f"  people vs people      {_percent(hh.agreement)}, no ties "
            f"{_percent(hh.agreement_no_ties)}, kappa {_kappa_text(hh.kappa)}, "
            f"{hh.shared_items} shared items"
        )
    lines.append(f"  disagreements         {len(cal.disagreements)}")
    return lines


def _short(p: R.Proportion) -> str:
    return "undefined (0)" if p.rate is None else f"{round(100 * p.rate)}% ({p.n})"
