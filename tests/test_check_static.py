"""Static checks read the code and never run it."""

from __future__ import annotations

from pathlib import Path

import pytest

from konkord.checks.runner import run_check
from konkord.checks.static import check_compiles, check_mypy, check_ruff
from konkord.configuration.suite import Task

GOOD = "def add(a: int, b: int) -> int:\n    return a + b\n"
TASK = Task(id="t", prompt="p", checks=("compiles", "ruff_clean", "mypy_clean"))


def test_compiles_passes_good_code_and_names_the_syntax_error_line() -> None:
    assert check_compiles(GOOD).passed
    bad = check_compiles("x = 1\ndef f(:\n")
    assert not bad.passed
    assert bad.reason is not None and bad.reason.startswith("syntax error at line 2")
    assert bad.sandbox == "static"


def test_compiles_rejects_null_bytes_without_crashing() -> None:
    result = check_compiles("x = 1\0")
    assert not result.passed and result.reason is not None


def test_static_checks_never_execute_the_answer(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    code = f"open({str(marker)!r}, 'w').write('ran')\nimport os\n"
    for check in ("compiles", "ruff_clean", "mypy_clean"):
        run_check(check, TASK, code, "python")
    assert not marker.exists()


def test_ruff_finds_an_unused_import_and_passes_clean_code() -> None:
    assert check_ruff(GOOD).passed
    result = check_ruff("import os\n" + GOOD)
    assert not result.passed
    assert result.reason is not None and "F401" in result.reason
    assert "answer.py:1:8" in result.output


def test_ruff_ignores_the_callers_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ruff.toml").write_text('[lint]\nselect = ["D"]\n')
    monkeypatch.chdir(tmp_path)
    assert check_ruff(GOOD).passed  # D (docstring) rules would fail it


def test_mypy_finds_a_type_error_and_passes_clean_code() -> None:
    assert check_mypy(GOOD).passed
    result = check_mypy("def f(x: int) -> str:\n    return x\n")
    assert not result.passed
    assert result.reason is not None and "Incompatible return value type" in result.reason


def test_mypy_reports_a_syntax_error_as_a_problem_not_a_crash() -> None:
    result = check_mypy("def f(:\n")
    assert not result.passed
    assert result.reason is not None and "[syntax]" in result.reason
    assert "failed to run" not in result.reason


def test_checks_run_on_the_fenced_block_only() -> None:
    answer = f"Sure! Here it is:\n```python\n{GOOD}```\nThis adds numbers."
    for check in ("compiles", "ruff_clean", "mypy_clean"):
        assert run_check(check, TASK, answer, "python").passed, check
