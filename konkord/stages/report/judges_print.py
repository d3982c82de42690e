"""The judge table for a terminal: a compact table of point figures (judges by number, so long
names do not push it past the screen), then each judge's figures with their intervals, the
people's reference line, and the panel ranking beside each judge's own."""

from __future__ import annotations

from konkord.results import schema as R
from konkord.results.judges_table import (
    PANEL,
    JudgeRow,
    JudgeTable,
    latency,
    money_per_1000,
    split_text,
)


def _pct(p: R.Proportion | R.TaskMean | None, digits: int = 0) -> str:
    rate = None if p is None else (p.rate if isinstance(p, R.Proportion) else p.estimate)
    return "n/a" if rate is None else f"{100 * rate:.{digits}f}%"


def _full(p: R.Proportion | None, what: str = "") -> str:
    if p is None or p.rate is None:
        return "n/a"
    text = f"{100 * p.rate:.1f}% ({p.k} of {p.n}{what}"
    if p.low is not None and p.high is not None:
        text += f", 95% CI {100 * p.low:.1f}% to {100 * p.high:.1f}%"
    return text + ")"


def _mean(m: R.TaskMean | None) -> str:
    if m is None or m.estimate is None:
        return "n/a"
    text = f"{m.estimate:.3f} ({m.tasks} tasks"
    if m.low is not None and m.high is not None:
        text += f", 95% CI {m.low:.3f} to {m.high:.3f}"
    return text + ")"


def _kappa(k: R.Kappa | None) -> str:
    if k is None or k.value is None:
        return "n/a"
    if k.low is None or k.high is None:
        return f"{k.value:.3f}"
    return f"{k.value:.3f} (95% CI {k.low:.3f} to {k.high:.3f})"


HEADER = (
    f"{'':4}{'people':>7}{'kappa':>7}{'tests':>7}{'consens.':>9}{'consist.':>9}"
    f"{'flips':>7}{'1st/2nd':>8}{'longer':>7}{'fail':>6}{'$/1k':>9}{'latency':>9}"
)


def _line(row: JudgeRow) -> str:
    kappa = "n/a" if row.kappa is None or row.kappa.value is None else f"{row.kappa.value:.2f}"
    consensus = (
        "n/a"
        if row.consensus is None or row.consensus.estimate is None
        else (f"{row.consensus.estimate:.2f}")
    )
    steady = (
        "n/a"
        if row.consistency is None or row.consistency.estimate is None
        else (f"{row.consistency.estimate:.2f}")
    )
    return (
        f"J{row.number:<3}{_pct(row.people):>7}{kappa:>7}{_pct(row.tests):>7}{consensus:>9}"
        f"{steady:>9}{_pct(row.flip_rate):>7}{split_text(row.first_shown):>8}"
        f"{_pct(row.longer):>7}{row.failures:>6}{money_per_1000(row):>9}{latency(row):>9}"
    )


def format_judge_table(run: str, table: JudgeTable) -> list[str]:
    """Every line `konkord judges` prints."""
    lines = [
        f'Judges of run "{run}", sorted by {table.sorted_by}',
        "(by point estimate: where the intervals below overlap, the order is not established):",
    ]
    for row in table.rows:
        lines.append(f"  J{row.number}  {row.judge}")
        if row.note:
            lines.append(f"      {row.note}")
        for caveat in row.self_family:
            lines.append(f"      caveat: {caveat}")
    lines += ["", HEADER, *(_line(row) for row in table.rows)]
    hh = table.people
    if hh is not None:
        lines.append(
            f"people vs people: {_pct(hh.agreement)} agreement, kappa "
            f"{'n/a' if hh.kappa.value is None else f'{hh.kappa.value:.2f}'}, "
            f"on {hh.shared_items} items two people labelled (the reference line)"
        )
    else:
        lines.append("people vs people: no item was labelled by two people (no reference line)")
    if table.consensus_note:
        lines.append(table.consensus_note)
    for row in table.rows:
        for turn in row.by_turn:
            people = (
                ""
                if turn.human_human is None
                else f"; people vs people {_pct(turn.human_human.agreement)} "
                f"({turn.human_human.agreement.n})"
            )
            folded = (
                f" (and {turn.single_turn_tasks} single-turn task"
                f"{'s' if turn.single_turn_tasks != 1 else ''}, counted as turn 1)"
                if turn.single_turn_tasks
                else ""
            )
            lines.append(
                f"  {turn.key}{folded}: J{row.number} vs people {_pct(turn.agreement)} "
                f"({turn.agreement.n}){people}"
            )
    for row in table.rows:
        lines += [
            "",
            f"J{row.number} {row.judge}",
            f"  agreement with people  {_full(row.people)}",
            *(
                [f"    on the pairs it decided {_full(row.people_decided)}"]
                if row.people_decided is not None
                else []
            ),
            f"  Cohen's kappa          {_kappa(row.kappa)}",
            f"  agreement with tests   {_full(row.tests, ' pairs where one answer passes')}",
            f"  consensus match        {_mean(row.consensus)}",
            f"  consistency in tasks   {_mean(row.consistency)}",
            f"  order flips            {_full(row.flip_rate, ' pairs')}",
            f"  positional split       {split_text(row.first_shown)} "
            f"(first-shown won {_full(row.first_shown, ' decided calls')})",
            f"  longer answer won      {_full(row.longer, ' decided pairs')}",
            f"  failures               {row.failures} of {row.calls} calls; "
            f"{money_per_1000(row)} per 1,000 comparisons; median latency {latency(row)}",
        ]
    if table.people_longer is not None and table.people_longer.n:
        lines += ["", f"people: longer answer won {_full(table.people_longer, ' decided labels')}"]
    lines += ["", *format_ranks(table)]
    return lines


def _rank_range(rating: R.ModelRating | None) -> str:
    """The panel's rank range ("1-3"), not its best rank alone: a bare "1" beside a "2" would
    order two models the data does not separate."""
    if rating is None or rating.rank_best is None or rating.rank_worst is None:
        return ""
    if rating.rank_best == rating.rank_worst:
        return str(rating.rank_best)
    return f"{rating.rank_best}-{rating.rank_worst}"


def format_ranks(table: JudgeTable) -> list[str]:
    """The panel ranking (rank ranges, win rate against the field) beside each judge's own
    order by point estimate."""
    if not table.rows:
        return []
    panel = {r.model: r for r in table.panel}
    width = max((len(m) for m in table.models), default=5)
    ranked = [row for row in table.rows if row.has_block]  # a cascade's judges alone have none
    heads = "".join(f"{'J' + str(row.number):>5}" for row in ranked)
    title = (
        f"Ranking of the {PANEL}, beside each judge's order by point estimate"
        if panel
        else "Each judge's order by point estimate"
    )
    panel_head = f"  {'panel':>5}  {'win rate (95% CI)':<20}" if panel else ""
    lines = [title, f"  {'model':<{width}}{panel_head}{heads}"]
    for model in table.models:
        rating = panel.get(model)
        panel_cells = ""
        if panel:
            wr = rating.win_rate_vs_field if rating else None
            rate = "" if wr is None or wr.estimate is None else f"{100 * wr.estimate:.0f}%"
            if rate and wr is not None and wr.low is not None and wr.high is not None:
                rate += f" ({100 * wr.low:.0f}-{100 * wr.high:.0f}%)"
            panel_cells = f"  {_rank_range(rating):>5}  {rate:<20}"
        ranks = "".join(f"{row.places.get(model, '-'):>5}" for row in ranked)
        lines.append(f"  {model:<{width}}{panel_cells}{ranks}")
    return lines
