"""The judge stage: every pair of answers judged blind, in both orders, by each judge.

Every bias control is enforced here rather than advised: the judge sees "Answer 1" and
"Answer 2" in a frame Konkord owns, each pair is asked in both orders as two separate calls, a
judge from a ranked model's provider family is refused, and verdicts made under one judge
prompt are never mixed with verdicts made under another. Each verdict is appended to the
evidence log as it arrives, so a killed run resumes without losing or re-paying one.
"""

from __future__ import annotations

from collections.abc import Callable

from konkord.configuration.judge_frame import compose_system_prompt, frame_hash
from konkord.configuration.runspec import RunSpec
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog
from konkord.evidence.stopping import one_writer
from konkord.providers.batch import BatchClient
from konkord.providers.families import check_judge_independence
from konkord.providers.llm import ModelClient
from konkord.stages.judge.design import choose_round, design_summary, ranking_fit, record_start
from konkord.stages.judge.judge_call import JudgeItem as JudgeItem
from konkord.stages.judge.judge_call import judge_messages as judge_messages
from konkord.stages.judge.judge_call import judge_settings
from konkord.stages.judge.judge_send import Judged, VerdictWriter, judge_by_batch, judge_live
from konkord.stages.judge.judge_summary import JudgeSummary as JudgeSummary
from konkord.stages.judge.judge_summary import JudgeTally as JudgeTally
from konkord.stages.judge.judge_summary import summary_lines as summary_lines
from konkord.stages.judge.judge_summary import tally_combined
from konkord.stages.judge.judging import Judging
from konkord.stages.judge.judging import ProgressCallback as ProgressCallback
from konkord.stages.judge.owed import (
    check_no_drift,
    current_combined,
    done_keys,
    failed_keys,
    judge_items,
    record_prompt,
)

DEFAULT_MAX_TOKENS = 8192


def planned_calls(spec: RunSpec, judges: tuple[str, ...] | list[str]) -> int:
    """How many judge calls a complete judging of the run takes (recorded ones included)."""
    items, _ = judge_items(spec, EvidenceLog(spec.run_dir), tuple(dict.fromkeys(judges)))
    return len(items)


def calls_to_make(spec: RunSpec, judges: tuple[str, ...] | list[str]) -> list[JudgeItem]:
    """The judge calls still owed (missing, failed or stale), for an estimate before judging."""
    log = EvidenceLog(spec.run_dir)
    judges = tuple(dict.fromkeys(judges))
    items, _ = judge_items(spec, log, judges)
    fhash = frame_hash(compose_system_prompt(spec.suite))
    done = {j: done_keys(spec, log, j, fhash, items) for j in judges}
    return [item for item in items if item.key not in done[item.judge]]


def missing_verdicts(spec: RunSpec, judge: str) -> int:
    """How many judge calls `judge` still owes the run (missing, failed or stale verdicts)."""
    log = EvidenceLog(spec.run_dir)
    items, _ = judge_items(spec, log, (judge,))
    fhash = frame_hash(compose_system_prompt(spec.suite))
    return len(items) - len(done_keys(spec, log, judge, fhash, items))


def preflight(spec: RunSpec, judges: tuple[str, ...] | list[str]) -> list[str]:
    """Every refusal, before any call: no judge, a judge sharing a provider family with any
    model of the run (not only those with answers), or verdicts under another prompt.
    Returns notes worth showing (a judge whose vendor is unknown)."""
    if not judges:
        raise KonkordError(
            f'run "{spec.name}" has no judge: give --judge MODEL, or list "judges" for it '
            "in runs.json"
        )
    log = EvidenceLog(spec.run_dir)
    fhash = frame_hash(compose_system_prompt(spec.suite))
    notes: list[str] = []
    for judge in judges:
        if judge.startswith(("sim/", "sim-judge/")):
            check_judge_independence(judge, spec.models)
        else:
            notes += check_judge_independence(judge, spec.models)
        check_no_drift(spec, log, judge, fhash)
    return notes


