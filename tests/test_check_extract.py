"""Which code the checks see: the fenced block in the suite's language, else the whole answer."""

from __future__ import annotations

from konkord.checks.extract import extract_code
from konkord.checks.runner import run_check
from konkord.configuration.suite import Task

FENCE = "```"


def test_takes_the_python_block_not_the_prose_or_other_languages() -> None:
    answer = (
        "Here is how:\n\n"
        f"{FENCE}bash\npip install nothing\n{FENCE}\n\n"
        f"{FENCE}python\ndef f() -> int:\n    return 1\n{FENCE}\n\nHope it helps."
    )
    code = extract_code(answer, "python")
    assert code.code == "def f() -> int:\n    return 1\n"
    assert code.source == "fenced"


def test_language_aliases_and_info_string_extras() -> None:
    code = extract_code(f"{FENCE}py title=x.py\nx = 1\n{FENCE}", "python")
    assert (code.code, code.source) == ("x = 1\n", "fenced")


def test_the_longest_block_wins_over_a_usage_example() -> None:
    solution = "def add(a: int, b: int) -> int:\n    return a + b\n"
    answer = f"{FENCE}python\n{solution}{FENCE}\nUsage:\n{FENCE}python\nadd(1, 2)\n{FENCE}\n"
    assert extract_code(answer, "python").code == solution


def test_untagged_block_when_no_block_is_tagged() -> None:
    code = extract_code(f"Answer:\n{FENCE}\nx = 2\n{FENCE}\n", "python")
    assert (code.code, code.source) == ("x = 2\n", "untagged")


def test_tilde_fences_and_an_unclosed_fence() -> None:
    assert extract_code("~~~python\ny = 3\n~~~\n", "python").code == "y = 3\n"
    assert extract_code(f"{FENCE}python\nz = 4\n", "python").code == "z = 4\n"


def test_whole_answer_when_there_is_no_fence() -> None:
    code = extract_code("def g():\n    return 2\n", "python")
    assert (code.code, code.source) == ("def g():\n    return 2\n", "whole")


def test_no_language_takes_any_tagged_block() -> None:
    assert extract_code(f"{FENCE}rust\nfn main() {{}}\n{FENCE}", None).code == "fn main() {}\n"


def test_empty_answers_have_no_code() -> None:
    for answer in (None, "", "   \n", f"{FENCE}python\n{FENCE}\n"):
        assert extract_code(answer, "python").empty, answer


def test_no_code_fails_every_check_with_that_reason() -> None:
    task = Task(id="t", prompt="p", checks=("compiles", "tests"), tests="assert True")
    for check in ("compiles", "ruff_clean", "mypy_clean", "tests"):
        result = run_check(check, task, "   ", "python", sandbox="none")
        assert not result.passed
        assert result.reason == "no code in the answer"
