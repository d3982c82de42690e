"""The cascade judge stage: a cheap first pass on every pair, the strong judge where it is unsure.

The first pass judges every pair in both orders in the same blind frame as any judge, and its
records keep its probabilities of "1", "2" and tie (from the verdict token's log-probabilities,
or the vote share of N samples at temperature 1). A pair is accepted when both orders agree and
the averaged confidence reaches the threshold; the strong judge judges the rest in both orders,
and also the pairs people are planned to label, so that the cascade can be compared with the
strong judge alone on labelled pairs rather than assumed as good. Everything goes to the evidence
log as it arrives; a rerun makes only the calls still missing.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from konkord.configuration.judge_frame import compose_system_prompt, frame_hash
from konkord.configuration.runspec import RunSpec
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog, Record
from konkord.evidence.stopping import one_writer, unless_not_launched
from konkord.providers.confidence import POSITIONS, verdict_probs, vote_share
from konkord.providers.llm import CallResult, CallSettings, ModelClient
from konkord.stages.judge.cascade_view import (
    CascadePlan,
    PairKey,
    cascade_pairs,
    plan_of,
    probability_records,
)
from konkord.stages.judge.judge import (
    DEFAULT_MAX_TOKENS,
    JudgeItem,
    JudgeSummary,
    JudgeTally,
    ProgressCallback,
    judge_run,
    preflight,
)
from konkord.stages.judge.judge_call import ask_judge, judge_messages, judge_settings, message_sha
from konkord.stages.judge.judge_summary import tally_consistency
from konkord.stages.judge.owed import done_keys, failed_keys, judge_items, record_prompt

TOP_LOGPROBS = 5


def supports_logprobs(model: str, api_base: str | None = None) -> bool:
    """Whether litellm knows the model's provider to return token log-probabilities."""
    if model.startswith("sim-judge/"):
        return True
    if model.startswith("sim/"):
        return False
    from konkord.providers.loading import load_litellm

    litellm = load_litellm()
    try:
        name, provider, _, _ = litellm.get_llm_provider(model, api_base=api_base)
        params = litellm.get_supported_openai_params(model=name, custom_llm_provider=provider)
    except Exception:
        return False
    return "logprobs" in (params or [])


def check_first_pass(plan: CascadePlan, api_base: str | None) -> None:
    """Refuse, before any call, a first pass whose confidence could not be read."""
    if plan.samples is None and not supports_logprobs(plan.first_pass, api_base):
        raise KonkordError(
            f'first-pass judge "{plan.first_pass}": its provider returns no log-probabilities, '
            "so its confidence cannot be read from the verdict token. Choose a first pass "
            "served by an OpenAI-compatible provider, or use --confidence samples:5 (the vote "
            "share of 5 calls per order at temperature 1)"
        )


def audit_size(spec: RunSpec, plan: CascadePlan) -> int:
    """How many accepted pairs the strong judge also judges: the plan's audit, else the label
    plan's n."""
    return spec.label_plan.n if plan.audit is None else plan.audit


def audit_pairs(spec: RunSpec, log: EvidenceLog, accepted: set[PairKey], n: int) -> set[PairKey]:
    """Pairs the strong judge judges although the first pass decided them: the first `n` of
    the label plan's stratified order among the accepted pairs, and every labelled one, so
    labels can compare the cascade with the strong judge alone on the same pairs."""
    from konkord.stages.current import current_labels
    from konkord.stages.label.sample import pool_for_run, stratified_order

    pool = pool_for_run(spec, log)
    ordered = [
        (c.task_id, c.model_a, c.model_b) for c in stratified_order(pool, spec.label_plan.seed)
    ]
    keys = set([key for key in ordered if key in accepted][:n])
    labelled = {
        (str(r["task_id"]), str(r["model_a"]), str(r["model_b"])) for r in current_labels(log)
    }
    return keys | (labelled & accepted)


def _first_pass_done(
    spec: RunSpec, log: EvidenceLog, plan: CascadePlan, items: list[JudgeItem]
) -> set[tuple[str, str, str, str, str]]:
    wanted = {item.key: message_sha(judge_messages(spec, item)[1]["content"]) for item in items}
    done = set()
    for record in probability_records(log, plan, None):
        key = (record["task_id"], record["model_a"], record["model_b"], record["order"])
        full = (*key, plan.first_pass)
        if wanted.get(full) == record.get("message_sha"):
            done.add(full)
    return done


def _with_logprobs(record: Record, calls: list[CallResult]) -> Record:
    """The verdict record with its probabilities, or a failure if the provider sent none."""
    if record.get("kind") != "verdict":
        return record
    tokens = calls[-1].logprobs
    probs = verdict_probs(tokens) if tokens else None
    if probs is None:
        return {
            **record,
            "kind": "failure",
            "reason": "no_logprobs",
            "detail": "the response carried no log-probabilities for its verdict token",
        }
    return {**record, "probs": probs, "confidence": "logprobs"}


