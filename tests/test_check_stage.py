"""The check stage: every declared check on every answer, resumable, one bad answer stops nothing."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import FAKE_KEY, REPO

from konkord.checks.runner import run_check, run_tests
from konkord.checks.sandbox import Limits, bwrap_path
from konkord.cli import cli
from konkord.configuration.runspec import RunSpec, write_manifest
from konkord.configuration.suite import load_suite
from konkord.evidence.log import EvidenceLog, now_iso
from konkord.stages.check import (
    check_pass_rates,
    check_run,
    current_check_results,
    load_check_results,
    missing_checks,
    passes_tests,
)
from konkord.stages.run import answer_key_hash, answer_messages

needs_bwrap = pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")
# A wall limit no healthy run meets on a loaded machine; the hostile answer loops and is
# stopped by the CPU limit.
LIMITS = Limits(wall_s=120.0, cpu_s=2, memory_mb=256, processes=16, output_bytes=100_000)

SUITE = """\
name: mini
answer_language: python
rubric: Correct code wins.
tasks:
  - id: add
    prompt: Write add(a, b).
    checks: [compiles, ruff_clean, tests]
    tests: |
      assert add(2, 3) == 5
      assert add(-1, 1) == 0
  - id: double
    prompt: Write double(x).
    checks: [compiles, tests]
    tests: |
      assert double(4) == 8
  - id: essay
    prompt: Say hello.
