"""The offline `sim/` and `sim-judge/` providers: names, visible quality, the judge's rule, and
the real run and judge stages driven through litellm with no network."""

from __future__ import annotations

import ast
import asyncio
import json
import random
import shutil
from pathlib import Path

import pytest

from konkord import sim
from konkord.configuration.judge_frame import (
    compose_system_prompt,
    compose_user_message,
    parse_verdict,
)
from konkord.configuration.runspec import resolve_run
from konkord.configuration.suite import Suite, load_suite
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog
from konkord.evidence.verdicts import combine_verdicts, load_verdicts
from konkord.providers.llm import CallSettings, ModelClient
from konkord.stages.run import answer_messages, current_answers, generate_answers

REPO = Path(__file__).resolve().parent.parent
CODEGEN = REPO / "suites" / "python_codegen.yaml"
SUPPORT = REPO / "suites" / "support_replies.yaml"
STRONG, WEAK = "sim/strong:strength=9,task_effect=0", "sim/weak:strength=-9,task_effect=0"


def _answer(model: str, suite: Suite, index: int = 0, seed: int = 0) -> str:
    messages = answer_messages(suite, suite.tasks[index])
    return sim.sim_answer(model.split("/", 1)[1], list(messages), seed)


def _judge(judge: str, suite: Suite, index: int, first: str, second: str, seed: int = 0) -> str:
    messages = [
        {"role": "system", "content": compose_system_prompt(suite)},
        {"role": "user", "content": compose_user_message(suite.tasks[index], suite, first, second)},
    ]
    return sim.sim_judge_answer(judge.split("/", 1)[1], messages, seed)


# --- names ------------------------------------------------------------------------------------


def test_parameters_are_read_from_the_name() -> None:
    params = sim.model_params("sim/atlas:strength=1.5,task_effect=0.2,verbosity=0")
    assert (params.name, params.strength, params.task_effect, params.verbosity) == (
        "atlas",
        1.5,
        0.2,
        0.0,
    )
    judge = sim.judge_params("sim-judge/first:tie_rate=0.3")
    assert (judge.accuracy, judge.position_bias, judge.tie_rate) == (0.0, 1.0, 0.3)


def test_defaults_come_from_the_name_and_are_stable() -> None:
    one, again, other = (sim.model_params(n) for n in ("sim/atlas", "sim/atlas", "sim/bolt"))
    assert one == again
    assert one.strength != other.strength
    assert -2.5 <= one.strength <= 2.5


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("sim/atlas:strenght=1", 'unknown parameter "strenght" (valid: strength, task_effect'),
        ("sim/atlas:strength", '"strength" is not key=number'),
        ("sim-judge/x:accuracy=1.5", "accuracy=1.5 must be between 0 and 1"),
        ("sim/:strength=1", "a simulated model needs a name"),
    ],
)
def test_malformed_names_are_refused_with_the_reason(name: str, message: str) -> None:
    with pytest.raises(KonkordError) as caught:
        sim.validate_sim_name(name)
    assert message in str(caught.value)


# --- answers show their quality ---------------------------------------------------------------


def test_code_answers_are_the_reference_or_a_plausible_bug() -> None:
    suite = load_suite(CODEGEN)
    sim.register_suite(suite)
    for index in range(4):
        task = suite.tasks[index]
        view = sim.TaskView(task.prompt, suite.context or "", task.reference, "python")
        good, bad = _answer(STRONG, suite, index), _answer(WEAK, suite, index)
        for text in (good, bad):
            assert text.count("```python") == 1
            code = text.split("```python\n", 1)[1].split("```", 1)[0]
            ast.parse(code)  # a plausible bug still parses
        assert sim.read_answer(good, view).defects == 0
        assert sim.read_answer(bad, view).defects >= 1


def test_support_answers_keep_or_break_the_policy() -> None:
    suite = load_suite(SUPPORT)
    sim.register_suite(suite)
    task = suite.tasks[1]
    view = sim.TaskView(task.prompt, suite.context or "", task.reference, None)
    good, bad = _answer(STRONG, suite, 1), _answer(WEAK, suite, 1)
    assert task.reference is not None and task.reference.strip().splitlines()[0] in good
    assert sim.EXCEPTION_PHRASES[0] in bad
    assert sim.read_answer(good, view).defects == 0
    assert sim.read_answer(bad, view).defects == 3


def test_an_unknown_task_gets_generic_text_with_visible_slips() -> None:
    messages = [{"role": "user", "content": "Name a colour nobody has seen."}]
    bad = sim.sim_answer("weak:strength=-9,task_effect=0", messages, 0)
    reading = sim.read_answer(bad, sim.TaskView("Name a colour nobody has seen."))
    assert reading.defects == 3 and "wrong" in reading.note


def test_answers_are_deterministic_and_the_seed_matters() -> None:
    suite = load_suite(CODEGEN)
    sim.register_suite(suite)
    model = "sim/mid:strength=0"
    first = [_answer(model, suite, k, seed=0) for k in range(10)]
    assert first == [_answer(model, suite, k, seed=0) for k in range(10)]
    assert first != [_answer(model, suite, k, seed=1) for k in range(10)]


