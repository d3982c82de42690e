"""The cascade judge through real litellm calls to the local server: a first pass that returns
log-probabilities on every pair in both orders, the strong judge on exactly the escalated pairs,
the seed's three cases, reruns that pay nothing, and a new threshold that re-decides offline."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from openai_server import OpenAIServer, Reply, verdict_logprobs

from konkord.cli import cli
from konkord.configuration.judge_frame import split_framed_answers
from konkord.configuration.runs_config import parse_confidence
from konkord.configuration.runspec import RunSpec, resolve_run
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog, now_iso
from konkord.evidence.verdicts import combine_verdicts
from konkord.providers.confidence import outcome_of_token, to_models, verdict_probs
from konkord.providers.llm import ModelClient
from konkord.stages.judge.cascade import cascade_run, check_first_pass, missing_calls
from konkord.stages.judge.cascade_view import (
    CascadePairs,
    CascadePlan,
    cascade_pairs,
    final_records,
    plan_of,
)
from konkord.stages.run import answer_key_hash, answer_messages
from konkord.stats.selective import accepted

CHEAP, STRONG = "openai/cheap-judge", "openai/strong-judge"
MODELS = ["openai/model-a", "openai/model-b"]  # model-a writes the better answers
TASKS = ["sure", "unsure", "disagree"]


def write_project(root: Path, api_base: str, accept_at: float = 0.8, label_n: int = 0) -> None:
    (root / "suites").mkdir(exist_ok=True)
    tasks = "\n".join(f"  - id: {t}\n    prompt: Solve problem {t}." for t in TASKS)
    (root / "suites" / "demo.yaml").write_text(
        f"name: demo\nrubric: Higher quality.\ntasks:\n{tasks}\n"
    )
    run = {
        "name": "demo",
        "suite": "suites/demo.yaml",
        "models": MODELS,
        "judges": [STRONG],
        "api_base": api_base,
        "cascade": {"first_pass": CHEAP, "accept_at": accept_at},
        "label_plan": {"n": label_n},
    }
    (root / "runs.json").write_text(json.dumps({"runs": [run]}, indent=2))


def write_answers(spec: RunSpec) -> None:
    log = EvidenceLog(spec.run_dir)
    for task in spec.suite.tasks:
        settings_hash = answer_key_hash(answer_messages(spec.suite, task), spec.settings)
        for model, quality in zip(MODELS, (2, 1), strict=True):
            log.append(
                "answers",
                {
                    "kind": "answer",
                    "task_id": task.id,
                    "model": model,
                    "settings_hash": settings_hash,
                    "text": f"Solution to {task.id}.\nquality={quality}",
                    "error": None,
                    "finish_reason": "stop",
                    "created_at": now_iso(),
                },
            )


def better_first(body: dict[str, Any]) -> bool:
    first, _ = split_framed_answers(body["messages"][1]["content"])
    return "quality=2" in first


def task_of(body: dict[str, Any]) -> str:
    found = re.search(r"Solve problem (\w+)\.", body["messages"][1]["content"])
    assert found
    return found.group(1)


def screen_probs(task: str, good_first: bool) -> dict[str, float]:
    """The seed's cases, in screen terms. sure: 0.9 for the better answer in both orders;
    unsure: 0.7 in both; disagree: the worse answer at 0.99 when the better is shown first,
    and, swapped, "Answer 2" (the better) at 0.48 against 0.47 for the worse."""
    good, bad = ("1", "2") if good_first else ("2", "1")
    if task == "sure":
        return {good: 0.9, bad: 0.07, "tie": 0.03}
    if task == "unsure":
        return {good: 0.7, bad: 0.2, "tie": 0.1}
    if good_first:
        return {bad: 0.99, good: 0.005, "tie": 0.005}
    return {good: 0.48, bad: 0.47, "tie": 0.05}


def responder(body: dict[str, Any], n: int) -> Reply:
    if body["model"] == bare(STRONG):
        good = "1" if better_first(body) else "2"
        return Reply(content=f"Answer {good} is better.\nVERDICT: {good}")
    probs = screen_probs(task_of(body), better_first(body))
    verdict = max(probs, key=lambda k: probs[k])
    content = f"I weighed both.\nVERDICT: {verdict.upper()}"
    return Reply(content=content, logprobs=verdict_logprobs(content, probs))


@pytest.fixture
def run(project: Path, openai_server: OpenAIServer) -> RunSpec:
    write_project(project, openai_server.url)
    spec = resolve_run("demo")
    write_answers(spec)
    openai_server.responder = responder
    return spec


def cascade(spec: RunSpec, accept_at: float | None = None) -> None:
    plan = plan_of(spec, accept_at)
    assert plan is not None
    client = ModelClient(concurrency=2, max_retries=0)
    asyncio.run(cascade_run(spec, plan, client, concurrency=2))


def bare(model: str) -> str:
    return model.split("/", 1)[1]  # litellm sends the name without its provider prefix


def deciders(pairs: Any) -> dict[str, str]:
    return {key[0]: pairs.decided_by(i) for i, key in enumerate(pairs.keys)}


def calls_by(server: OpenAIServer, model: str) -> list[dict[str, Any]]:
    return [body for body in server.requests if body["model"] == bare(model)]


def test_first_pass_sees_every_pair_both_orders_strong_only_the_escalated(
    run: RunSpec, openai_server: OpenAIServer
) -> None:
    cascade(run)
    first = calls_by(openai_server, CHEAP)
    assert len(first) == len(TASKS) * 2
    assert Counter((task_of(b), better_first(b)) for b in first) == Counter(
        (t, f) for t in TASKS for f in (True, False)
    )
    assert all(b.get("logprobs") is True and b.get("top_logprobs") == 5 for b in first)
    strong = calls_by(openai_server, STRONG)
    assert sorted(task_of(b) for b in strong) == ["disagree", "disagree", "unsure", "unsure"]
    assert all("logprobs" not in b for b in strong)

    pairs = cascade_pairs(run, EvidenceLog(run.run_dir), plan_of(run))  # type: ignore[arg-type]
    assert deciders(pairs) == {"sure": "first_pass", "unsure": "strong", "disagree": "strong"}
    # The first pass's probabilities stay in the evidence for the escalated pairs too.
    records = [r for r in EvidenceLog(run.run_dir).records("verdicts") if r["judge"] == CHEAP]
    assert len(records) == 6 and all(r["confidence"] == "logprobs" for r in records)
    disagree_ab = next(r for r in records if r["task_id"] == "disagree" and r["order"] == "ab")
    assert disagree_ab["probs"]["2"] == pytest.approx(0.99)


def test_the_seeds_cases_decide_as_the_rule_says(run: RunSpec) -> None:
    cascade(run)
    log = EvidenceLog(run.run_dir)
    plan = plan_of(run)
    assert plan is not None
    pairs = cascade_pairs(run, log, plan)
    row = {key[0]: i for i, key in enumerate(pairs.keys)}
    # disagree: 0.99 for B in one order, 0.47 for B (so A) in the other; the average leans to B
    i = row["disagree"]
    assert pairs.probs_ab[i][1] == pytest.approx(0.99) and pairs.probs_ba[i][1] == pytest.approx(
        0.47
    )
    assert (pairs.probs_ab[i][1] + pairs.probs_ba[i][1]) / 2 == pytest.approx(0.73)
    assert pairs.verdict_ab[i] != pairs.verdict_ba[i]
    for threshold in (0.5, 0.6, 0.7, 0.73, 0.8, 0.95):
        ok = accepted(pairs.probs_ab, pairs.probs_ba, pairs.verdict_ab, pairs.verdict_ba, threshold)
        assert not ok[row["disagree"]]  # whatever the confidence
        assert bool(ok[row["unsure"]]) is (threshold <= 0.7)
        assert bool(ok[row["sure"]]) is (threshold <= 0.9)


def test_rerun_pays_nothing_and_a_new_threshold_re_decides_without_calls(
    run: RunSpec, openai_server: OpenAIServer
) -> None:
    cascade(run)
    made = len(openai_server.requests)
    assert missing_calls(run, plan_of(run)) == 0  # type: ignore[arg-type]
    cascade(run)
    assert len(openai_server.requests) == made
    # Lower threshold: "unsure" is now the first pass's, with the strong verdicts still stored.
    lower = plan_of(run, 0.65)
    assert lower is not None and missing_calls(run, lower) == 0
    pairs = cascade_pairs(run, EvidenceLog(run.run_dir), lower)
    assert deciders(pairs) == {"sure": "first_pass", "unsure": "first_pass", "disagree": "strong"}
    cascade(run, 0.65)
    assert len(openai_server.requests) == made
    # Higher threshold: "sure" is escalated and pending until the strong judge sees it.
    higher = plan_of(run, 0.95)
    assert higher is not None and missing_calls(run, higher) == 2
    pending = cascade_pairs(run, EvidenceLog(run.run_dir), higher)
    assert deciders(pending)["sure"] == "pending"
    cascade(run, 0.95)
    assert [task_of(b) for b in openai_server.requests[made:]] == ["sure", "sure"]


def test_label_plan_pairs_are_judged_by_the_strong_judge_too(
    project: Path, openai_server: OpenAIServer
) -> None:
    write_project(project, openai_server.url, label_n=3)
    spec = resolve_run("demo")
    write_answers(spec)
    openai_server.responder = responder
    cascade(spec)
    assert len(calls_by(openai_server, STRONG)) == 6  # all three pairs: every one is planned


def test_results_say_who_decided_and_keep_the_lean_small(run: RunSpec) -> None:
    from konkord.stages.report.report import build_results
    from konkord.stages.report.report_ranking import ReportOptions

    cascade(run)
    results = build_results(run, ReportOptions(resamples=50))
    assert results.judges == [STRONG]  # the first pass is evidence, not a judge of its own
    block = results.block(STRONG)
    assert block.cascade is not None
    assert (block.cascade.decided_first_pass, block.cascade.decided_strong) == (1, 2)
    # No labels: nothing tells the cascade from the strong judge alone, so no saving is shown
    # and the block says what would add the labelled pairs the comparison needs.
    assert block.cascade.strong_alone is None and block.cascade.saved_strong_calls is None
    assert block.cascade.too_few_why is not None
    assert block.cascade.too_few_why.startswith("0 labels fall on pairs the first pass decided")
    assert block.cascade.route == "cheap-judge -> strong-judge at 0.8"
    seen = {}
    for task in results.tasks:
        for comparison in task.comparisons:
            assert comparison.cascade is not None
            seen[task.id] = (comparison.cascade.decided_by, comparison.cascade.lean)
    assert seen["sure"] == ("first_pass", "openai/model-a")
    assert seen["disagree"] == ("strong", "openai/model-b")  # the lean was wrong: escalated
    shown = {
        task.id: c.cascade.orders_text
        for task in results.tasks
        for c in task.comparisons
        if c.cascade is not None
    }
    assert shown["disagree"] == (
        "order 1: Answer 2 at 0.99; swapped: Answer 2 at 0.48; orders disagree"
    )


def test_an_escalated_pair_with_one_strong_order_is_pending_not_decided() -> None:
    key = ("t1", "m/a", "m/b")
    one_order = {"task_id": "t1", "model_a": "m/a", "model_b": "m/b", "judge": STRONG,
                 "order": "ab", "kind": "verdict", "winner": "m/a", "position_winner": "1"}
    (half,) = combine_verdicts([one_order])
    (both,) = combine_verdicts([one_order, {**one_order, "order": "ba", "position_winner": "2"}])
    assert not half.complete and both.complete
    empty = np.zeros((1, 3))
    codes = np.zeros(1, np.int64)
    plan = CascadePlan(CHEAP, STRONG, 0.9)

    def pairs(accepted: bool, strong: dict) -> CascadePairs:
        return CascadePairs(plan, [key], empty, empty, codes, codes, np.array([accepted]), strong)

    assert pairs(False, {key: half}).decided_by(0) == "pending"
    assert pairs(False, {}).decided_by(0) == "pending"
    assert pairs(False, {key: both}).decided_by(0) == "strong"
    assert pairs(True, {key: half}).decided_by(0) == "first_pass"
    assert final_records(pairs(False, {key: half})) == []


def test_a_first_pass_without_logprobs_is_refused_unless_sampled() -> None:
    with pytest.raises(KonkordError, match=r"returns no log-probabilities.*samples:5"):
        check_first_pass(CascadePlan("anthropic/claude-3-haiku-20240307", STRONG, 0.8), None)
    check_first_pass(
        CascadePlan("anthropic/claude-3-haiku-20240307", STRONG, 0.8, "samples:5"), None
    )
    check_first_pass(CascadePlan("openai/gpt-4o-mini", STRONG, 0.8), None)


def test_a_reply_without_logprobs_is_a_failure_not_a_guess(
    run: RunSpec, openai_server: OpenAIServer
) -> None:
    openai_server.responder = lambda body, n: Reply(content="VERDICT: 1")
    with pytest.raises(KonkordError) as refused:
        cascade(run)
    # A configuration error: one line naming the first pass and the fix, no call after it
    # (those already in flight finish), and nothing escalated to the strong judge.
    message = str(refused.value)
    assert "\n" not in message and f'first-pass judge "{CHEAP}"' in message
    assert '"confidence": "samples:5"' in message
    records = [r for r in EvidenceLog(run.run_dir).records("verdicts") if r["judge"] == CHEAP]
    assert {r["reason"] for r in records} == {"no_logprobs"}
    assert len(calls_by(openai_server, CHEAP)) <= 2  # the test client's concurrency
    assert len(calls_by(openai_server, STRONG)) == 0
    # The provider is fixed: the rerun asks the first pass afresh instead of reusing the cache.
    openai_server.responder = responder
    asked = len(calls_by(openai_server, CHEAP))
    cascade(run)
    assert len(calls_by(openai_server, CHEAP)) == asked + 6
    assert missing_calls(run, plan_of(run)) == 0  # type: ignore[arg-type]


def test_samples_give_the_vote_share(project: Path, openai_server: OpenAIServer) -> None:
    write_project(project, openai_server.url)
    runs = json.loads((project / "runs.json").read_text())
    runs["runs"][0]["cascade"]["confidence"] = "samples:4"
    (project / "runs.json").write_text(json.dumps(runs))
    spec = resolve_run("demo")
    write_answers(spec)

    def sampler(body: dict[str, Any], n: int) -> Reply:
        if body["model"] == bare(STRONG):
            return Reply(content="VERDICT: 1")
        assert body["temperature"] == 1.0 and "logprobs" not in body
        return Reply(content=f"VERDICT: {'1' if body['seed'] < 3 else '2'}")

    openai_server.responder = sampler
    cascade(spec)
    assert len(calls_by(openai_server, CHEAP)) == len(TASKS) * 2 * 4
    records = [r for r in EvidenceLog(spec.run_dir).records("verdicts") if r["judge"] == CHEAP]
    assert all(r["probs"] == {"1": 0.75, "2": 0.25, "tie": 0.0} for r in records)
    assert all(r["samples"] == ["1", "1", "1", "2"] for r in records)
    # The plurality "1" is the answer shown first: model_a in order ab, model_b in order ba.
    for r in records:
        assert r["position_winner"] == "1"
        assert r["winner"] == (r["model_a"] if r["order"] == "ab" else r["model_b"])
    # "1" in both orders names different models: the orders disagree, every pair escalates
    assert len(calls_by(openai_server, STRONG)) == len(TASKS) * 2


def test_cli_runs_the_cascade_and_says_what_it_decided(run: RunSpec) -> None:
    result = CliRunner().invoke(
        cli, ["judge", "--run", "demo", "--judge", STRONG, "--first-pass", CHEAP]
    )
    assert result.exit_code == 0, result.output
    assert "first pass openai/cheap-judge decided 1 of 3 pairs (33%)" in result.output
    bad = CliRunner().invoke(cli, ["judge", "--run", "demo", "--confidence", "votes"])
    assert bad.exit_code != 0 and '"votes" is not a confidence source' in bad.output
    plain = CliRunner().invoke(
        cli, ["judge", "--run", "demo", "--judge", STRONG, "--accept-at", "0.9"]
    )
    assert plain.exit_code != 0 and "need --first-pass" in plain.output


def test_calibrate_takes_the_cascade_by_the_name_the_report_shows(run: RunSpec) -> None:
    from konkord.results.schema import write_results
    from konkord.stages.report.report import build_results
    from konkord.stages.report.report_ranking import ReportOptions

    cascade(run)
    write_results(build_results(run, ReportOptions(resamples=50)), run.results_path)
    route = "cheap-judge -> strong-judge at 0.8"
    by_route = CliRunner().invoke(cli, ["calibrate", "--run", "demo", "--judge", route])
    assert by_route.exit_code == 0, by_route.output
    assert route in by_route.output
    unknown = CliRunner().invoke(cli, ["calibrate", "--run", "demo", "--judge", "nope"])
    assert unknown.exit_code != 0
    assert f'no block for judge "nope" (judges: {route})' in unknown.output


def test_verdict_token_probabilities_are_read_and_renormalised() -> None:
    content = "Answer 2 is better.\n**VERDICT: 2**"
    tokens = [
        {
            "token": t["token"],
            "logprob": t["logprob"],
            "top": [[a["token"], a["logprob"]] for a in t["top_logprobs"]],
        }
        for t in verdict_logprobs(content, {"1": 0.3, "2": 0.6, "tie": 0.1})
    ]
    verdict_token = next(t for t in tokens if t["top"])
    assert verdict_token["token"] == " 2" and tokens[-1]["token"] == "**"
    verdict_token["top"].append(["**", math.log(0.2)])  # names no outcome: left out
    probs = verdict_probs(tokens)
    assert probs == pytest.approx({"1": 0.3, "2": 0.6, "tie": 0.1})
    assert verdict_probs([{"token": "no verdict here", "logprob": 0.0, "top": []}]) is None
    assert [outcome_of_token(t) for t in (" 1", "2", " T", "TIE", " Tie", " x")] == [
        "1",
        "2",
        "tie",
        "tie",
        "tie",
        None,
    ]
    assert to_models({"1": 0.7, "2": 0.2, "tie": 0.1}, "ba") == {"a": 0.2, "b": 0.7, "tie": 0.1}
    assert parse_confidence("samples:5") == 5 and parse_confidence("logprobs") is None
    with pytest.raises(ValueError, match="samples:N"):
        parse_confidence("samples:1")
    assert np.isclose(sum(probs.values()), 1.0)


@pytest.mark.parametrize(
    ("cascade", "message"),
    [
        ({"first_pass": CHEAP, "accept_at": 0.3}, "runs[0].cascade.accept_at must be at least 0.5"),
        (
            {"first_pass": CHEAP, "confidence": "votes"},
            'runs[0].cascade.confidence "votes" is not a confidence source',
        ),
        (
            {"first_pass": MODELS[0]},
            f'runs[0].cascade.first_pass "{MODELS[0]}" is also a ranked model',
        ),
        ({"first_pass": STRONG}, "runs[0].cascade.first_pass is the strong judge itself"),
        (
            {"first_pass": CHEAP, "strong": "openai/other"},
            'runs[0].cascade.strong "openai/other" is not one of this run\'s judges',
        ),
        ({"first_pass": CHEAP, "accept_at": 0.8, "treshold": 1}, "runs[0].cascade.treshold"),
    ],
)
def test_a_bad_cascade_in_runs_json_names_its_line_and_field(
    tmp_path: Path, cascade: dict[str, Any], message: str
) -> None:
    from konkord.configuration.runs_config import load_runs

    run = {
        "name": "demo",
        "suite": "s.yaml",
        "models": MODELS,
        "judges": [STRONG],
        "cascade": cascade,
    }
    path = tmp_path / "runs.json"
    path.write_text(json.dumps({"runs": [run]}, indent=2))
    with pytest.raises(KonkordError) as caught:
        load_runs(path)
    text = str(caught.value)
    assert text.startswith(f"{path}:") and message in text, text
    line = int(text[len(str(path)) + 1 :].split(":", 1)[0])
    field = message.split(" ")[0].rsplit(".", 1)[1]
    assert f'"{field}"' in path.read_text().splitlines()[line - 1]


def test_a_first_pass_listed_as_a_judge_is_refused(tmp_path: Path) -> None:
    from konkord.configuration.runs_config import load_runs

    run = {
        "name": "demo",
        "suite": "s.yaml",
        "models": MODELS,
        "judges": [STRONG, CHEAP],
        "cascade": {"first_pass": CHEAP},
    }
    path = tmp_path / "runs.json"
    path.write_text(json.dumps({"runs": [run]}, indent=2))
    with pytest.raises(
        KonkordError, match=r'cascade.first_pass "openai/cheap-judge" is also listed in "judges"'
    ):
        load_runs(path)


def test_the_same_family_rule_holds_for_the_first_pass_too(
    project: Path, openai_server: OpenAIServer
) -> None:
    write_project(project, openai_server.url)
    runs = json.loads((project / "runs.json").read_text())
    runs["runs"][0]["models"] = ["openai/gpt-4o", "anthropic/claude-3-5-haiku"]
    runs["runs"][0]["judges"] = ["gemini/gemini-1.5-pro"]
    runs["runs"][0]["cascade"] = {"first_pass": "openai/gpt-4o-mini"}
    (project / "runs.json").write_text(json.dumps(runs))
    spec = resolve_run("demo")
    with pytest.raises(
        KonkordError, match=r'judge "openai/gpt-4o-mini" and ranked model "openai/gpt-4o"'
    ):
        cascade(spec)
    assert openai_server.requests == []  # refused before any call


def test_cli_first_pass_on_a_listed_run_needs_the_cascade_in_runs_json(
    project: Path, openai_server: OpenAIServer
) -> None:
    write_project(project, openai_server.url)
    runs = json.loads((project / "runs.json").read_text())
    del runs["runs"][0]["cascade"]
    (project / "runs.json").write_text(json.dumps(runs))
    write_answers(resolve_run("demo"))
    result = CliRunner().invoke(
        cli, ["judge", "--run", "demo", "--judge", STRONG, "--first-pass", CHEAP]
    )
    assert result.exit_code != 0
    assert '"cascade": {"first_pass": "openai/cheap-judge", "accept_at": 0.8}' in result.output
    assert openai_server.requests == []


def test_build_runs_the_cascade_offline_demo_style(project: Path) -> None:
    """`konkord build` on a simulated run with a cascade: answers, first pass on every pair,
    the strong judge on the escalated and planned pairs only, labels, results; then nothing."""
    from konkord.stages.judge.cascade import audit_pairs
    from konkord.stages.pipeline import ensure_run

    repo = Path(__file__).resolve().parent.parent
    (project / "suites").mkdir()
    suite = (repo / "suites" / "support_replies.yaml").read_text()
    head, _, tasks = suite.partition("\ntasks:\n")
    kept = "\n  - id:".join(tasks.split("\n  - id:")[:8])  # the first eight tickets
    (project / "suites" / "s.yaml").write_text(f"{head}\ntasks:\n{kept}\n")
    strong = "sim-judge/fair"
    run = {
        "name": "demo",
        "suite": "suites/s.yaml",
        "models": ["sim/x:strength=1.5", "sim/y:strength=0", "sim/z:strength=-1.5"],
        "judges": [strong],
        "cascade": {"first_pass": "sim-judge/quick", "accept_at": 0.8},
        "label_plan": {"n": 3, "simulated_labellers": [{"name": "sim-p", "accuracy": 0.9}]},
    }
    (project / "runs.json").write_text(json.dumps({"runs": [run]}))
    spec = resolve_run("demo")
    notes = ensure_run(spec, offline=False, echo=lambda _: None)
    assert not [n for n in notes if "failed" in n]
    log = EvidenceLog(spec.run_dir)
    pairs = cascade_pairs(spec, log, plan_of(spec))  # type: ignore[arg-type]
    assert len(pairs.keys) == 8 * 3  # every pair read by the first pass in both orders
    strong_keys = {
        (r["task_id"], r["model_a"], r["model_b"])
        for r in log.records("verdicts")
        if r["judge"] == strong
    }
    accepted = set(pairs.keys) - pairs.escalated()
    assert strong_keys == pairs.escalated() | audit_pairs(spec, log, accepted, 3)
    assert len(strong_keys) < len(pairs.keys)  # the strong judge did not judge everything
    assert missing_calls(spec, plan_of(spec)) == 0  # type: ignore[arg-type]
    before = (spec.run_dir / "verdicts.jsonl").read_bytes()
    ensure_run(spec, offline=True, echo=lambda _: None)
    assert (spec.run_dir / "verdicts.jsonl").read_bytes() == before
    assert spec.results_path.exists()


def test_the_runs_other_judges_judge_every_pair_beside_the_cascade(
    project: Path, openai_server: OpenAIServer
) -> None:
    write_project(project, openai_server.url)
    runs = json.loads((project / "runs.json").read_text())
    runs["runs"][0]["judges"] = [STRONG, "openai/panel-judge"]
    (project / "runs.json").write_text(json.dumps(runs))
    write_answers(resolve_run("demo"))
    openai_server.responder = responder
    result = CliRunner().invoke(cli, ["judge", "--run", "demo"])
    assert result.exit_code == 0, result.output
    assert len(calls_by(openai_server, CHEAP)) == 6 and len(calls_by(openai_server, STRONG)) == 4
    assert len(calls_by(openai_server, "openai/panel-judge")) == 6


def test_build_never_asks_a_first_pass_without_logprobs_again(
    run: RunSpec, openai_server: OpenAIServer
) -> None:
    from konkord.stages.pipeline import ensure_run

    openai_server.responder = lambda body, n: Reply(content="VERDICT: 1")
    with pytest.raises(KonkordError, match="answered without log-probabilities"):
        ensure_run(run, offline=False, echo=lambda _: None)
    made = len(openai_server.requests)
    assert made and not calls_by(openai_server, STRONG)
    for _ in range(2):
        with pytest.raises(KonkordError, match=r"build does not ask it again"):
            ensure_run(run, offline=False, echo=lambda _: None)
    assert len(openai_server.requests) == made  # before: 6 more failing calls per build
