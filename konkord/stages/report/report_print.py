"""The terminal view of a results file: a compact table and the diagnostics in a few lines."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from konkord.results.schema import (
    CascadeBlock,
    CostLine,
    Interval,
    JudgeBlock,
    Proportion,
    Results,
    TurnLine,
)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _interval(iv: Interval) -> str:
    if iv.estimate is None:
        return "n/a"
    return f"{_pct(iv.estimate)} [{_pct(iv.low)}, {_pct(iv.high)}]"


def _proportion(p: Proportion | None) -> str:
    if p is None or p.rate is None:
        return "undefined (no data)"
    return f"{_pct(p.rate)} [{_pct(p.low)}, {_pct(p.high)}] ({p.k}/{p.n})"


def _rank_range(best: int | None, worst: int | None, rank: int) -> str:
    if best is None or worst is None:
        return str(rank) if best is None and worst is None else "-"
    return str(best) if best == worst else f"{best}-{worst}"


def _turn(console: Console, line: TurnLine) -> None:
    """One turn's own ranking (the same fit, bootstrap and gate), or its raw shares won."""
    folded = (
        f", {line.single_turn_tasks} of them single-turn (counted as turn 1)"
        if line.single_turn_tasks
        else ""
    )
    head = f"  turn {line.turn}: {line.tasks} tasks{folded}, {line.pairs} pair verdicts"
    if not line.ratings:
        rates = ", ".join(
            f"{model} {_pct(rate)}"
            for model, rate in sorted(line.win_rate.items(), key=lambda kv: -(kv[1] or 0.0))
        )
        console.print(f"{head}; won {rates}" + (f" ({line.note})" if line.note else ""))
        return
    console.print(f"{head}; win rate vs field [95%]:")
    width = max(len(r.model) for r in line.ratings)
    for r in line.ratings:
        rank = _rank_range(r.rank_best, r.rank_worst, 0)
        console.print(
            f"    {rank:>5}  {r.model:<{width}}  {_interval(r.win_rate_vs_field)}"
        )
    for claim in line.claims:
        console.print(f"    - {claim.text}")


def format_cost(line: CostLine | None) -> str:
    """Dollars, or the known part plus a note when some prices are unknown."""
    if line is None:
        return "n/a"
    if line.cost_usd is not None:
        return f"${line.cost_usd:.4f}"
    if not line.known_cost_usd:
        return "unknown"
    return f"${line.known_cost_usd:.4f} + unknown"


def _block(console: Console, results: Results, block: JudgeBlock) -> None:
    cost = {line.who: line for line in results.cost if line.role == "generation"}
    calibration = block.calibration
    verdict = (
        f"agreement with people {_proportion(calibration.agreement)}"
        if calibration.status == "calibrated"
        else "UNCALIBRATED: no human labels, so nobody has checked this judge"
    )
    if block.cascade is not None:
        k = block.cascade
        console.print(f"[bold]cascade {k.route or block.judge}[/bold]  {verdict}")
        console.print(
            f"  first pass {k.first_pass} decided {k.decided_first_pass} of {k.pairs} "
            f"pairs at {k.accept_at:g}, the strong judge {k.decided_strong}"
            + (f", {k.pending} pending" if k.pending else "")
            + "; `konkord calibrate` shows what it is worth"
        )
        console.print(f"  {selective_line(k)}")
    else:
        console.print(f"[bold]judge {block.judge}[/bold]  {verdict}")
    for note in block.self_family:
        console.print(f"  [bold]{note.text}[/bold]")
    if block.self_family:
        note = block.self_family[0]
        console.print(f"  {note.without_note}")
        for rating in note.ratings_without:
            console.print(
                f"    {_rank_range(rating.rank_best, rating.rank_worst, rating.rank):>5}  "
                f"{rating.model}  {_interval(rating.win_rate_vs_field)}"
            )
    table = Table(show_edge=False, pad_edge=False, box=None)
    for column in ("rank", "model", "rating", "win rate vs field [95%]", "cost"):
        table.add_column(column, justify="right" if column != "model" else "left")
    for row in block.ratings:
        table.add_row(
            _rank_range(row.rank_best, row.rank_worst, row.rank),
            row.model,
            f"{row.rating.estimate:.2f}" if row.rating.estimate is not None else "n/a",
            _interval(row.win_rate_vs_field),
            format_cost(cost.get(row.model)),
        )
    console.print(table)
    for claim in block.claims:
        console.print(f"  - {claim.text}")
    for line in block.by_turn:
        _turn(console, line)
    _style(console, block)
    d = block.diagnostics
    worst = ", ".join(
        f"{r.key} {_pct(r.proportion.rate)}" for r in d.flips_by_pair[:3] if r.proportion.k
    )
    console.print(
        f"  order flips {_proportion(d.flip_rate)}" + (f"; worst: {worst}" if worst else "")
    )
    shown_first = (
        f"{_proportion(d.positional.share_first)} of decided calls"
        if d.positional.measurable
        else "not measurable here (imported combined verdicts)"
    )
    console.print(
        f"  shown-first wins {shown_first}; "
        f"cycles {d.cycles.cyclic}/{d.cycles.decided_triples} decided triples "
        f"({d.cycles.undecided_triples} undecided)"
    )
    cov = d.coverage
    failures = ", ".join(f"{k} {v}" for k, v in d.failures_by_reason.items()) or "none"
    answers = (
        "answers not imported"
        if cov.answers_present == 0 and cov.verdicts_present
        else f"answers {cov.answers_present}/{cov.answers_expected}"
    )
    console.print(
        f"  coverage: {answers}, verdicts "
        f"{cov.verdicts_present}/{cov.verdicts_expected}, incomplete pairs "
        f"{cov.incomplete_pairs}; judge failures: {failures}"
    )
    if cov.truncated_answers:
        console.print(
            f"  [yellow]{cov.truncated_answers} answers cut off at the output token cap "
            "(kept; marked on the task pages)[/yellow]"
        )
    if not d.fit.converged:
        console.print(
            f"  [red]warning: the fit did not converge (gradient norm {d.fit.gradient_norm:.2e})"
        )
    _anchored(console, block)


