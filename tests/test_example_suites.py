"""The example suites are sound, their tests can fail, and plausible_bug plants realistic bugs.

A newcomer reads the two example suites first, and `konkord check` trusts the codegen suite's
tests as ground truth. So: every reference passes its own tests, and a copy of it carrying a
plausible bug fails them; otherwise "passes the tests" would prove nothing.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from konkord.configuration.suite import KNOWN_CHECKS, Suite, Task, load_suite
from konkord.sim.mutate import plausible_bug, plausible_bugs

REPO = Path(__file__).resolve().parent.parent
CODEGEN = load_suite(REPO / "suites" / "python_codegen.yaml")
SUPPORT = load_suite(REPO / "suites" / "support_replies.yaml")
TIMEOUT_S = 20  # generous: the machine is shared; a healthy run takes well under a second


def _run_python(code: str) -> subprocess.CompletedProcess[str] | None:
    """Run code in a fresh, isolated interpreter; None when it does not finish in time."""
    try:
        return subprocess.run(
            [sys.executable, "-I", "-c", code],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return None


def _code_tasks() -> list[Task]:
    return [task for task in CODEGEN.tasks if task.reference and task.tests]


@pytest.mark.parametrize(
    ("suite", "minimum"), [(CODEGEN, 25), (SUPPORT, 20)], ids=["codegen", "support"]
)
def test_suite_meets_its_counts_with_unique_ids(suite: Suite, minimum: int) -> None:
    ids = [task.id for task in suite.tasks]
    assert len(ids) >= minimum
    assert len(set(ids)) == len(ids)
    assert all(task.reference and task.reference.strip() for task in suite.tasks)
    assert "verdict" not in suite.rubric.lower()


def test_codegen_suite_declares_every_check_on_every_task() -> None:
    assert CODEGEN.answer_language == "python"
    for task in CODEGEN.tasks:
        assert task.checks == KNOWN_CHECKS, task.id
        assert task.tests and "assert" in task.tests, task.id


def test_support_suite_is_prose_with_a_numbered_policy() -> None:
    assert SUPPORT.answer_language is None
    assert SUPPORT.context and SUPPORT.context.strip()
    for number in range(1, 11):
        assert f"\n{number}. " in SUPPORT.context, number
    assert all(not task.checks and task.tests is None for task in SUPPORT.tasks)


@pytest.mark.parametrize("task", _code_tasks(), ids=lambda task: task.id)
def test_reference_passes_its_own_tests(task: Task) -> None:
    assert task.reference and task.tests
    result = _run_python(task.reference + "\n" + task.tests)
    assert result is not None, f"{task.id}: the reference did not finish in {TIMEOUT_S} s"
    assert result.returncode == 0, f"{task.id}: {result.stderr[-2000:]}"


@pytest.mark.parametrize("task", _code_tasks(), ids=lambda task: task.id)
def test_a_plausible_bug_fails_the_tests(task: Task) -> None:
    assert task.reference and task.tests
    buggy = plausible_bug(task.reference, seed=0)
    assert buggy != task.reference
    result = _run_python(buggy + "\n" + task.tests)
    diff = "".join(difflib.unified_diff(task.reference.splitlines(True), buggy.splitlines(True)))
    assert result is None or result.returncode != 0, f"{task.id}: the tests missed\n{diff}"


# Runs every candidate bug of every task in one interpreter, each in a fresh namespace under a
# timer, because a subprocess per candidate (several hundred) would take minutes. A bug that
# makes the code loop forever is caught by the timer, which counts as failing the tests.
_KILL_HARNESS = """
import json, resource, signal, sys

class Timeout(Exception):
    pass

def on_alarm(signum, frame):
    raise Timeout()

