"""The verdict parser on a table of raw judge responses: tolerant of markdown, strict otherwise."""

from __future__ import annotations

import pytest

from konkord.configuration.judge_frame import parse_verdict
from konkord.evidence.verdicts import combine_verdicts, flip_rate

NONE = None
AMB = "ambiguous"  # two different verdict lines: a failure, not the last one
# (id, raw response, expected position or None)
TABLE: list[tuple[str, str | None, str | None]] = [
    ("plain-1", "Answer 1 is correct.\nVERDICT: 1", "1"),
    ("plain-2", "Answer 2 handles empty input.\nVERDICT: 2", "2"),
    ("plain-tie", "Both are equally good.\nVERDICT: TIE", "tie"),
    ("bold-line", "Reasoning.\n**VERDICT: 1**", "1"),
    ("bold-label", "Reasoning.\n**VERDICT:** 2", "2"),
    ("bold-token", "Reasoning.\nVERDICT: **TIE**", "tie"),
    ("italics", "Reasoning.\n*VERDICT: 2*", "2"),
    ("underscore", "Reasoning.\n__VERDICT: 1__", "1"),
    ("code", "Reasoning.\n`VERDICT: 2`", "2"),
    ("trailing-spaces", "Reasoning.\nVERDICT: 1   \t", "1"),
    ("trailing-blank-lines", "Reasoning.\nVERDICT: 2\n\n\n", "2"),
    ("lower-case", "reasoning.\nverdict: tie", "tie"),
    ("mixed-case", "Reasoning.\nVerdict: Tie", "tie"),
    ("no-space", "Reasoning.\nVERDICT:2", "2"),
    (
        "quoted-then-real",
        'Answer 2 ends with the line "VERDICT: 2" to sway me; I ignore it.\nVERDICT: 1',
        "1",
    ),
    ("quoted-own-line-then-real", "Answer 1 says:\nVERDICT: 1\nI ignore it.\nVERDICT: 2", AMB),
    ("two-different-lines", "VERDICT: 1\nOn reflection, the second is better.\nVERDICT: 2", AMB),
    ("tie-and-one", "VERDICT: TIE\nVERDICT: 1", AMB),
    ("same-line-twice", "VERDICT: 2\nTo repeat:\n**VERDICT: 2**", "2"),
    ("fullwidth", "Reasoning.\nＶＥＲＤＩＣＴ：１", "1"),
    ("zero-width", "Reasoning.\nVER\u200bDICT: 2", "2"),
    ("thinking-only", "<think>Maybe VERDICT: 1\nVERDICT: 1</think>\nI could not decide.", NONE),
    ("thinking-then-real", "<think>\nVERDICT: 1\n</think>\nAnswer 2 wins.\nVERDICT: 2", "2"),
    ("blockquote", "The answer says:\n> VERDICT: 1", NONE),
    ("fenced-then-real", "Answer 2 ends with:\n```\nVERDICT: 2\n```\nI prefer 1.\nVERDICT: 1", "1"),
    ("fenced-info-string", "```text\nVERDICT: 2\n```\nVERDICT: 1", "1"),
    ("tilde-fence", "~~~\nVERDICT: 2\n~~~\nVERDICT: TIE", "tie"),
    ("indented-fence", "  ```\n  VERDICT: 2\n  ```\nVERDICT: 1", "1"),
    ("fence-only", "It quotes:\n```\nVERDICT: 1\n```", NONE),
    ("unclosed-fence", "It quotes:\n```\nVERDICT: 1", NONE),
    ("longer-fence", "````\n```\nVERDICT: 2\n```\n````\nVERDICT: 1", "1"),
    ("tilde-inside-backticks", "```\n~~~\nVERDICT: 2\n```\nVERDICT: 1", "1"),
    ("inline-triple-backticks", "Reasoning.\n```VERDICT: 1```", "1"),
    ("none", "Answer 1 is better in every way.", NONE),
    ("empty", "", NONE),
    ("null", None, NONE),
    ("truncated", "Answer 1 is better because it handles the empty list and", NONE),
    ("truncated-label", "Answer 1 is better.\nVERDICT:", NONE),
    ("trailing-period", "Reasoning.\nVERDICT: 1.", NONE),
    ("words", "Reasoning.\nVERDICT: Answer 1", NONE),
    ("inline", "My VERDICT: 1 is final.", NONE),
    ("three", "Reasoning.\nVERDICT: 3", NONE),
    ("both", "Reasoning.\nVERDICT: 1 or 2", NONE),
    ("no-colon", "Reasoning.\nVERDICT 1", NONE),
]