def _from_samples(item: JudgeItem, samples: list[Record], source: str) -> Record:
    """N sampled verdicts of one order as one record: the plurality, and the vote share."""
    verdicts = [r for r in samples if r.get("kind") == "verdict"]
    if len(verdicts) < len(samples):
        failed = next(r for r in samples if r.get("kind") != "verdict")
        return {**failed, "detail": f"{failed.get('detail')} (in one of {len(samples)} samples)"}
    positions = [str(r["position_winner"]) for r in verdicts]
    votes = Counter(positions)
    chosen = min(POSITIONS, key=lambda p: (-votes[p], POSITIONS.index(p)))
    first = next(r for r in verdicts if r["position_winner"] == chosen)
    costs = [r.get("cost_usd") for r in samples]
    shown = (item.model_a, item.model_b) if item.order == "ab" else (item.model_b, item.model_a)
    return {
        **first,
        "winner": "tie" if chosen == "tie" else shown[0 if chosen == "1" else 1],
        "position_winner": chosen,
        "probs": vote_share(positions),
        "confidence": source,
        "samples": positions,
        "cost_usd": None if any(c is None for c in costs) else sum(float(c or 0) for c in costs),
        "tokens_in": sum(int(r.get("tokens_in") or 0) for r in samples),
        "tokens_out": sum(int(r.get("tokens_out") or 0) for r in samples),
    }


def no_logprobs_error(spec: RunSpec, plan: CascadePlan, replies: int) -> KonkordError:
    """The configuration error a first pass without log-probabilities is: one line, the fix."""
    return KonkordError(
        f'run {spec.name}: first-pass judge "{plan.first_pass}" answered without '
        f"log-probabilities ({replies} {'reply' if replies == 1 else 'replies'} recorded as "
        'no_logprobs), so its confidence cannot be read; set "confidence": "samples:5" in the '
        "run's cascade, or choose a first pass whose provider returns log-probabilities, then "
        f"`konkord judge --run {spec.name}` (build does not ask it again)"
    )


def no_logprobs_replies(spec: RunSpec, plan: CascadePlan) -> int:
    """The first pass's current replies that carried no log-probabilities (logprobs plans)."""
    if plan.samples is not None:
        return 0
    log = EvidenceLog(spec.run_dir)
    fhash = frame_hash(compose_system_prompt(spec.suite))
    latest = log.latest(
        "verdicts", lambda r: r.get("judge") == plan.first_pass and r.get("frame_hash") == fhash
    )
    return sum(1 for r in latest.values() if r.get("reason") == "no_logprobs")


async def first_pass_run(
    spec: RunSpec,
    plan: CascadePlan,
    client: ModelClient,
    settings: CallSettings,
    concurrency: int,
    on_progress: ProgressCallback | None = None,
) -> JudgeTally:
    """Judge every pair in both orders with the first pass, keeping its probabilities."""
    log = EvidenceLog(spec.run_dir)
    system_prompt = compose_system_prompt(spec.suite)
    fhash = frame_hash(system_prompt)
    items, _ = judge_items(spec, log, (plan.first_pass,))
    tally = JudgeTally(plan.first_pass)
    done = _first_pass_done(spec, log, plan, items)
    tally.already_recorded = len(done)
    todo = [item for item in items if item.key not in done]
    # A failed reply (unreadable, ambiguous, cut off, empty) is asked afresh, not served again
    # from the cache.
    unreadable = failed_keys(log, plan.first_pass, fhash)
    if todo:
        record_prompt(log, spec, system_prompt, plan.first_pass)
    gate = asyncio.Semaphore(max(1, concurrency))
    finished = len(items) - len(todo)
    if on_progress:
        on_progress(finished, len(items))

    no_logprobs = 0  # a configuration error: no call is made after the first such reply

    async def judge_one(item: JudgeItem) -> None:
        nonlocal finished, no_logprobs
        async with gate:
            if no_logprobs:
                return
            if plan.samples is None:
                asked = replace(settings, top_logprobs=TOP_LOGPROBS)
                use_cache = item.key not in unreadable
                record, calls = await ask_judge(spec, item, client, asked, fhash, use_cache)
                record = _with_logprobs(record, calls)
            else:
                samples: list[Record] = []
                calls = []
                for seed in range(plan.samples):
                    sampled = replace(settings, temperature=1.0, seed=seed)
                    use_cache = item.key not in unreadable
                    one, made = await ask_judge(spec, item, client, sampled, fhash, use_cache)
                    samples.append(one)
                    calls += made
                record = _from_samples(item, samples, plan.confidence)
        log.append("verdicts", record)
        if record.get("reason") == "no_logprobs":
            no_logprobs += 1
        where = f"{item.task.id} / {item.model_a} vs {item.model_b} ({item.order})"
        tally.count(record, where, all(c.cached for c in calls))
        finished += 1
        if on_progress:
            on_progress(finished, len(items))

    await asyncio.gather(*(unless_not_launched(judge_one(item)) for item in todo))
    if no_logprobs:
        raise no_logprobs_error(spec, plan, no_logprobs)
    done = _first_pass_done(spec, log, plan, items)
    current = [
        r
        for r in probability_records(log, plan, None)
        if (r["task_id"], r["model_a"], r["model_b"], r["order"], plan.first_pass) in done
    ]
    tally_consistency(tally, current)
    return tally