"""

ANSWERS = {
    ("add", "m/good"): "Here:\n```python\ndef add(a, b):\n    return a + b\n```\n",
    ("add", "m/bad"): "```python\nimport os\n\ndef add(a, b):\n    return a - b\n```",
    ("add", "m/hostile"): "```python\nwhile True:\n    pass\n```",
    ("double", "m/good"): "```python\ndef double(x):\n    return 2 * x\n```",
    ("double", "m/bad"): "I cannot help with that.",
    ("double", "m/hostile"): (
        "```python\nimport os\nprint(dict(os.environ))\ndef double(x):\n    return x * 2\n```"
    ),
    ("essay", "m/good"): "Hello!",
    ("essay", "m/bad"): "Hi.",
    ("essay", "m/hostile"): "Hey.",
}


def add_answer(spec: RunSpec, task_id: str, model: str, text: str | None,
               error: str | None = None) -> None:
    """Append an answer record exactly as the run stage would key it."""
    task = spec.suite.task(task_id)
    EvidenceLog(spec.run_dir).append("answers", {
        "kind": "answer",
        "task_id": task_id,
        "model": model,
        "settings_hash": answer_key_hash(answer_messages(spec.suite, task), spec.settings),
        "text": text,
        "error": error,
        "created_at": now_iso(),
    })


@pytest.fixture
def spec(project: Path) -> RunSpec:
    (project / "mini.yaml").write_text(SUITE)
    run_spec = RunSpec(
        name="mini",
        suite_path=Path("mini.yaml"),
        suite=load_suite("mini.yaml"),
        models=("m/bad", "m/good", "m/hostile"),
        results_path=Path("results/mini.json"),
    )
    write_manifest(run_spec)
    for (task_id, model), text in ANSWERS.items():
        add_answer(run_spec, task_id, model, text)
    return run_spec


@needs_bwrap
def test_every_declared_check_is_recorded_and_a_hostile_answer_stops_nothing(
    spec: RunSpec,
) -> None:
    assert missing_checks(spec) == 15
    summary = check_run(spec, concurrency=2, sandbox="bwrap", limits=LIMITS)
    assert (summary.checked, summary.already_recorded) == (15, 0)
    results = load_check_results(EvidenceLog(spec.run_dir))
    assert len(results) == 15
    passed = {key: r["passed"] for key, r in results.items()}
    assert passed[("add", "m/good", "tests")] is True
    assert passed[("add", "m/bad", "tests")] is False
    assert passed[("add", "m/bad", "ruff_clean")] is False
    assert passed[("add", "m/bad", "compiles")] is True
    assert passed[("double", "m/bad", "compiles")] is False  # prose taken whole
    hostile = results[("add", "m/hostile", "tests")]
    assert hostile["passed"] is False and "limit" in hostile["reason"]
    assert passed[("double", "m/hostile", "tests")] is True  # the next answer ran normally
    record = results[("add", "m/bad", "tests")]
    assert record["sandbox"] == "bwrap" and record["kind"] == "check"
    assert record["reason"] == "test failed at tests.py line 1: assert add(2, 3) == 5"
    assert record["limits"]["wall_s"] == 120.0 and record["tests_sha"]
    assert results[("add", "m/good", "compiles")]["sandbox"] == "static"
    assert summary.totals == {"compiles": (5, 6), "ruff_clean": (2, 3), "tests": (3, 6)}
    assert FAKE_KEY not in (spec.run_dir / "checks.jsonl").read_text()
    assert "PATH" in results[("double", "m/hostile", "tests")]["output"]


@needs_bwrap
def test_a_rerun_checks_nothing_and_a_changed_answer_is_rechecked(spec: RunSpec) -> None:
    check_run(spec, sandbox="bwrap", limits=LIMITS)
    again = check_run(spec, sandbox="bwrap", limits=LIMITS)
    assert (again.checked, again.already_recorded) == (0, 15)
    add_answer(spec, "add", "m/bad", "```python\ndef add(a, b):\n    return a + b\n```")
    assert missing_checks(spec) == 3
    third = check_run(spec, sandbox="bwrap", limits=LIMITS)
    assert third.checked == 3
    assert passes_tests(spec)[("add", "m/bad")] is True


@needs_bwrap
def test_edited_tests_make_only_tests_results_stale(spec: RunSpec) -> None:
    check_run(spec, sandbox="bwrap", limits=LIMITS)
    edited = SUITE.replace("assert double(4) == 8", "assert double(5) == 10")
    Path("mini.yaml").write_text(edited)
    from dataclasses import replace

    changed = replace(spec, suite=load_suite("mini.yaml"))
    assert missing_checks(changed) == 3  # the three answers' `tests` on task double


def test_sandbox_none_is_recorded_and_redone_under_bwrap(spec: RunSpec) -> None:
    limited = RunSpec(**{**spec.__dict__, "models": ("m/good",)})
    summary = check_run(limited, sandbox="none", limits=LIMITS)
    results = load_check_results(EvidenceLog(spec.run_dir))
    assert summary.sandbox == "none"
    assert results[("add", "m/good", "tests")]["sandbox"] == "none"
    assert results[("add", "m/good", "tests")]["passed"] is True
    assert missing_checks(limited, "none") == 0
    assert missing_checks(limited, "bwrap") == 2  # the two tests results, not static ones


def test_a_tests_result_decided_inside_the_answers_process_is_redone(spec: RunSpec) -> None:
    limited = RunSpec(**{**spec.__dict__, "models": ("m/good",)})
    check_run(limited, sandbox="none", limits=LIMITS)
    log = EvidenceLog(spec.run_dir)
    old = dict(load_check_results(log)[("add", "m/good", "tests")])
    assert old["verdict_by"] == "harness"
    del old["verdict_by"]  # as the launcher before the harness wrote it
    log.append("checks", old)
    assert missing_checks(limited, "none") == 1
    assert ("add", "m/good", "tests") not in current_check_results(limited)
    check_run(limited, sandbox="none", limits=LIMITS)
    assert missing_checks(limited, "none") == 0


def test_failed_generations_are_not_checked_but_counted(spec: RunSpec) -> None:
    add_answer(spec, "add", "m/down", None, error="rate limited")
    limited = RunSpec(**{**spec.__dict__, "models": ("m/good", "m/down")})
    summary = check_run(limited, sandbox="none", limits=LIMITS)
    assert summary.no_answer == 2  # add failed to generate, double was never answered
    assert summary.checked == 5
    assert ("add", "m/down", "compiles") not in load_check_results(EvidenceLog(spec.run_dir))


def test_missing_bwrap_refuses_before_running_anything(
    spec: RunSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("konkord.checks.sandbox.shutil.which", lambda name: None)
    result = CliRunner().invoke(cli, ["check", "--run", "mini"])
    assert result.exit_code == 2
    assert "apt-get install bubblewrap" in result.output
    assert not (spec.run_dir / "checks.jsonl").exists()


def test_cli_sandbox_none_warns_and_summarises(spec: RunSpec) -> None:
    limited = RunSpec(**{**spec.__dict__, "models": ("m/good", "m/bad")})
    write_manifest(limited)
    result = CliRunner().invoke(cli, ["check", "--run", "mini", "--sandbox", "none"])
    assert result.exit_code == 0, result.output
    assert "WITHOUT isolation" in result.output
    assert "checked 10 (passed 6, failed 4), already recorded 0; sandbox none" in result.output
    assert "tests       2/4 answers pass" in result.output
    assert "ruff_clean  1/2 answers pass" in result.output


def test_help_states_the_default_limits() -> None:
    result = CliRunner().invoke(cli, ["check", "--help"])
    text = " ".join(result.output.split())
    defaults = Limits()
    assert f"wall time {defaults.wall_s:g} s" in text
    assert f"CPU time {defaults.cpu_s} s" in text
    assert f"memory {defaults.memory_mb} MB" in text
    assert f"{defaults.processes} processes" in text
    assert f"{defaults.output_bytes} bytes of output" in text
    assert f"{defaults.disk_mb} MB of disk" in text


def test_pass_rates_have_task_bootstrap_intervals(spec: RunSpec) -> None:
    benign = RunSpec(**{**spec.__dict__, "models": ("m/good", "m/bad")})
    check_run(benign, sandbox="none", limits=LIMITS)
    rates = {(r.model, r.check): r for rs in check_pass_rates(benign).values() for r in rs}
    good = rates[("m/good", "tests")]
    assert (good.passed, good.n, good.rate, good.low, good.high) == (2, 2, 1.0, 1.0, 1.0)
    bad = rates[("m/bad", "compiles")]
    assert (bad.passed, bad.n, bad.rate) == (1, 2, 0.5)
    assert bad.low == 0.0 and bad.high == 1.0


class _BreakReturns(ast.NodeTransformer):
    """Every `return value` becomes `return None`: a generic, deliberately broken solution."""

    def visit_Return(self, node: ast.Return) -> ast.Return:
        return ast.Return(value=None) if node.value is not None else node


@needs_bwrap
def test_codegen_suite_references_pass_and_broken_copies_fail() -> None:
    path = REPO / "suites" / "python_codegen.yaml"
    if not path.exists():
        pytest.skip("suites/python_codegen.yaml is not written yet")
    suite = load_suite(path)
    tested = [task for task in suite.tasks if "tests" in task.checks]
    assert tested
    for task in tested:
        assert task.reference is not None, task.id
        answer = f"```python\n{task.reference}```"
        for check in task.checks:
            if check != "mypy_clean":  # mypy is slow; compiles and ruff stand for static
                result = run_check(check, task, answer, suite.answer_language, Limits(), "bwrap")
                assert result.passed, f"{task.id} {check}: {result.reason}"
        broken = ast.unparse(_BreakReturns().visit(ast.parse(task.reference)))
        assert broken != task.reference
        failed = run_tests(broken, task.tests or "", Limits(), "bwrap")
        assert not failed.passed, f"{task.id}: the tests pass a solution that returns None"


def test_records_are_json_lines_with_the_documented_fields(spec: RunSpec) -> None:
    limited = RunSpec(**{**spec.__dict__, "models": ("m/good",)})
    check_run(limited, sandbox="none", limits=LIMITS)
    records = [json.loads(line)
               for line in (spec.run_dir / "checks.jsonl").read_text().splitlines()]
    # every check declared for m/good's answers, once: add (3 checks) and double (2)
    assert sorted((r["task_id"], r["check"]) for r in records) == [
        ("add", "compiles"), ("add", "ruff_clean"), ("add", "tests"),
        ("double", "compiles"), ("double", "tests"),
    ]
    for record in records:
        assert record["kind"] == "check" and record["model"] == "m/good"
        for field in ("kind", "created_at", "task_id", "model", "check", "answer_sha",
                      "passed", "reason", "duration_s", "output", "sandbox"):
            assert field in record, field


def test_a_checker_error_is_not_recorded_and_the_run_goes_on(
    spec: RunSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    import konkord.stages.check as stage

    real = stage.run_check

    def flaky(check: str, task: Any, *args: Any) -> Any:
        if (task.id, check) == ("double", "compiles"):
            raise OSError("cannot fork")
        return real(check, task, *args)

    monkeypatch.setattr(stage, "run_check", flaky)
    limited = RunSpec(**{**spec.__dict__, "models": ("m/good",)})
    summary = check_run(limited, sandbox="none", limits=LIMITS)
    assert summary.checked == 4
    assert summary.errors == ["double / m/good / compiles: cannot fork"]
    assert missing_checks(limited, "none") == 1