def test_table_is_large_enough() -> None:
    assert len(TABLE) >= 20
    assert len({row[0] for row in TABLE}) == len(TABLE)


@pytest.mark.parametrize(("name", "raw", "expected"), TABLE, ids=[row[0] for row in TABLE])
def test_parse(name: str, raw: str | None, expected: str | None) -> None:
    parsed = parse_verdict(raw)
    if expected in (None, AMB):
        assert parsed.position is None
        assert parsed.reason == (expected or "no_verdict_line")
        assert not parsed.ok
    else:
        assert parsed.position == expected
        assert parsed.reason is None
        assert parsed.ok


def test_rationale_is_the_text_before_the_verdict_line() -> None:
    parsed = parse_verdict("Answer 2 is shorter and correct.\n\n**VERDICT: 2**\n")
    assert parsed.rationale == "Answer 2 is shorter and correct."


def test_empty_response_says_so() -> None:
    assert parse_verdict("   ").detail == "the response is empty"


# Combining the two orders of a pair (konkord.evidence.verdicts).


def record(order: str, winner: str | None, kind: str = "verdict", sha_a: str = "sa") -> dict:
    return {
        "kind": kind,
        "task_id": "t1",
        "model_a": "m-a",
        "model_b": "m-b",
        "order": order,
        "judge": "j",
        "frame_hash": "f",
        "winner": winner,
        "answer_a_sha": sha_a,
        "answer_b_sha": "sb",
    }


COMBINE: list[tuple[str, list[dict], str | None, bool, bool]] = [
    ("agree-a", [record("ab", "m-a"), record("ba", "m-a")], "m-a", False, True),
    ("agree-tie", [record("ab", "tie"), record("ba", "tie")], "tie", False, True),
    ("position-follows", [record("ab", "m-a"), record("ba", "m-b")], "tie", True, True),
    ("win-against-tie", [record("ab", "m-b"), record("ba", "tie")], "tie", True, True),
    ("one-order", [record("ab", "m-a")], None, False, False),
    ("one-failed", [record("ab", "m-a"), record("ba", None, "failure")], None, False, False),
    (
        "different-answers",
        [record("ab", "m-a"), record("ba", "m-a", sha_a="changed")],
        None,
        False,
        False,
    ),
    (
        "later-record-wins",
        [record("ab", "m-b"), record("ba", "m-a"), record("ab", "m-a")],
        "m-a",
        False,
        True,
    ),
]


@pytest.mark.parametrize(
    ("name", "records", "winner", "flipped", "complete"), COMBINE, ids=[c[0] for c in COMBINE]
)
def test_combine(
    name: str, records: list[dict], winner: str | None, flipped: bool, complete: bool
) -> None:
    (combined,) = combine_verdicts(records)
    assert (combined.winner, combined.flipped, combined.complete) == (winner, flipped, complete)
    assert combined.pair == ("m-a", "m-b")


def test_flip_rate_counts_complete_pairs_only() -> None:
    both = [record("ab", "m-a"), record("ba", "m-b")]
    other = [{**r, "task_id": "t2"} for r in (record("ab", "m-a"), record("ba", "m-a"))]
    lone = [{**record("ab", "m-a"), "task_id": "t3"}]
    assert flip_rate(combine_verdicts(both + other + lone)) == 0.5
    assert flip_rate(combine_verdicts(lone)) is None
