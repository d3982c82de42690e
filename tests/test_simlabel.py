"""Simulated labellers: labels in the real format, read from visible quality, seeded, resumable."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from konkord.configuration.runspec import RunSpec, resolve_run
from konkord.evidence.log import EvidenceLog
from konkord.providers.llm import ModelClient
from konkord.stages.label.simulated import simulate_labels, simulate_plan_labels, true_winner
from konkord.stages.run import current_answers, generate_answers

REPO = Path(__file__).resolve().parent.parent
SUPPORT = REPO / "suites" / "support_replies.yaml"
MODELS = ["sim/atlas:strength=1.5", "sim/bolt:strength=0", "sim/cog:strength=-1.5"]
POOL = 24 * 3  # tasks x pairs


def _make_run(project: Path) -> RunSpec:
    runs = {
        "runs": [
            {
                "name": "support-demo",
                "suite": "suite.yaml",
                "models": MODELS,
                "judges": ["sim-judge/fair"],
                "label_plan": {
                    "n": 15,
                    "seed": 4,
                    "simulated_labellers": [
                        {"name": "sim-ann", "accuracy": 0.9},
                        {"name": "sim-bob", "accuracy": 0.7},
                    ],
                },
            }
        ]
    }
    (project / "runs.json").write_text(json.dumps(runs))
    shutil.copy(SUPPORT, project / "suite.yaml")  # a suite must be inside the project
    spec = resolve_run("support-demo")
    log = EvidenceLog(spec.run_dir)
    summary = asyncio.run(
        generate_answers(log, spec.suite, spec.models, spec.settings, ModelClient(cache_dir=None))
    )
    assert summary.failed == 0
    return spec


def _labels(spec: RunSpec, labeller: str) -> dict[tuple[str, str, str], dict[str, object]]:
    return {
        (r["task_id"], r["model_a"], r["model_b"]): r
        for r in EvidenceLog(spec.run_dir).records("labels")
        if r["labeller"] == labeller
    }


def _truths(spec: RunSpec) -> dict[tuple[str, str, str], str]:
    answers = current_answers(EvidenceLog(spec.run_dir), spec.suite, spec.settings)
    out = {}
    for task in spec.suite.tasks:
        for k, a in enumerate(sorted(MODELS)):
            for b in sorted(MODELS)[k + 1 :]:
                text_a, text_b = answers[(task.id, a)]["text"], answers[(task.id, b)]["text"]
                out[(task.id, a, b)] = true_winner(spec.suite, task, a, text_a, b, text_b)
    return out


@pytest.fixture
def spec(project: Path) -> RunSpec:
    return _make_run(project)


def test_a_perfect_labeller_writes_the_truth_in_the_label_format(spec: RunSpec) -> None:
    assert simulate_labels(spec, "sim-perfect", 1.0, 20, seed=1) == 20
    labels = _labels(spec, "sim-perfect")
    truths = _truths(spec)
    assert len(labels) == 20
    for key, record in labels.items():
        assert record["kind"] == "label" and record["source"] == "simulated"
        assert record["winner"] == truths[key]
        assert record["shown_first"] in key[1:]
        assert record["created_at"]
    # the field is ordered, so the truth is not all ties: the reader sees the defects
    assert {truths[k] for k in labels} - {"tie"}


def test_labelling_again_adds_only_what_is_missing(spec: RunSpec) -> None:
    assert simulate_labels(spec, "sim-ann", 0.8, 10, seed=2) == 10
    first = _labels(spec, "sim-ann")
    assert simulate_labels(spec, "sim-ann", 0.8, 10, seed=2) == 0
    assert simulate_labels(spec, "sim-ann", 0.8, 25, seed=2) == 15
    assert simulate_labels(spec, "sim-ann", 0.8, 10_000, seed=2) == POOL - 25
    again = _labels(spec, "sim-ann")
    assert all(again[key]["winner"] == record["winner"] for key, record in first.items())


def test_labels_are_a_function_of_the_seed(
    project: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _make_run(project)
    simulate_labels(spec, "sim-ann", 0.6, 30, seed=7)
    winners = {k: r["winner"] for k, r in _labels(spec, "sim-ann").items()}
    other = tmp_path_factory.mktemp("again")
    monkeypatch.chdir(other)
    spec_again = _make_run(other)
    simulate_labels(spec_again, "sim-ann", 0.6, 30, seed=7)
    simulate_labels(spec_again, "sim-ann-seed-8", 0.6, 30, seed=8)
    assert winners == {k: r["winner"] for k, r in _labels(spec_again, "sim-ann").items()}
    assert set(winners) != set(_labels(spec_again, "sim-ann-seed-8"))


def test_accuracy_sets_how_often_the_label_is_the_truth(spec: RunSpec) -> None:
    truths = _truths(spec)
    simulate_labels(spec, "sim-wrong", 0.0, POOL, seed=0)
    simulate_labels(spec, "sim-fair", 0.7, POOL, seed=0)
    wrong = _labels(spec, "sim-wrong")
    fair = _labels(spec, "sim-fair")
    assert len(wrong) == len(fair) == POOL
    assert all(r["winner"] != truths[k] for k, r in wrong.items())
    share = sum(r["winner"] == truths[k] for k, r in fair.items()) / POOL
    assert 0.55 <= share <= 0.85


def test_the_label_plan_runs_every_simulated_labeller(spec: RunSpec) -> None:
    assert simulate_plan_labels(spec) == {"sim-ann": 15, "sim-bob": 15}
    assert simulate_plan_labels(spec) == {"sim-ann": 0, "sim-bob": 0}


def test_an_accuracy_outside_0_1_is_refused(spec: RunSpec) -> None:
    with pytest.raises(ValueError, match=r"accuracy 1\.5 must be between 0 and 1"):
        simulate_labels(spec, "sim-x", 1.5, 5, seed=0)
