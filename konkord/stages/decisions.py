"""Who decided what in a run, derived once from records already read: one view that the
report, the judges table, the cascade section, the costs and the family check all read.

For each way of judging the run holds (each judge alone; a cascade = first pass + strong judge +
threshold; people), the view gives every pair's verdicts in both orders, who decided it, the
calls and the cost behind it, and the labels on it. A cascade is a route with a name of its
own (`quick -> steward at 0.8`), never a second name for its strong judge.

Pure: it takes parsed records (verdicts per judge, labels) and the run's configuration, so
whatever reads the evidence (once per process or not) composes with it. Nothing here is stored.

One cost rule for every figure: the cost recorded with a call; else the runs.json price times
the call's tokens; else unknown (never $0 for unknown). A simulated model records $0, which is
a placeholder rather than a price: where runs.json prices such a model, its price is used.
"""

from __future__ import annotations

from collections.abc import (
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    Sequence,
    ValuesView,
)
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from konkord.configuration.runs_config import Price
from konkord.evidence.log import Record
from konkord.evidence.verdicts import CombinedVerdict, VerdictRecord, combine_verdicts

if TYPE_CHECKING:  # numpy stays out of the light readers (the judges table, the site)
    from konkord.stages.decisions_cost import Tally
    from konkord.stages.judge.cascade_view import CascadePairs, CascadePlan

PairKey = tuple[str, str, str]  # task_id, model_a, model_b

RouteKind = Literal["judge", "cascade", "people"]
SIMULATED = ("sim/", "sim-judge/")


def short_name(model: str) -> str:
    """A judge's name without its provider route or parameters: `sim-judge/quick:x=1` -> quick."""
    return model.rsplit("/", 1)[-1].split(":", 1)[0] or model


def cascade_name(first_pass: str, strong: str, accept_at: float) -> str:
    """The name a cascade is shown under: `quick -> steward at 0.8`."""
    return f"{short_name(first_pass)} -> {short_name(strong)} at {accept_at:g}"


def call_cost(record: VerdictRecord, who: str, price: Price | None) -> float | None:
    """The one cost rule for one call: recorded, else price x tokens, else None (unknown)."""
    recorded = record.get("cost_usd")
    placeholder = recorded == 0 and who.startswith(SIMULATED) and price is not None
    if recorded is not None and not placeholder:
        return float(recorded)
    tokens_in, tokens_out = record.get("tokens_in"), record.get("tokens_out")
    if recorded is None and record.get("kind") == "failure" and tokens_out is None:
        return 0.0  # the call failed before any reply: nothing was billed
    if price is None or (not tokens_in and not tokens_out):
        return None
    return (
        int(tokens_in or 0) * price.input_per_million
        + int(tokens_out or 0) * price.output_per_million
    ) / 1e6


def is_call(record: VerdictRecord) -> bool:
    """Whether a record stands for a call that was made (an answer with text, a verdict or a
    failure); imported verdicts count as calls someone made, at an unknown price."""
    return record.get("text") is not None or record.get("kind") in {"verdict", "failure"}


def call_latencies(records: Sequence[VerdictRecord]) -> list[float]:
    """The latency of every call among `records` that recorded one."""
    from konkord.stages.decisions_cost import latencies_of_rows

    found = latencies_of_rows(records)
    if found is not None:
        return found
    return [
        float(r["latency_s"]) for r in records if is_call(r) and r.get("latency_s") is not None
    ]


@dataclass(frozen=True)
class CostFigure:
    """Calls, tokens, dollars and latency behind a set of records, under the one rule."""

    calls: int
    tokens_in: int
    tokens_out: int
    cost_usd: float | None  # None when any call's cost is unknown
    known_cost_usd: float
    unknown_calls: int
    median_latency_s: float | None

    @property
    def per_1000(self) -> float | None:
        """Dollars per 1,000 calls, None when unknown or when nothing was called."""
        if self.cost_usd is None or not self.calls:
            return None
        return 1000.0 * self.cost_usd / self.calls


def cost_of(records: Iterable[VerdictRecord], who: str, price: Price | None) -> CostFigure:
    """The cost of `who`'s records; a sampled first-pass record counts one call per sample."""
    from konkord.stages.decisions_cost import cost_of_rows, median

    # A list is taken as it is: a list of the log's rows remembers their places in its table.
    records = records if isinstance(records, list) else list(records)
    tally = cost_of_rows(records, price, who.startswith(SIMULATED))  # rows of one table: columns
    if tally is None:
        tally = _cost_of_records(records, who, price)
    calls, tokens_in, tokens_out, known, unknown, latencies = tally
    return CostFigure(
        calls=calls,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        # nothing recorded (an import without answers) is unknown, not free
        cost_usd=None if unknown or not calls else round(known, 6),
        known_cost_usd=round(known, 6),
        unknown_calls=unknown,
        median_latency_s=round(median(latencies), 4) if len(latencies) else None,
    )