def clipped_text(clipped: int, resamples: int) -> str:
    """The share of anchored resamples whose corrected pair scores had to be clipped."""
    return (
        f"clipped resamples: {clipped} of {resamples} ({clipped / resamples:.1%}) had a "
        "corrected pair score outside 0..its comparisons, clipped to the nearest possible one"
    )


def _style(console: Console, block: JudgeBlock) -> None:
    """The style-controlled ranking after the plain one, and a line per coefficient."""
    style = block.style
    if style is None:
        return
    console.print(f"  style-controlled ({', '.join(style.features) or 'no feature varies'}):",
                  markup=False)
    for row in style.judge.ratings:
        moved = f"{row.movement:+d}" if row.movement else "="
        console.print(
            f"    {_rank_range(row.rank_best, row.rank_worst, row.position):>5}  {row.model}  "
            f"{_interval(row.win_rate_vs_field)}  {moved}",
            markup=False,
        )
    for text in style.judge.claims:
        console.print(f"  - {text}", markup=False)
    for coef in style.coefficients:
        if coef.judge is not None:
            console.print(f"  style {coef.feature}: {coef.text}", markup=False)
    unmeasured = [c.description for c in style.coefficients if c.judge is None]
    if unmeasured:
        console.print(f"  style not estimated (no judged pair differs in it): "
                      f"{', '.join(unmeasured)}", markup=False)
    if style.people is not None and style.people.status != "fitted":
        console.print(f"  {style.people.summary}", markup=False)


def _anchored(console: Console, block: JudgeBlock) -> None:
    """The ranking anchored to people, compactly: one line per model, then the disagreements."""
    a = block.anchored
    if a is None:
        return
    if a.status != "anchored":
        console.print(f"  anchored to people: {a.summary}", markup=False)
        return
    worth = f", worth {a.effective_labels:.0f} labels alone" if a.effective_labels else ""
    console.print(
        f"  anchored to people ({a.labels} labels{worth}; lambda {a.lam:.2f}):", markup=False
    )
    for row in a.ratings:
        ranks = (
            str(row.rank_best) if row.rank_best == row.rank_worst
            else f"{row.rank_best}-{row.rank_worst}"
        )
        console.print(f"    {ranks:>5}  {row.model}  {_interval(row.win_rate_vs_field)}",
                      markup=False)
    if a.resamples:
        console.print(f"  {clipped_text(a.clipped_resamples, a.resamples)}", markup=False)
    for text in a.disagreements:
        console.print(f"  - {text}", markup=False)
    if a.holdout is not None:
        console.print(f"  {a.holdout.summary}", markup=False)


def selective_line(k: CascadeBlock) -> str:
    """The selective-accuracy row at the run's own threshold, in one line."""
    row = next((r for r in k.selective if abs(r.threshold - k.accept_at) < 1e-9), None)
    if row is None:
        return f"selective accuracy at {k.accept_at:g}: not in the table"
    if row.agreement.rate is None:
        agreement = "no labels on those pairs"
    else:
        agreement = f"agreement with people there {_proportion(row.agreement)}"
    return (
        f"selective accuracy at {k.accept_at:g}: the first pass decides "
        f"{row.decided.k} of {row.decided.n} pairs; {agreement}"
    )


def print_report(results: Results) -> None:
    """Print every judge's block compactly; fits an 80-column terminal."""
    console = Console(width=min(Console().width, 100))
    console.print(
        f"[bold]{results.run}[/bold]: {results.suite.name}, {results.suite.task_count} tasks, "
        f"{len(results.models)} models"
    )
    for block in results.judge_blocks:
        _block(console, results, block)