# --- the judge's rule -------------------------------------------------------------------------


def test_an_accurate_judge_prefers_the_answer_with_fewer_defects_in_both_orders() -> None:
    suite = load_suite(CODEGEN)
    good, bad = _answer(STRONG, suite, 2), _answer(WEAK, suite, 2)
    judge = "sim-judge/exact:accuracy=1"
    one = parse_verdict(_judge(judge, suite, 2, good, bad))
    two = parse_verdict(_judge(judge, suite, 2, bad, good))
    assert (one.position, two.position) == ("1", "2")
    assert "reference" in one.rationale


@pytest.mark.parametrize(
    ("judge", "expected"),
    [
        ("sim-judge/first", {"1"}),
        ("sim-judge/x:accuracy=0,tie_rate=1", {"tie"}),
        ("sim-judge/x:accuracy=0,tie_rate=0,length_bias=1", {"2"}),
    ],
)
def test_an_unsure_judge_follows_its_biases(judge: str, expected: set[str]) -> None:
    suite = load_suite(CODEGEN)
    good = _answer(STRONG, suite, 0)
    longer = good + "\n\nA long paragraph of explanation that adds nothing to the code. " * 3
    seen = {
        parse_verdict(_judge(judge, suite, 0, good, longer, seed)).position for seed in range(8)
    }
    assert seen == expected


def test_position_bias_sets_the_share_of_first_answers_when_unsure() -> None:
    params = sim.judge_params("sim-judge/x:accuracy=0,tie_rate=0,position_bias=0.7")
    readings = (sim.Reading(0, "ok"), sim.Reading(2, "bad"))
    rng = random.Random(5)
    firsts = sum(sim.judge_decision(params, readings, (10, 10), rng)[0] == "1" for _ in range(2000))
    assert 0.66 < firsts / 2000 < 0.74


# --- through litellm, the run stage and the judge stage ---------------------------------------


@pytest.fixture
def sim_run(project: Path) -> str:
    """A run of three sim models on the codegen suite, listed in a runs.json (no key needed)."""
    runs = {
        "runs": [
            {
                "name": "demo",
                "suite": "codegen.yaml",
                "models": [STRONG, "sim/mid:strength=0,task_effect=0", WEAK],
                "judges": ["sim-judge/fair"],
            }
        ]
    }
    (project / "runs.json").write_text(json.dumps(runs))
    shutil.copy(CODEGEN, project / "codegen.yaml")  # a suite must be inside the project
    sim.tasks._REGISTRY.clear()  # the references must be found through runs.json
    spec = resolve_run("demo")
    summary = asyncio.run(
        generate_answers(
            EvidenceLog(spec.run_dir),
            spec.suite,
            spec.models,
            spec.settings,
            ModelClient(cache_dir=None),
        )
    )
    assert summary.failed == 0 and summary.generated == 3 * len(spec.suite.tasks)
    return "demo"


def test_run_and_judge_stages_rank_the_sim_field_in_order(sim_run: str) -> None:
    from konkord.stages.judge.judge import judge_run

    spec = resolve_run(sim_run)
    log = EvidenceLog(spec.run_dir)
    answers = current_answers(log, spec.suite, spec.settings)
    assert all("```python" in r["text"] for r in answers.values())
    summary = asyncio.run(judge_run(spec, ["sim-judge/fair"], ModelClient(cache_dir=None)))
    assert summary.tallies["sim-judge/fair"].failed == 0
    combined = combine_verdicts(load_verdicts(log, "sim-judge/fair", summary.frame_hash))
    score = dict.fromkeys(spec.models, 0.0)
    for verdict in combined:
        if verdict.winner == "tie":
            score[verdict.model_a] += 0.5
            score[verdict.model_b] += 0.5
        elif verdict.winner is not None:
            score[verdict.winner] += 1
    assert sorted(spec.models, key=lambda m: -score[m]) == list(spec.models)


def test_a_pure_position_judge_flips_every_pair(sim_run: str) -> None:
    from konkord.stages.judge.judge import judge_run

    spec = resolve_run(sim_run)
    summary = asyncio.run(judge_run(spec, ["sim-judge/first"], ModelClient(cache_dir=None)))
    combined = combine_verdicts(
        load_verdicts(EvidenceLog(spec.run_dir), "sim-judge/first", summary.frame_hash)
    )
    assert combined and all(v.flipped and v.winner == "tie" for v in combined)


def test_a_malformed_name_fails_permanently_without_retries(project: Path) -> None:
    client = ModelClient(cache_dir=None, backoff_base_s=0.0)
    result = asyncio.run(
        client.complete("sim/x:speed=3", [{"role": "user", "content": "hi"}], CallSettings())
    )
    assert result.error_kind == "permanent" and result.attempts == 1
    assert 'unknown parameter "speed"' in (result.error or "")