def _cost_of_records(
    records: list[VerdictRecord], who: str, price: Price | None
) -> Tally:
    """(calls, tokens in, tokens out, known dollars, calls of unknown cost, latencies) of plain
    records, one at a time: what `cost_of_rows` gives from the columns."""
    calls = tokens_in = tokens_out = unknown = 0
    known = 0.0
    latencies: list[float] = []
    for record in records:
        if not is_call(record):
            continue
        calls += len(record.get("samples") or [None])
        tokens_in += int(record.get("tokens_in") or 0)
        tokens_out += int(record.get("tokens_out") or 0)
        dollars = call_cost(record, who, price)
        if dollars is None:
            unknown += 1
        else:
            known += dollars
        if record.get("latency_s") is not None:
            latencies.append(float(record["latency_s"]))
    return calls, tokens_in, tokens_out, known, unknown, latencies


@dataclass(frozen=True, slots=True)
class Decision:
    """One pair as one route decided it: the verdicts in both orders and who gave them."""

    key: PairKey
    winner: str | None  # model_a, model_b or "tie"; None while incomplete or pending
    flipped: bool
    decided_by: str  # the judge whose verdicts stand, "pending", or "people"
    orders: Mapping[str, VerdictRecord]


@dataclass(frozen=True)
class Route:
    """One way of judging the run, with its decisions and every call record behind them."""

    name: str
    kind: RouteKind
    judges: tuple[str, ...]  # the models behind it: one judge, or first pass then strong
    decisions: Mapping[PairKey, Decision]
    calls: dict[str, list[VerdictRecord]]  # judge -> records of the calls this route paid for

    def decided(self) -> list[Decision]:
        """The pairs with a verdict from both orders (or a label)."""
        return [d for d in self.decisions.values() if d.winner is not None]

    def cost(self, prices: Mapping[str, Price]) -> CostFigure:
        """What the route's calls cost under the one rule, all its judges together."""
        from konkord.stages.decisions_cost import median

        parts = [cost_of(recs, judge, prices.get(judge)) for judge, recs in self.calls.items()]
        unknown = sum(p.unknown_calls for p in parts)
        known = round(sum(p.known_cost_usd for p in parts), 6)
        latencies = [x for recs in self.calls.values() for x in call_latencies(recs)]
        return CostFigure(
            calls=sum(p.calls for p in parts),
            tokens_in=sum(p.tokens_in for p in parts),
            tokens_out=sum(p.tokens_out for p in parts),
            cost_usd=None if unknown else known,
            known_cost_usd=known,
            unknown_calls=unknown,
            median_latency_s=round(median(latencies), 4) if len(latencies) else None,
        )


@dataclass(frozen=True)
class RunDecisions:
    """Every route of a run, the labels per pair, and the cascade's arrays where there is one."""

    routes: dict[str, Route]
    labels: dict[PairKey, list[Record]]
    cascade: CascadePairs | None = None
    cascade_route: str | None = None
    judge_records: dict[str, list[VerdictRecord]] = field(default_factory=dict)
    combined: dict[str, list[CombinedVerdict]] = field(default_factory=dict)  # per judge alone

    def judge(self, name: str) -> Route:
        """The route of one judge alone."""
        return self.routes[name]

    def agreement(self, route: str, pairs: Iterable[PairKey] | None = None) -> tuple[int, int]:
        """(labels agreeing with the route's verdict, labels on its decided pairs), on `pairs`
        only when given: the raw count behind every agreement figure shown."""
        wanted = None if pairs is None else set(pairs)
        agree = total = 0
        for key, decision in self.routes[route].decisions.items():
            if decision.winner is None or (wanted is not None and key not in wanted):
                continue
            for label in self.labels.get(key, []):
                total += 1
                agree += label.get("winner") == decision.winner
        return agree, total


def _judge_route(name: str, combined: list[CombinedVerdict], records: list[VerdictRecord]) -> Route:
    # The records as the log's table gave them (not a copy: a copy reads each row, and its
    # cost is no longer read from the columns)
    return Route(name, "judge", (name,), _JudgeDecisions(name, combined), {name: records})