def strong_split(spec: RunSpec, plan: CascadePlan) -> tuple[set[PairKey], set[PairKey]]:
    """The pairs the strong judge owes, by name: (escalated, audited). A pair the first pass
    has not judged yet counts as escalated, so before the first pass this is an upper bound."""
    log = EvidenceLog(spec.run_dir)
    pairs = cascade_pairs(spec, log, plan)
    accepted = {k for k, ok in zip(pairs.keys, pairs.accepted, strict=True) if ok}
    items, _ = judge_items(spec, log, (plan.strong,))
    every = {(i.task.id, i.model_a, i.model_b) for i in items}
    audited = audit_pairs(spec, log, accepted, audit_size(spec, plan)) & every
    return every - accepted, audited


def strong_pairs(spec: RunSpec, plan: CascadePlan) -> set[PairKey]:
    """The pairs the strong judge owes: not accepted by the first pass, or in the audit set."""
    escalated, audited = strong_split(spec, plan)
    return escalated | audited


def cascade_for(spec: RunSpec, judge: str) -> CascadePlan | None:
    """The run's cascade if `judge` is its strong judge, else None."""
    plan = plan_of(spec)
    return plan if plan is not None and plan.strong == judge else None


def missing_calls(spec: RunSpec, plan: CascadePlan) -> int:
    """Calls the cascade still owes: the first pass's, then the strong judge's on its pairs."""

    log = EvidenceLog(spec.run_dir)
    fhash = frame_hash(compose_system_prompt(spec.suite))
    first_items, _ = judge_items(spec, log, (plan.first_pass,))
    owed = len(first_items) - len(_first_pass_done(spec, log, plan, first_items))
    wanted = strong_pairs(spec, plan)
    strong_items, _ = judge_items(spec, log, (plan.strong,))
    strong_items = [i for i in strong_items if (i.task.id, i.model_a, i.model_b) in wanted]
    return owed + len(strong_items) - len(done_keys(spec, log, plan.strong, fhash, strong_items))


@one_writer("judge", lambda spec, *args, **kwargs: spec.run_dir)
async def cascade_run(
    spec: RunSpec,
    plan: CascadePlan,
    client: ModelClient | None,
    concurrency: int = 8,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    on_progress: ProgressCallback | None = None,
    api_base: str | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> JudgeSummary:
    """The first pass on every pair, then the strong judge on the pairs it owes.

    `on_phase(judge)` is called as each judge's calls begin (progress restarts there).

    Refuses before any call: a first pass whose confidence cannot be read, either judge sharing
    a provider family with a ranked model, or verdicts under another prompt."""
    base = api_base or spec.settings.api_base
    check_first_pass(plan, base)
    notes = preflight(spec, [plan.strong, plan.first_pass])
    client = client or ModelClient(concurrency=concurrency, prices=spec.prices)
    settings = judge_settings(max_tokens, base)
    if on_phase:
        on_phase(plan.first_pass)
    tally = await first_pass_run(spec, plan, client, settings, concurrency, on_progress)
    wanted = strong_pairs(spec, plan)
    if on_phase:
        on_phase(plan.strong)
    summary = await judge_run(
        spec,
        [plan.strong],
        client,
        concurrency=concurrency,
        max_tokens=max_tokens,
        on_progress=on_progress,
        api_base=base,
        only=lambda item: (item.task.id, item.model_a, item.model_b) in wanted,
    )
    summary.notes = notes
    summary.tallies = {plan.first_pass: tally, **summary.tallies}
    return summary


def cascade_lines(spec: RunSpec, plan: CascadePlan) -> list[str]:
    """What the cascade decided, for the closing summary."""
    pairs = cascade_pairs(spec, EvidenceLog(spec.run_dir), plan)
    total = len(pairs.keys)
    if not total:
        return ["cascade: the first pass has no pair judged in both orders yet"]
    deciders = Counter(pairs.decided_by(i) for i in range(total))
    share = deciders["first_pass"] / total
    audited = sum(
        1
        for i, key in enumerate(pairs.keys)
        if pairs.accepted[i] and (v := pairs.strong.get(key)) is not None and v.complete
    )
    line = (
        f"cascade at {plan.accept_at:g}: first pass {plan.first_pass} decided "
        f"{deciders['first_pass']} of {total} pairs ({share:.0%}); the strong judge "
        f"{plan.strong} judged {total - deciders['first_pass']} escalated + {audited} audited "
        f"(of {audit_size(spec, plan)} asked: pairs the first pass decided, judged again so "
        "labels can compare the two)"
    )
    if deciders["pending"]:
        line += f" ({deciders['pending']} still to judge)"
    return [line]
