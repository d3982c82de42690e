"""Suites: what loads, and the one clear message each broken suite gives (file, line, field)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from konkord.cli import cli
from konkord.configuration.suite import load_suite, mentions_verdict
from konkord.errors import SuiteError

BAD = Path(__file__).parent / "data" / "bad_inputs"

# corpus file -> the message after "<path>:", exactly as a user reads it
BAD_SUITES: dict[str, str] = {
    "missing_rubric.yaml": "2: rubric is required",
    "empty_rubric.yaml": "2: rubric must not be empty: write the criteria the judge should apply",
    "duplicate_task_ids.yaml": (
        '8: tasks[2].id "sum" repeats tasks[0].id (line 4); task ids must be unique'
    ),
    "tabs.yaml": "5: a tab is used for indentation; YAML allows only spaces",
    "wrong_type_prompt.yaml": "7: tasks[1].prompt should be text, not a whole number",
    "wrong_type_tasks.yaml": "3: tasks should be a list, not text",
    "unknown_key.yaml": (
        '5: tasks[0].promt is not a known field (did you mean "prompt"?) (and 1 more problem)'
    ),
    "unknown_top_key.yaml": (
        '2: rubrik is not a known field (did you mean "rubric"?) (and 1 more problem)'
    ),
    "rubric_verdict.yaml": (
        "5: rubric must not mention VERDICT: Konkord owns the judge's response format and adds "
        "the verdict instructions itself; remove that sentence"
    ),
    "rubric_verdict_fullwidth.yaml": (
        "4: rubric must not mention VERDICT: Konkord owns the judge's response format and adds "
        "the verdict instructions itself; remove that sentence"
    ),
    "rubric_verdict_zero_width.yaml": (
        "5: rubric must not mention VERDICT: Konkord owns the judge's response format and adds "
        "the verdict instructions itself; remove that sentence"
    ),
    "empty.yaml": "1: the file is empty",
    "comments_only.yaml": "1: the file is empty",
    "binary.yaml": "1: this is a binary file, not text",
    "not_utf8.yaml": "2: not valid UTF-8 text (is this a binary file?)",
    "task_id_spaces.yaml": (
        "4: tasks[0].id \"first task\" is not a slug (use lower case, digits, '-', '_' or '.')"
    ),
    "empty_prompt.yaml": "5: tasks[0].prompt must not be empty",
    "turns_and_prompt.yaml": (
        "5: tasks[0] gives both prompt and turns: write a single prompt, or the conversation's "
        "turns, not both"
    ),
    "turns_empty_turn.yaml": "7: tasks[0].turns[1] must not be empty",
    "turns_not_text.yaml": (
        "7: tasks[0].turns[1] should be text (the user's message), not a whole number"
    ),
    "turns_none.yaml": "5: tasks[0].turns should be a list of user messages, not an empty list",
    "turns_mapping_not_text.yaml": (
        "8: tasks[0].turns[1].prompt should be text (the user's message), not a list"
    ),
    "turns_unknown_key.yaml": (
        '7: tasks[0].turns[0].test is not a known field (did you mean "tests"?)'
    ),
    "no_tasks.yaml": "3: tasks must list at least one task",
    "top_level_list.yaml": "1: expected a mapping of fields at the top level",
    "duplicate_key.yaml": "6: rubric is given twice",
    "syntax_error.yaml": (
        "2: YAML syntax: while scanning a quoted scalar, found unexpected end of stream (at line 6)"
    ),
    "alias_bomb.yaml": (
        "9: f[0] YAML aliases (*name) expand to more than 100,000 values "
        "(an alias bomb?); write the values out"
    ),
    "recursive_alias.yaml": "6: tasks[0].reference is a YAML alias of itself",
    "deeply_nested.yaml": "105: values are nested more than 100 deep",
    "turn_like_id.yaml": (
        '6: tasks[1].id "budget-t2" reads as turn 2 of "budget" (ids ending in -t<N> are kept '
        "for a conversation's turns), but the suite also has a task \"budget\"; rename it"
    ),
    "turn_like_gap.yaml": (
        '6: tasks[1].id "sort-t3" reads as turn 3 of "sort" (ids ending in -t<N> are kept '
        "for a conversation's turns), but the suite has no \"sort-t2\"; rename it"
    ),
    "unknown_check.yaml": (
        '6: tasks[0].checks has an unknown check "pylint" '
        "(valid: compiles, ruff_clean, mypy_clean, tests)"
    ),
}


def test_the_corpus_is_all_covered() -> None:
    on_disk = {p.name for p in BAD.glob("*.yaml")}
    assert on_disk == set(BAD_SUITES)


@pytest.mark.parametrize("name", sorted(BAD_SUITES))
def test_bad_suite_gives_one_clear_error(name: str) -> None:
    path = BAD / name
    with pytest.raises(SuiteError) as caught:
        load_suite(path)
    assert str(caught.value) == f"{path}:{BAD_SUITES[name]}"


# What `konkord validate` lists where a stage says "(and N more problems)": every problem.
VALIDATE_ALL: dict[str, list[str]] = {
    "unknown_key.yaml": [
        '5: tasks[0].promt is not a known field (did you mean "prompt"?)',
        "4: tasks[0].prompt is required",
    ],
    "unknown_top_key.yaml": [
        '2: rubrik is not a known field (did you mean "rubric"?)',
        "1: rubric is required",
    ],
}


@pytest.mark.parametrize("name", sorted(BAD_SUITES))
def test_validate_exits_non_zero_and_prints_the_error(name: str) -> None:
    path = BAD / name
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 2
    expected = VALIDATE_ALL.get(name, [BAD_SUITES[name]])
    assert result.stderr.splitlines() == [f"error: {path}:{problem}" for problem in expected]
    assert result.stdout == ""


def test_validate_lists_tests_that_do_not_compile_and_a_missing_deployments_file(
    tmp_path: Path,
) -> None:
    """Issue 24: validate passed both, and hid a second problem behind "(and 1 more problem)"."""
    (tmp_path / "s.yaml").write_text(
        "name: s\nanswer_language: python\nrubric: Correct code wins.\ntasks:\n"
        "  - id: add\n    prompt: Write add.\n    checks: [tests]\n    tests: |\n"
        "      assert add(1, 2) == 3\n      assert add(2, 2) == = 4\n"
        "  - id: sub\n    prompt: Write sub.\n    tests: 'assert sub(1 == 0'\n"
    )
    (tmp_path / "runs.json").write_text(
        '{"runs": [\n'
        '  {"name": "a", "suite": "s.yaml", "models": ["sim/x", "sim/y"],\n'
        '   "deployments": "gone.json"},\n'
        '  {"name": "b", "suite": "missing.yaml", "models": ["sim/x", "sim/y"]}\n'
        "]}\n"
    )
    result = CliRunner().invoke(cli, ["validate", str(tmp_path / "runs.json"),
                                      str(tmp_path / "s.yaml")])
    assert result.exit_code == 2
    suite, runs = tmp_path / "s.yaml", tmp_path / "runs.json"
    assert result.stderr.splitlines() == [
        f"error: {suite}:10: tasks[0].tests do not compile: invalid syntax",
        f"error: {suite}:13: tasks[1].tests do not compile: '(' was never closed",
        f'error: {runs}:3: runs[0].deployments "gone.json" was not found (looked for '
        f"{tmp_path / 'gone.json'})",
        f'error: {runs}:4: runs[1].suite "missing.yaml" was not found (looked for '
        f"{tmp_path / 'missing.yaml'})",
        f"error: {suite}:10: tasks[0].tests do not compile: invalid syntax",
        f"error: {suite}:13: tasks[1].tests do not compile: '(' was never closed",
    ]
    assert result.stdout == ""


def test_validate_reports_every_bad_file_and_passes_good_ones() -> None:
    good = BAD / "ok" / "suite.yaml"
    result = CliRunner().invoke(
        cli, ["validate", str(good), str(BAD / "tabs.yaml"), str(BAD / "empty.yaml")]
    )
    assert result.exit_code == 2
    assert result.stdout == f"ok  {good} (2 tasks)\n"
    assert result.stderr.count("error: ") == 2


def test_a_good_suite_loads_with_its_fields(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: demo\n"
        "answer_language: python\n"
        "context: |\n  ACME sells anvils.\n"
        "rubric: Prefer correct code; a fair verdict needs evidence.\n"
        "tasks:\n"
        "  - id: add.v2\n"
        "    prompt: Write add(a, b).\n"
        "    reference: 'def add(a, b): return a + b'\n"
        "    checks: [compiles, tests]\n"
        "    tests: assert add(1, 2) == 3\n"
        "  - id: sub_1\n"
        "    prompt: Write sub(a, b).\n"
    )
    suite = load_suite(path)
    assert suite.name == "demo"
    assert suite.answer_language == "python"
    assert suite.context == "ACME sells anvils.\n"
    assert [t.id for t in suite.tasks] == ["add.v2", "sub_1"]
    assert suite.tasks[0].checks == ("compiles", "tests")
    assert suite.tasks[1].reference is None
    assert suite.task("sub_1").prompt == "Write sub(a, b)."
    assert len(suite.rubric_hash()) == 12


def test_answer_language_null_means_prose(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: p\nanswer_language: null\nrubric: r\ntasks:\n  - {id: a, prompt: p}\n")
    assert load_suite(path).answer_language is None


def test_yaml_booleans_and_numbers_are_not_text(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: p\nrubric: r\ntasks:\n  - id: a\n    prompt: yes\n")
    with pytest.raises(SuiteError, match=r":5: tasks\[0\].prompt should be text, not true/false"):
        load_suite(path)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match=r"nope\.yaml: file not found"):
        load_suite(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("rubric", "refused"),
    [
        ("End with VERDICT: 1 or VERDICT: 2.", True),
        ("Write **Verdict:** then the number.", True),
        ("verdict : 1", True),
        ("The VERDICT line is yours.", True),
        ("Give a fair verdict based on correctness.", False),
        ("Prefer the correct answer.", False),
    ],
)
def test_which_rubrics_mention_the_verdict_token(rubric: str, refused: bool) -> None:
    assert mentions_verdict(rubric) is refused


def test_many_tasks_keep_their_lines(tmp_path: Path) -> None:
    body = ["name: big", "rubric: r", "tasks:"]
    for i in range(300):
        body += [f"  - id: t{i}", f"    prompt: p{i}"]
    body[-1] = "    prompt: []"
    path = tmp_path / "big.yaml"
    path.write_text("\n".join(body) + "\n")
    with pytest.raises(SuiteError) as caught:
        load_suite(path)
    assert str(caught.value) == f"{path}:{len(body)}: tasks[299].prompt should be text, not a list"


def test_validate_a_folder_checks_every_suite_in_it(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text((BAD / "ok" / "suite.yaml").read_text())
    (tmp_path / "b.yml").write_text((BAD / "no_tasks.yaml").read_text())
    (tmp_path / "notes.txt").write_text("not a suite")
    result = CliRunner().invoke(cli, ["validate", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stdout == f"ok  {tmp_path / 'a.yaml'} (2 tasks)\n"
    assert result.stderr.strip() == f"error: {tmp_path / 'b.yml'}:3: tasks must list at least one task"
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = CliRunner().invoke(cli, ["validate", str(empty)])
    assert nothing.exit_code == 2
    assert nothing.stderr.strip() == f"error: {empty}: a folder with no suite files (.yaml) in it"


def test_a_conversation_loads_with_each_turns_own_ground_truth(tmp_path: Path) -> None:
    path = tmp_path / "talk.yaml"
    path.write_text(
        "name: talk\nrubric: Prefer correct answers.\ntasks:\n"
        "  - id: poem\n    turns:\n      - Write a poem about rain.\n      - Now as a limerick.\n"
        "  - id: code\n    checks: [tests]\n    turns:\n"
        "      - prompt: Write add(a, b).\n        tests: assert add(1, 2) == 3\n"
        "      - prompt: Now sub(a, b) too.\n        reference: a - b\n"
        "        tests: assert sub(3, 1) == 2\n"
        "  - id: plain\n    prompt: One question.\n"
    )
    suite = load_suite(path)
    poem, code, plain = suite.tasks
    assert poem.multi_turn and not plain.multi_turn
    assert [t.prompt for t in poem.conversation()] == ["Write a poem about rain.", "Now as a limerick."]
    # a conversation's prompt, reference and tests are its first turn's (single-turn readers)
    assert (code.prompt, code.tests, code.reference) == ("Write add(a, b).", "assert add(1, 2) == 3", None)
    assert code.conversation()[1].reference == "a - b"
    assert code.conversation()[1].tests == "assert sub(3, 1) == 2"
    assert plain.conversation()[0].prompt == "One question."
    # a dump reads back as the same task (the import and results files round-trip suites)
    assert type(code).model_validate(code.model_dump(exclude_defaults=True)) == code


def test_validate_names_the_turn_whose_tests_do_not_compile(tmp_path: Path) -> None:
    suite = tmp_path / "talk.yaml"
    suite.write_text(
        "name: talk\nrubric: Correct code wins.\ntasks:\n"
        "  - id: code\n    checks: [tests]\n    turns:\n"
        "      - prompt: Write add.\n        tests: assert add(1, 2) == 3\n"
        "      - prompt: Now sub.\n        tests: |\n          assert sub(3, 1) == 2\n"
        "          assert sub(1 == 0\n"
    )
    result = CliRunner().invoke(cli, ["validate", str(suite)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: {suite}:12: tasks[0].turns[1].tests do not compile: '(' was never closed"
    ]
