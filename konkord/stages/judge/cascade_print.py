"""The terminal view of a cascade: who decided, the selective-accuracy table, and the saving."""

from __future__ import annotations

import textwrap

from konkord.results import schema as R


def _rate(p: R.Proportion) -> str:
    if p.rate is None:
        return "n/a (0)"
    text = f"{100 * p.rate:.0f}%"
    if p.low is not None and p.high is not None:
        text += f" [{100 * p.low:.0f}-{100 * p.high:.0f}]"
    return f"{text} ({p.k}/{p.n})"


def _share(p: R.Proportion) -> str:
    return "n/a" if p.rate is None else f"{100 * p.rate:.0f}%"


def _cost(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def format_cascade(block: R.CascadeBlock) -> list[str]:
    """The cascade's figures as lines for a terminal (under 100 columns)."""
    lines = [
        f"cascade {block.route or block.first_pass}: first pass {block.first_pass}",
        f"  strong judge {block.strong}",
        f"  accept at {block.accept_at:g} (confidence from {block.confidence}): the first pass "
        f"decided {block.decided_first_pass} of {block.pairs} pairs, the strong judge "
        f"{block.decided_strong}" + (f", {block.pending} pending" if block.pending else ""),
        "  selective accuracy: agreement with people on the pairs the first pass decides,",
        "  beside the same rule on each order alone; on escalated pairs, how often the averaged",
        "  lean was right (not trusted: never used as a verdict). [95% CI] (k/n)",
        "  accept decided agreement            one order: decided agreement          lean right",
    ]
    for row in block.selective:
        lines.append(
            f"  {row.threshold:6.2f} {_share(row.decided):>7} {_rate(row.agreement):<21}"
            f"{_share(row.one_order_decided):>8} {_rate(row.one_order_agreement):<22}"
            f"{_rate(row.lean_right)}"
        )
    if block.audited:
        lines.append(
            f"  audit: the strong judge also judged {block.audited} pairs the first pass decided"
        )
    if block.too_few_why:
        lines += textwrap.wrap(
            f"against the strong judge alone: not measured. {block.too_few_why}; no saving is "
            "shown until then.",
            96,
            initial_indent="  ",
            subsequent_indent="  ",
        )
    if block.cascade is None or block.strong_alone is None:
        return lines
    lines.append(
        f"  on {block.compared_labels} labels the strong judge also judged "
        f"(of {block.labels} labels on these pairs):"
    )
    for name, side in (("cascade", block.cascade), ("strong alone", block.strong_alone)):
        lines.append(
            f"    {name:<12}  agreement {_rate(side.agreement)}; {side.calls} calls "
            f"({side.strong_calls} to the strong judge); cost {_cost(side.cost_usd)}"
        )
    saving = f"  saving: {block.saved_strong_calls} strong-judge calls"
    if block.saved_cost_usd is not None and block.strong_alone.cost_usd:
        share = block.saved_cost_usd / block.strong_alone.cost_usd
        saving += f", {_cost(block.saved_cost_usd)} ({share:.0%} of the strong judge alone)"
    lines.append(saving)
    return lines