class _JudgeDecisions(Mapping[PairKey, Decision]):
    """One judge's decisions, one per combined verdict, made when first asked: at 20 models x
    1,000 tasks they are 190,000, which `konkord report` of a run without a cascade never reads
    (it holds the combined verdicts themselves)."""

    def __init__(self, name: str, combined: list[CombinedVerdict]) -> None:
        self._name = name
        self._combined = combined
        self._made: dict[PairKey, Decision] | None = None

    def _decisions(self) -> dict[PairKey, Decision]:
        if self._made is None:
            name = self._name
            self._made = {
                (c.task_id, c.model_a, c.model_b): Decision(
                    (c.task_id, c.model_a, c.model_b), c.winner, c.flipped, name, c.orders
                )
                for c in self._combined
            }
        return self._made

    def __getitem__(self, key: PairKey) -> Decision:
        return self._decisions()[key]

    def __iter__(self) -> Iterator[PairKey]:
        return iter(self._decisions())

    def __len__(self) -> int:
        return len(self._decisions())

    def __contains__(self, key: object) -> bool:
        return key in self._decisions()

    def keys(self) -> KeysView[PairKey]:
        return self._decisions().keys()

    def values(self) -> ValuesView[Decision]:
        return self._decisions().values()

    def items(self) -> ItemsView[PairKey, Decision]:
        return self._decisions().items()


def _cascade_route(pairs: CascadePairs, name: str) -> Route:
    plan = pairs.plan
    decisions: dict[PairKey, Decision] = {}
    for index, key in enumerate(pairs.keys):
        decider = pairs.decided_by(index)
        verdict: CombinedVerdict | None = (
            pairs.first[key]
            if decider == "first_pass"
            else pairs.strong.get(key)
            if decider == "strong"
            else None
        )
        who = {"first_pass": plan.first_pass, "strong": plan.strong}.get(decider, "pending")
        decisions[key] = Decision(
            key,
            verdict.winner if verdict else None,
            verdict.flipped if verdict else False,
            who,
            verdict.orders if verdict else {},
        )
    for key, verdict in pairs.strong.items():
        if key not in decisions:  # the first pass could not read it: the strong judge decides
            decisions[key] = Decision(
                key, verdict.winner, verdict.flipped, plan.strong, verdict.orders
            )
    escalated = pairs.escalated()
    strong_calls = [
        r for key, v in pairs.strong.items() if key in escalated for r in v.orders.values()
    ]
    calls = {plan.first_pass: list(pairs.first_records), plan.strong: strong_calls}
    return Route(name, "cascade", (plan.first_pass, plan.strong), decisions, calls)


def decide(
    models: Sequence[str],
    verdicts: Mapping[str, list[VerdictRecord]],
    labels: Iterable[Record],
    plan: CascadePlan | None = None,
) -> RunDecisions:
    """The run's routes from its current verdict records per judge (stale ones already left
    out), its standing labels (model_a < model_b) and its cascade plan, if any."""
    combined = {judge: combine_verdicts(records) for judge, records in verdicts.items()}
    routes = {
        judge: _judge_route(judge, combined[judge], records) for judge, records in verdicts.items()
    }
    by_pair: dict[PairKey, list[Record]] = {}
    for label in labels:
        if label.get("winner") is None:
            continue
        key = (str(label["task_id"]), str(label["model_a"]), str(label["model_b"]))
        by_pair.setdefault(key, []).append(label)
    routes["people"] = Route(
        "people",
        "people",
        (),
        {key: Decision(key, None, False, "people", {}) for key in by_pair},
        {},
    )
    pairs = name = None
    if plan is not None:
        from konkord.stages.judge.cascade_view import pairs_from_records

        pairs = pairs_from_records(
            models, plan, verdicts.get(plan.first_pass, []), verdicts.get(plan.strong, [])
        )
        name = cascade_name(plan.first_pass, plan.strong, plan.accept_at)
        routes[name] = _cascade_route(pairs, name)
    return RunDecisions(routes, by_pair, pairs, name, dict(verdicts), combined)


@dataclass(frozen=True)
class SelfFamily:
    """A judge sharing a provider family with ranked models, and how much of its work it is."""

    judge: str
    family: str
    models: tuple[str, ...]  # the ranked models of the judge's family
    involved: int  # decided comparisons with one of them on either side
    total: int  # all decided comparisons

    def text(self) -> str:
        """The sentence the ranking opens with."""
        named = ", ".join(self.models)
        return (
            f"{self.judge} is in the same family as {named} ({self.family}): {self.involved:,} "
            f"of its {self.total:,} comparisons involve its own family"
        )


def self_family(
    judges: Sequence[str], models: Sequence[str], pairs: Iterable[PairKey]
) -> list[SelfFamily]:
    """The family rule over every (judge, ranked model) the run holds, whatever the source of
    the verdicts (judged here or imported): `konkord judge` refuses such a judge up front, an
    import cannot be refused, so its ranking must say it."""
    from konkord.providers.families import family_of

    decided: list[PairKey] | None = None  # read only where a judge has a family member
    out = []
    for judge in judges:
        family = family_of(judge)
        own = tuple(m for m in models if m == judge or family_of(m).name == family.name)
        if not own:
            continue
        decided = list(pairs) if decided is None else decided
        involved = sum(1 for _, a, b in decided if a in own or b in own)
        out.append(SelfFamily(judge, family.name, own, involved, len(decided)))
    return out
