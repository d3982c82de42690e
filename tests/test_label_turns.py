"""Labelling a conversation's turn: both conversations side by side (each side's own earlier
replies in its column), the turn to judge marked, the label stored under the turn's id."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from konkord.cli import cli
from konkord.configuration.runspec import resolve_run
from konkord.evidence.log import EvidenceLog
from konkord.stages.run import current_answers

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parent.parent
APP = REPO / "konkord" / "stages" / "label" / "app.py"
MODELS = ["sim/atlas:strength=2.0", "sim/cedar:strength=-1.0"]


def _html(at: AppTest) -> list[str]:
    return [str(element.proto.body) for element in at.get("html")]


def test_a_second_turn_shows_both_conversations_and_marks_the_turn(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(REPO / "suites" / "conversations.yaml", project / "talk.yaml")
    run = {"name": "talk", "suite": "talk.yaml", "models": MODELS, "judges": []}
    (project / "runs.json").write_text(json.dumps({"runs": [run]}))
    assert CliRunner().invoke(cli, ["run", "--run", "talk"]).exit_code == 0
    for name, value in {"RUN": "talk", "LABELLER": "ann", "SEED": "0", "N": "32"}.items():
        monkeypatch.setenv(f"KONKORD_LABEL_{name}", value)
    spec = resolve_run("talk")
    answers = current_answers(EvidenceLog(spec.run_dir), spec.suite, spec.settings)
    at = AppTest.from_file(str(APP), default_timeout=30).run()
    assert not at.exception, at.exception
    for _ in range(32):  # walk the queue to a second turn
        shown = _html(at)
        if any("turn 2: the turn to judge" in body for body in shown):
            break
        at.button(key="skip").click().run()
    else:
        raise AssertionError("no second turn in the queue")
    heading = next(body for body in shown if "turn 2: the turn to judge" in body)
    task_id = heading.split("Task ")[1].split(",")[0]
    base = task_id.removesuffix("-t2")
    assert any("Turn 1: the user wrote" in body for body in shown)
    assert spec.suite.task(base).turns[1].prompt.split()[0] in heading
    captions = [str(c.proto.body) for c in at.caption]
    assert "Answer 1's conversation: its reply to turn 1" in captions
    assert "Answer 2's conversation: its reply to turn 1" in captions
    # each column of the earlier turn holds that side's own turn-1 reply
    first_column, second_column = at.columns[:2]
    texts = [
        "".join(str(e.proto.body) for e in column.get("html"))
        + "".join(str(e.proto.code_text) for e in column.get("code"))
        for column in (first_column, second_column)
    ]
    at.button(key="choice_1").click().run()
    label = EvidenceLog(spec.run_dir).records("labels")[-1]
    assert label["task_id"] == task_id  # stored under the turn's id, as the judge's verdicts
    first = label["shown_first"]
    second = next(m for m in MODELS if m != first)
    replies = {m: str(answers[(f"{base}-t1", m)]["text"]) for m in MODELS}
    own = {m: set(replies[m].splitlines()) - set(replies[n].splitlines()) for m, n in
           ((first, second), (second, first))}  # fmt: skip
    for model, column, other in ((first, texts[0], texts[1]), (second, texts[1], texts[0])):
        for line in own[model]:
            if line.strip() and line.strip("`") == line:
                assert line.strip() in column, line  # its own reply, in its own column
                assert line.strip() not in other, line