@one_writer("judge", lambda spec, *args, **kwargs: spec.run_dir)
async def judge_run(
    spec: RunSpec,
    judges: tuple[str, ...] | list[str],
    client: ModelClient | None,
    concurrency: int = 8,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    on_progress: ProgressCallback | None = None,
    api_base: str | None = None,
    only: Callable[[JudgeItem], bool] | None = None,
) -> JudgeSummary:
    """Judge every pair the run's design owes, in both orders, by each judge; skip what is
    recorded. Under an adaptive design, round after round: after each, the first judge's
    ranking chooses the next round (`konkord.stages.judge.design`), until the budget is spent
    or every neighbouring pair is separated or out of reach. A round with calls still owed
    (--max-cost, Ctrl-C, failures) ends the command; a rerun continues it.

    `only` limits the calls to the items it accepts (a cascade's strong judge sees the
    escalated pairs alone).

    Refuses before any call: no judge, a judge sharing a provider family with any model of the
    run, or verdicts of a judge made under another prompt. `api_base` defaults to the run's."""
    judges = tuple(dict.fromkeys(judges or spec.judges))
    log = EvidenceLog(spec.run_dir)
    preflight(spec, judges)
    record_start(spec, log)
    client = client or ModelClient(concurrency=concurrency, prices=spec.prices)
    try:
        judging = Judging(
            spec,
            judges,
            client,
            concurrency,
            judge_settings(max_tokens, api_base or spec.settings.api_base),
            frame_hash(compose_system_prompt(spec.suite)),
            on_progress,
            only,
        )
        return await _judge_rounds(judging)
    finally:
        await client.close()  # the call pool's worker processes, if it started any


async def _judge_rounds(judging: Judging) -> JudgeSummary:
    """judge_run's passes: one, or under an adaptive design one a round."""
    spec, judges = judging.spec, judging.judges
    log = EvidenceLog(spec.run_dir)
    summary = await _judge_pass(judging)
    # Only an adaptive design has later rounds; asking what is missing would read every verdict
    # back and compose every message again (7 s and 170 MB at 100,000 calls) for nothing.
    adaptive = judging.only is None and spec.design.kind == "adaptive"
    while adaptive and not any(missing_verdicts(spec, j) for j in judges):
        if choose_round(spec, log, ranking_fit(spec, log, judges[0], judging.frame_hash)) is None:
            break
        summary = summary.merged(await _judge_pass(judging))
    summary.design = design_summary(spec, log)
    return summary


async def _judge_pass(judging: Judging) -> JudgeSummary:
    """One pass over what the design owes now."""
    spec, judges, fhash = judging.spec, judging.judges, judging.frame_hash
    log = EvidenceLog(spec.run_dir)
    summary = JudgeSummary(spec.name, fhash, notes=preflight(spec, judges))
    items, summary.skipped_pairs = judge_items(spec, log, judges)
    if judging.only is not None:
        items = [item for item in items if judging.only(item)]
    todo: list[JudgeItem] = []
    unparseable: set[tuple[str, str, str, str, str]] = set()
    for judge in judges:
        tally = summary.tallies[judge] = JudgeTally(judge)
        done = done_keys(spec, log, judge, fhash, items)
        tally.already_recorded = len(done)
        todo += [i for i in items if i.judge == judge and i.key not in done]
        unparseable |= failed_keys(log, judge, fhash)
    if todo:
        system_prompt = compose_system_prompt(spec.suite)
        for judge in judges:
            record_prompt(log, spec, system_prompt, judge)
    total = len(items)
    finished = total - len(todo)
    on_progress = judging.on_progress
    if on_progress:
        on_progress(finished, total)
    sent: dict[tuple[str, str, str, str, str], str] = {}

    def land(landed: list[Judged]) -> None:
        """Count verdicts now on disk (each a record and the calls it took)."""
        nonlocal finished
        for item, record, calls in landed:
            sent[item.key] = record["message_sha"]
            tally = summary.tallies[item.judge]
            where = f"{item.task.id} / {item.model_a} vs {item.model_b} ({item.order})"
            tally.count(record, where, all(c.cached for c in calls))
        finished += len(landed)
        if on_progress and landed:
            on_progress(finished, total)

    writer = VerdictWriter(log, land)
    if isinstance(judging.client, BatchClient):
        await judge_by_batch(judging, judging.client, todo, unparseable, writer)
    else:
        await judge_live(judging, todo, unparseable, writer)
    current = current_combined(spec, log, judges, fhash, items, sent)
    for judge in judges:
        tally_combined(summary.tallies[judge], current[judge])
    return summary
