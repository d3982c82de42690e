"""Know the bill before paying it: --dry-run calls nothing and prices the real prompts; --max-cost
stops launching calls before the cap could be passed, and a rerun with a higher cap finishes
without paying for anything twice."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from openai_server import OpenAIServer, Reply
from test_batch import CALLS, JUDGE, MODELS, TASKS, content_judge, write_answers, write_project

from konkord.cli import cli
from konkord.configuration.call_settings import CallSettings
from konkord.configuration.runs_config import Price
from konkord.configuration.runspec import resolve_run
from konkord.evidence.log import EvidenceLog
from konkord.providers.budget import Budget, count_tokens, spent_in_evidence
from konkord.stages.judge.judge import calls_to_make, judge_messages

PRICE_IN, PRICE_OUT = 1e-6, 2e-6  # write_project's $1 and $2 per million
MAX_TOKENS = 100


@pytest.fixture
def demo(project: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KONKORD_BACKOFF_BASE", "0.01")
    openai_server.responder = content_judge
    write_project(project, openai_server.url)
    write_answers(resolve_run("demo"))
    return project


def judge_cli(*extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli, ["judge", "--run", "demo", "--max-tokens", str(MAX_TOKENS), *extra]
    )
    return result.exit_code, result.output


def test_dry_run_prices_the_real_prompts_and_calls_nothing(
    demo: Path, openai_server: OpenAIServer
) -> None:
    code, output = judge_cli("--dry-run")
    assert code == 0, output
    assert openai_server.requests == []
    spec = resolve_run("demo")
    tokens = sum(
        count_tokens(JUDGE, judge_messages(spec, item)) for item in calls_to_make(spec, (JUDGE,))
    )
    low = tokens * PRICE_IN
    high = low + CALLS * MAX_TOKENS * PRICE_OUT
    line = next(line for line in output.splitlines() if line.startswith(f"judge {JUDGE}"))
    assert f"{CALLS} calls, {tokens:,} tokens in, up to {CALLS * MAX_TOKENS:,} out" in line
    assert f"cost ${low:,.4f} to ${high:,.4f}" in line
    assert "no rate limit configured" in line
    assert "nothing was called" in output
    assert not (demo / "runs" / "demo" / "verdicts.jsonl").exists()

    code, batched = judge_cli("--dry-run", "--batch")
    assert f"cost ${low / 2:,.4f} to ${high / 2:,.4f} at batch prices" in batched


def test_dry_run_of_answers_counts_per_model(demo: Path, openai_server: OpenAIServer) -> None:
    result = CliRunner().invoke(cli, ["run", "--run", "demo", "--dry-run", "--force"])
    assert result.exit_code == 0, result.output
    for model in MODELS:
        assert re.search(rf"^model {re.escape(model)}: {len(TASKS)} calls, ", result.output, re.M)
    assert openai_server.requests == []


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_cap_below_the_cost_stops_cleanly_and_a_higher_cap_finishes(
    demo: Path, openai_server: OpenAIServer, processes: str
) -> None:
    """In one process and with the calls made in two workers (the cap is kept here, in the
    process that launches the calls, the cost read from the workers' replies)."""
    spec = resolve_run("demo")
    one_call = count_tokens(JUDGE, judge_messages(spec, calls_to_make(spec, (JUDGE,))[0]))
    upper = one_call * PRICE_IN + MAX_TOKENS * PRICE_OUT

    def expensive(body: dict[str, Any], n: int) -> Reply:
        # every reply as long as allowed: each call costs about its upper estimate
        reply = content_judge(body, n)
        reply.prompt_tokens, reply.completion_tokens = one_call, MAX_TOKENS
        return reply

    openai_server.responder = expensive
    cap = CALLS * upper / 2  # about half of what the run costs
    code, output = judge_cli(
        "--max-cost", f"{cap}", "--concurrency", "2", "--processes", processes
    )
    assert code == 1, output
    log = EvidenceLog(spec.run_dir)
    first = log.records("verdicts")
    assert 0 < len(first) < CALLS
    # how far it got, in the words a user reads
    assert f"stopped at --max-cost ${cap:g}: $0.0000 spent before" in output
    assert f"({len(first)} calls made); {CALLS - len(first)} calls not launched" in output
    assert {r["kind"] for r in first} == {"verdict"}  # a refused call leaves no failure record
    assert sum(r["cost_usd"] for r in first) <= cap
    assert len(openai_server.requests) == len(first)

    code, output = judge_cli("--max-cost", "1", "--processes", processes)
    assert code == 0, output
    records = log.records("verdicts")
    assert len(records) == CALLS
    prompts = [r["messages"][1]["content"] for r in openai_server.requests]
    assert len(prompts) == len(set(prompts)) == CALLS  # nothing asked twice


def test_the_cap_counts_what_the_evidence_already_spent() -> None:
    budget = Budget(cap_usd=1.0, prices={"m": Price(input_per_million=0, output_per_million=1e6)},
                    spent_before_usd=0.5)
    settings = CallSettings(max_tokens=1)  # each call can cost at most $1 of output... too much
    import asyncio

    from konkord.providers.budget import BudgetReached

    with pytest.raises(BudgetReached):
        asyncio.run(budget.reserve("m", [{"role": "user", "content": "x"}], settings))
    assert budget.closed and budget.launched == 0


def test_spent_in_evidence_counts_answers_and_verdicts_and_skips_unknown(tmp_path: Path) -> None:
    log = EvidenceLog(tmp_path / "run")
    answer = {"kind": "answer", "task_id": "t", "settings_hash": "s"}
    log.append_many("answers", [{**answer, "model": "m/a", "cost_usd": 0.25},
                                {**answer, "model": "m/b", "cost_usd": None}])
    verdict = {"kind": "verdict", "task_id": "t", "model_a": "m/a", "model_b": "m/b",
               "judge": "j", "frame_hash": "f"}
    log.append_many("verdicts", [{**verdict, "order": "ab", "cost_usd": 0.5},
                                 {**verdict, "order": "ba", "cost_usd": 0.125}])
    assert spent_in_evidence(log) == 0.875


def test_a_call_of_unknown_cost_is_counted_at_its_hold_not_as_free() -> None:
    import asyncio

    from konkord.providers.budget import BudgetReached

    budget = Budget(cap_usd=1.5, prices={"m": Price(input_per_million=0, output_per_million=1e6)})
    settings = CallSettings(max_tokens=1)  # each call can cost at most $1
    message = [{"role": "user", "content": "x"}]
    hold = asyncio.run(budget.reserve("m", message, settings))
    assert hold.output_usd == 1.0 and budget.in_flight_usd == 1.0
    budget.settle(hold, None)  # the provider did not say what it cost
    assert budget.spent_usd == 1.0 and budget.in_flight_usd == 0.0
    with pytest.raises(BudgetReached):  # $1 spent + $1 more would pass $1.50
        asyncio.run(budget.reserve("m", message, settings))
    budget_known = Budget(cap_usd=1.5, prices=budget.prices)
    budget_known.settle(asyncio.run(budget_known.reserve("m", message, settings)), 0.25)
    assert budget_known.spent_usd == 0.25


def test_a_model_without_a_price_cannot_run_under_a_cap(demo: Path) -> None:
    code, output = judge_cli("--max-cost", "1", "--judge", "openai/unpriced-judge")
    assert code != 0
    assert "no price is known for openai/unpriced-judge" in output


def test_batches_under_a_cap_submit_only_what_fits_and_a_rerun_finishes(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from openai_batch_server import BatchServer

    from konkord.providers.door import make_client
    from konkord.stages.judge.judge import judge_run

    monkeypatch.setenv("KONKORD_BATCH_POLL", "0.01")
    server = BatchServer(content_judge).start()
    try:
        spec = resolve_run("demo")
        spec = replace(spec, settings=replace(spec.settings, api_base=server.url))
        one_call = count_tokens(JUDGE, judge_messages(spec, calls_to_make(spec, (JUDGE,))[0]))
        upper = (one_call * PRICE_IN + 8192 * PRICE_OUT) / 2  # batch prices
        client = make_client(spec, batch=True, max_cost=10.5 * upper)
        asyncio.run(judge_run(spec, (JUDGE,), client, concurrency=10**9))
        assert client.budget is not None and client.budget.closed
        # every call waits for its batch, so all are in flight together: ten fit under the cap
        assert len(server.requests) == 10
        assert len(EvidenceLog(spec.run_dir).records("verdicts")) == 10

        client = make_client(spec, batch=True, max_cost=1)
        asyncio.run(judge_run(spec, (JUDGE,), client, concurrency=10**9))
        assert len(EvidenceLog(spec.run_dir).records("verdicts")) == CALLS
        prompts = [r["messages"][1]["content"] for r in server.requests]
        assert len(prompts) == len(set(prompts)) == CALLS
    finally:
        server.stop()


def test_time_at_the_configured_rate_limits() -> None:
    from konkord.providers.budget import Estimate

    assert Estimate("m", "judge", calls=1200, rpm=600).minutes() == 2.0
    tokens = Estimate("m", "judge", calls=10, tokens_in=500_000, max_tokens_out=500_000,
                      rpm=600, tpm=100_000)
    assert tokens.minutes() == 10.0  # the token limit binds, not the request limit
    assert Estimate("m", "judge", calls=10).minutes() is None


def test_dry_run_gives_the_time_at_the_deployments_rate_limits_and_calls_none(
    demo: Path, openai_server: OpenAIServer
) -> None:
    import json

    runs = json.loads((demo / "runs.json").read_text())
    runs["runs"][0]["deployments"] = {JUDGE: [
        {"name": "a", "api_base": openai_server.url, "rpm": 60},
        {"name": "b", "api_base": openai_server.url, "rpm": 60},
    ]}
    (demo / "runs.json").write_text(json.dumps(runs))
    code, output = judge_cli("--dry-run")
    assert code == 0, output
    line = next(line for line in output.splitlines() if line.startswith(f"judge {JUDGE}"))
    # 24 calls at 60 + 60 requests a minute: 12 s
    assert line.endswith(f"; {CALLS * 60 // 120} s at the configured rate limits")
    assert openai_server.requests == []


def test_a_paid_reply_whose_reminder_the_cap_refuses_is_recorded(
    demo: Path, openai_server: OpenAIServer
) -> None:
    """A judge reply with no verdict line is followed by a reminder; when --max-cost refuses
    the reminder, the first reply (paid) used to be dropped, so the evidence said less was
    spent than was billed. It is recorded with its cost, and a rerun sends only the reminder."""
    spec = resolve_run("demo")
    one_call = count_tokens(JUDGE, judge_messages(spec, calls_to_make(spec, (JUDGE,))[0]))
    upper = one_call * PRICE_IN + MAX_TOKENS * PRICE_OUT

    def no_verdict_first(body: dict[str, Any], n: int) -> Reply:
        if len(body["messages"]) == 2:  # the first ask: a reply as dear as it can be, no verdict
            return Reply("Both are fine.", prompt_tokens=one_call, completion_tokens=MAX_TOKENS)
        return content_judge(body, n)

    openai_server.responder = no_verdict_first
    code, output = judge_cli("--max-cost", f"{1.5 * upper}", "--concurrency", "1")
    assert code == 1, output
    billed = one_call * PRICE_IN + MAX_TOKENS * PRICE_OUT
    assert len(openai_server.requests) == 1
    log = EvidenceLog(spec.run_dir)
    [record] = log.records("verdicts")
    assert record["kind"] == "failure" and record["reason"] == "no_verdict_line"
    assert record["raw"] == "Both are fine."
    assert "the reminder was not sent (--max-cost" in record["detail"]
    assert record["cost_usd"] == pytest.approx(billed)
    assert f"${billed:.4f} now (1 calls made)" in output

    code, output = judge_cli("--max-cost", "1")
    assert code == 0, output
    firsts = [r for r in openai_server.requests if len(r["messages"]) == 2]
    assert len(firsts) == len({r["messages"][1]["content"] for r in firsts}) == CALLS
    spent = sum(r["cost_usd"] for r in log.records("verdicts"))
    assert len(openai_server.requests) == CALLS * 2  # every first ask once, every reminder once
    assert spent == pytest.approx(
        billed + (CALLS - 1) * (one_call * PRICE_IN + MAX_TOKENS * PRICE_OUT)
        + CALLS * (10 * PRICE_IN + 5 * PRICE_OUT)
    )


def test_the_cap_settles_by_the_providers_count_with_many_calls_in_flight(
    project: Path, openai_server: OpenAIServer
) -> None:
    """A provider that bills 78 prompt tokens where litellm counts far fewer used to take the
    run far past the cap with many calls in flight (each held only litellm's count). The cap
    now learns each model's billed-to-counted ratio from its first reply before launching
    more, holds every later call at that ratio, and settles by what each reply reports."""
    import json
    import threading

    billed_tokens, price_in = 78, 10.0  # $10 per million prompt tokens, output free
    models = [f"openai/m{k}" for k in range(2)]
    tasks = "\n".join(f"  - {{id: q{i}, prompt: Question number {i}?}}" for i in range(60))
    (project / "s.yaml").write_text(f"name: s\nrubric: Prefer correct answers.\ntasks:\n{tasks}\n")
    prices = {m: {"input_per_million": price_in, "output_per_million": 0} for m in models}
    (project / "runs.json").write_text(json.dumps({"runs": [
        {"name": "s", "suite": "s.yaml", "models": models, "prices": prices,
         "api_base": openai_server.url}
    ]}))
    in_flight, most = [0], [0]
    lock = threading.Lock()

    def overbilling(body: dict[str, Any], n: int) -> Reply:
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        import time

        time.sleep(0.3)
        with lock:
            in_flight[0] -= 1
        return Reply("an answer", prompt_tokens=billed_tokens, completion_tokens=5)

    openai_server.responder = overbilling
    one_call = billed_tokens * price_in / 1e6
    counted = count_tokens(models[0], [{"role": "user", "content": "Question number 10?"}])
    assert counted * 3 < billed_tokens  # litellm counts far fewer than the provider bills
    cap = 40 * one_call  # a third of the run's 120 calls
    result = CliRunner().invoke(
        cli, ["run", "--run", "s", "--concurrency", "60", "--max-cost", f"{cap}"]
    )
    assert result.exit_code == 1, result.output
    spent = sum(r["cost_usd"] for r in EvidenceLog(Path("runs/s")).records("answers"))
    assert spent <= cap + 1e-12, f"spent {spent / cap:.2f}x the cap"
    assert spent >= cap - 2 * one_call  # the cap was used, not refused from the start
    assert most[0] > 10  # and many calls were in flight together
    assert len(openai_server.requests) == round(spent / one_call)
