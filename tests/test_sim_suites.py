"""How the simulated models find a task's reference: the suites of the working directory, read
again when one changes, and the price litellm is told for a simulated model (zero)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
import yaml

from konkord import sim
from konkord.providers.llm import CallSettings, ModelClient
from konkord.providers.loading import load_litellm


def _suite(path: Path, tasks: dict[str, str]) -> None:
    """A suite of tasks {prompt: reference}, its file's time moved on (a change is seen even
    within the file system's time resolution)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    listed = [
        {"id": f"t{k}", "prompt": prompt, "reference": reference}
        for k, (prompt, reference) in enumerate(tasks.items())
    ]
    existed = path.exists()
    later = path.stat().st_mtime_ns + 10**9 if existed else None
    path.write_text(yaml.safe_dump({"name": path.stem, "rubric": "Be right.", "tasks": listed}))
    if later is not None:
        os.utime(path, ns=(later, later))


@pytest.fixture
def empty_registry(project: Path) -> Path:
    sim.tasks._REGISTRY.clear()
    return project


def test_a_suite_written_after_a_miss_is_read(empty_registry: Path) -> None:
    assert sim.reference_for("Add two numbers.") is None
    _suite(empty_registry / "suites" / "maths.yaml", {"Add two numbers.": "a + b"})
    assert sim.reference_for("Add two numbers.") == "a + b"


def test_a_task_added_to_a_suite_already_read_is_found(empty_registry: Path) -> None:
    path = empty_registry / "suites" / "maths.yaml"
    _suite(path, {"Add two numbers.": "a + b"})
    assert sim.reference_for("Add two numbers.") == "a + b"
    assert sim.reference_for("Multiply two numbers.") is None
    _suite(path, {"Add two numbers.": "a + b", "Multiply two numbers.": "a * b"})
    assert sim.reference_for("Multiply two numbers.") == "a * b"


def test_a_suite_outside_suites_is_read_once_runs_json_names_it(empty_registry: Path) -> None:
    path = empty_registry / "elsewhere" / "words.yaml"
    _suite(path, {"Spell cat.": "c-a-t"})
    assert sim.reference_for("Spell cat.") is None  # no run names it yet
    runs = {"runs": [{"name": "r", "suite": "elsewhere/words.yaml", "models": ["sim/a"]}]}
    (empty_registry / "runs.json").write_text(json.dumps(runs))
    assert sim.reference_for("Spell cat.") == "c-a-t"
    _suite(path, {"Spell cat.": "c-a-t", "Spell dog.": "d-o-g"})  # named, and then changed
    assert sim.reference_for("Spell dog.") == "d-o-g"


def test_a_run_manifest_naming_a_suite_is_seen(empty_registry: Path) -> None:
    _suite(empty_registry / "kept" / "words.yaml", {"Spell owl.": "o-w-l"})
    assert sim.reference_for("Spell owl.") is None
    (empty_registry / "runs" / "r").mkdir(parents=True)
    (empty_registry / "runs" / "r" / "run.json").write_text(json.dumps({"suite": "kept/words.yaml"}))
    assert sim.reference_for("Spell owl.") == "o-w-l"


def test_each_working_directory_has_its_own_suites(
    empty_registry: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert sim.reference_for("Name a colour.") is None
    other = tmp_path_factory.mktemp("other")
    _suite(other / "suites" / "colours.yaml", {"Name a colour.": "red"})
    monkeypatch.chdir(other)
    assert sim.reference_for("Name a colour.") == "red"


def test_a_simulated_reply_is_free_and_litellm_prices_the_model_at_zero(project: Path) -> None:
    judge = "sim-judge/free-check:accuracy=0.9"
    messages = [{"role": "user", "content": "hi"}]
    result = asyncio.run(ModelClient(cache_dir=None).complete(judge, messages, CallSettings()))
    assert result.ok and result.cost_usd == 0.0
    info = load_litellm().get_model_info(judge)
    assert info["input_cost_per_token"] == 0.0 and info["output_cost_per_token"] == 0.0