signal.signal(signal.SIGALRM, on_alarm)
resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))
survivors = []
for item in json.load(sys.stdin):
    for mutant in item["mutants"]:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        try:
            exec(compile(mutant + "\\n" + item["tests"], item["id"], "exec"), {})
        except Exception:
            continue
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        survivors.append([item["id"], mutant])
print(json.dumps(survivors))
"""


def test_the_tests_catch_most_plausible_bugs() -> None:
    """Beyond seed 0: nearly every candidate bug fails; the rest are equivalent rewrites."""
    items = [
        {"id": task.id, "tests": task.tests, "mutants": plausible_bugs(task.reference)}
        for task in _code_tasks()
        if task.reference
    ]
    total = sum(len(item["mutants"]) for item in items)
    result = subprocess.run(
        [sys.executable, "-I", "-c", _KILL_HARNESS],
        input=json.dumps(items),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    survivors = json.loads(result.stdout)
    assert total >= 5 * len(items)
    assert len(survivors) <= 0.1 * total, [task_id for task_id, _ in survivors]


def _ruff() -> list[str] | None:
    beside = Path(sys.executable).with_name("ruff")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("ruff")
    if found:
        return [found]
    return [sys.executable, "-m", "ruff"] if importlib.util.find_spec("ruff") else None


def test_references_are_ruff_clean(tmp_path: Path) -> None:
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    for task in _code_tasks():
        assert task.reference
        (tmp_path / f"{task.id.replace('-', '_')}.py").write_text(task.reference)
    result = subprocess.run(
        [*ruff, "check", "--no-cache", "--config", str(REPO / "pyproject.toml"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout[-3000:]


def test_references_are_mypy_strict_clean(tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[dev]')")
    for task in _code_tasks():
        assert task.reference
        (tmp_path / f"{task.id.replace('-', '_')}.py").write_text(task.reference)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", os.devnull]
        + [str(path) for path in sorted(tmp_path.glob("*.py"))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:]


# --- plausible_bug on small, known inputs ---------------------------------------------------

GUARDED = '''def clamp_index(items: list[int], index: int) -> int:
    """The element at index, or 0 when index falls outside the list."""
    # an index past either end has no element
    if index < 0 or index >= len(items):
        return 0
    total = 0
    for i in range(index):
        total += items[i]
    return items[index] + total
'''


def _changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    removed: list[str] = []
    added: list[str] = []
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        if line.startswith("- "):
            removed.append(line[2:])
        elif line.startswith("+ "):
            added.append(line[2:])
    return removed, added


def test_seed_zero_flips_the_first_boundary_comparison() -> None:
    buggy = plausible_bug(GUARDED)
    assert "if index <= 0 or index >= len(items):" in buggy
    assert "# an index past either end has no element" in buggy


def test_candidates_are_distinct_parse_and_change_one_thing() -> None:
    candidates = plausible_bugs(GUARDED)
    assert len(candidates) == len(set(candidates)) >= 8
    original = ast.dump(ast.parse(GUARDED))
    for candidate in candidates:
        assert ast.dump(ast.parse(candidate)) != original
        removed, added = _changed_lines(GUARDED, candidate)
        assert (len(removed), len(added)) in {(1, 1), (3, 0)}, (removed, added)


def test_the_kinds_of_bug_people_write_are_all_offered() -> None:
    candidates = plausible_bugs(GUARDED)
    changes = [_changed_lines(GUARDED, candidate) for candidate in candidates]
    added = {line.strip() for _, lines in changes for line in lines}
    assert "for i in range(index - 1):" in added  # a loop that stops one short
    assert "if index < 0 and index >= len(items):" in added  # `and` for `or`
    assert "if index < 0 or index > len(items):" in added  # a boundary that lets one through
    dropped = [removed for removed, lines in changes if not lines]
    assert dropped == [
        [
            "    # an index past either end has no element",
            "    if index < 0 or index >= len(items):",
            "        return 0",
        ]
    ]


def test_seeds_are_deterministic_and_cycle_through_the_candidates() -> None:
    candidates = plausible_bugs(GUARDED)
    assert [plausible_bug(GUARDED, seed) for seed in range(len(candidates))] == candidates
    assert plausible_bug(GUARDED, len(candidates) + 2) == candidates[2]
    # and the same in a fresh interpreter under any hash seed (no set or dict order leaks in)
    code = (
        "import json, sys\nfrom konkord.sim.mutate import plausible_bug\n"
        "print(json.dumps(plausible_bug(sys.stdin.read(), 5)))"
    )
    for hash_seed in ("1", "2"):
        fresh = subprocess.run(
            [sys.executable, "-c", code], input=GUARDED, capture_output=True, text=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed}, check=True,
        )
        assert json.loads(fresh.stdout) == candidates[5]


def test_annotations_and_lone_statements_are_left_alone() -> None:
    annotated = "from typing import Annotated\n\n\ndef width(x: Annotated[int, 80]) -> int:\n    return x\n"
    lone_guard = "def check(flag: bool) -> None:\n    if flag:\n        return\n"
    for code in (annotated, lone_guard):
        assert plausible_bugs(code) == []
        with pytest.raises(ValueError, match="no plausible place"):
            plausible_bug(code)


def test_only_the_bug_changes_even_after_wide_characters() -> None:
    code = 'def tail(text: str) -> str:\n    return "é→" + text[1:]  # keep the arrow\n'
    candidates = plausible_bugs(code)
    assert set(candidates) == {
        'def tail(text: str) -> str:\n    return "é→" + text[2:]  # keep the arrow\n',
        'def tail(text: str) -> str:\n    return "é→" + text[0:]  # keep the arrow\n',
        'def tail(text: str) -> str:\n    return "é→" - text[1:]  # keep the arrow\n',
    }


def test_code_that_does_not_parse_is_refused() -> None:
    with pytest.raises(ValueError, match="does not parse"):
        plausible_bugs("def broken(:\n")
