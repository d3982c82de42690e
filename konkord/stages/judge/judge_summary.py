"""What a judge stage did, per judge: counts, cost, order-flip consistency, and its summary text."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from konkord.evidence.log import Record
from konkord.evidence.verdicts import CombinedVerdict, VerdictRecord, combine_verdicts


@dataclass
class JudgeTally:
    """What happened for one judge, and how consistent it was across orders."""

    judge: str
    judged: int = 0
    cached: int = 0
    already_recorded: int = 0
    failed: int = 0
    cost_usd: float = 0.0
    unknown_price: bool = False
    complete_pairs: int = 0
    flipped_pairs: int = 0
    incomplete_pairs: int = 0
    most_flipped: list[tuple[str, str, int, int]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def count(self, record: Record, where: str, all_cached: bool) -> None:
        """Count one recorded verdict (`where`: task, pair and order, for a failure's line)."""
        if record.get("cost_usd") is None:
            self.unknown_price = True
        else:
            self.cost_usd += float(record["cost_usd"])
        if record["kind"] == "failure":
            self.failed += 1
            self.failures.append(f"{where}: {record['reason']}: {record['detail']}")
        elif all_cached:
            self.cached += 1
        else:
            self.judged += 1

    @property
    def flip_rate(self) -> float | None:
        """Share of complete pairs whose two orders disagreed."""
        return self.flipped_pairs / self.complete_pairs if self.complete_pairs else None


@dataclass
class JudgeSummary:
    """What a judge stage did, per judge, for the closing summary."""

    run: str
    frame_hash: str
    tallies: dict[str, JudgeTally] = field(default_factory=dict)
    skipped_pairs: int = 0  # task pairs not judged because an answer is missing or failed
    notes: list[str] = field(default_factory=list)
    design: str | None = None  # the pair design and its rounds, when not `all`

    def merged(self, later: JudgeSummary) -> JudgeSummary:
        """This pass followed by a later one (an adaptive round): calls and costs add up, the
        consistency is the later pass's (it covers every pair judged so far)."""
        for judge, tally in later.tallies.items():
            first = self.tallies.get(judge)
            if first is not None:
                tally.already_recorded = first.already_recorded
                tally.judged += first.judged
                tally.cached += first.cached
                tally.failed += first.failed
                tally.cost_usd += first.cost_usd
                tally.unknown_price |= first.unknown_price
                tally.failures = first.failures + tally.failures
        later.notes = list(dict.fromkeys(self.notes + later.notes))
        return later

    @property
    def failed(self) -> int:
        """Failure records written by this stage, over all judges."""
        return sum(t.failed for t in self.tallies.values())


def tally_consistency(tally: JudgeTally, records: Sequence[VerdictRecord]) -> None:
    tally_combined(tally, combine_verdicts(records))


def tally_combined(tally: JudgeTally, combined: Iterable[CombinedVerdict]) -> None:
    """Count complete, flipped and incomplete pairs (combined verdicts, read once)."""
    flips: Counter[tuple[str, str]] = Counter()
    complete: Counter[tuple[str, str]] = Counter()
    for verdict in combined:
        if not verdict.complete:
            tally.incomplete_pairs += 1
            continue
        complete[verdict.pair] += 1
        if verdict.flipped:
            flips[verdict.pair] += 1
    tally.complete_pairs = sum(complete.values())
    tally.flipped_pairs = sum(flips.values())
    ranked = sorted(flips.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    tally.most_flipped = [(a, b, n, complete[(a, b)]) for (a, b), n in ranked]


def summary_lines(summary: JudgeSummary) -> list[str]:
    """The closing summary, one block per judge, as a person reads it."""
    lines: list[str] = []
    for tally in summary.tallies.values():
        cost = f"${tally.cost_usd:.4f}"
        if tally.unknown_price:
            cost += " + unknown (no price known for this judge)"
        rate = (
            f"{tally.flip_rate:.1%} ({tally.flipped_pairs} of {tally.complete_pairs} pairs)"
            if tally.flip_rate is not None
            else "n/a (no pair judged in both orders)"
        )
        lines.append(
            f"judge {tally.judge}: judged {tally.judged}, cached {tally.cached}, already "
            f"recorded {tally.already_recorded}, failed {tally.failed}; cost {cost}; "
            f"order-flip rate {rate}"
        )
        if tally.incomplete_pairs:
            lines.append(f"  incomplete pairs (one order only): {tally.incomplete_pairs}")
        if tally.most_flipped:
            flips = "; ".join(
                f"{a} vs {b}: {n} of {m}" for a, b, n, m in tally.most_flipped
            )
            lines.append(f"  most flips: {flips}")
    if summary.design:
        lines.append(summary.design)
    return lines
