"""The labelling app driven by Streamlit's AppTest against a scratch run."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner
from label_fixtures import JUDGE_SECRET, MODELS, make_run, plain_answer, text_to_model

from konkord.cli import cli
from konkord.configuration.runspec import RunSpec
from konkord.evidence.log import EvidenceLog
from konkord.stages.label.labels import current_labels
from konkord.stages.label.sample import label_queue, pool_for_run

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

from konkord.stages.label import launch
from konkord.stages.label.app import LabelConfig, parse_config

APP = Path(__file__).resolve().parent.parent / "konkord" / "stages" / "label" / "app.py"
FORBIDDEN = (*MODELS, "zebra", "quokka", "walrus", JUDGE_SECRET, "VERDICT", "gecko")


@pytest.fixture
def run(project: Path, monkeypatch: pytest.MonkeyPatch) -> RunSpec:
    monkeypatch.setenv("KONKORD_LABEL_RUN", "demo")
    monkeypatch.setenv("KONKORD_LABEL_LABELLER", "ann")
    monkeypatch.setenv("KONKORD_LABEL_SEED", "0")
    monkeypatch.setenv("KONKORD_LABEL_N", "10")
    return make_run(project, n_tasks=25)


def start() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=30).run()
    assert not at.exception, at.exception
    return at


def click(at: AppTest, key: str) -> AppTest:
    at.button(key=key).click().run()
    assert not at.exception, at.exception
    return at


def all_elements(node: Any) -> list[Any]:
    out = [node] if hasattr(node, "proto") else []
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        for child in children.values():
            out += all_elements(child)
    return out


def rendered_text(at: AppTest) -> str:
    """Every element's full protobuf text: labels, bodies, code, captions, widget ids."""
    return "\n".join(str(element.proto) for element in all_elements(at._tree))


def shown_answers(at: AppTest) -> tuple[str, str]:
    """The answer texts on screen as (Answer 1, Answer 2), read back from the answer panes."""
    column_1, column_2 = at.columns[:2]
    texts = []
    for column in (column_1, column_2):
        body = "".join(str(h.proto.body) for h in all_elements(column) if h.type == "html")
        texts.append(body)
    return texts[0], texts[1]


def shown_models(at: AppTest, spec: RunSpec) -> tuple[str, str]:
    """Which models' answers are shown as Answer 1 and Answer 2."""
    first, second = shown_answers(at)
    found = []
    for html in (first, second):
        hits = [model for text, model in text_to_model(spec).items()
                if text.split("\n")[0] in html]
        assert len(hits) == 1, html
        found.append(hits[0])
    return found[0], found[1]


def progress_text(at: AppTest) -> str:
    return str(at.progress[0].proto.text)


def test_a_label_lands_in_the_log_in_model_terms(run: RunSpec) -> None:
    at = start()
    log = EvidenceLog(run.run_dir)
    expected = label_queue(pool_for_run(run, log), {}, "ann", 0, 10).items
    choices = {"choice_1": "1", "choice_2": "2", "choice_tie": "tie"}
    for step, key in enumerate(["choice_1", "choice_2", "choice_tie", "choice_2"]):
        item = expected[step]
        first, second = shown_models(at, run)
        assert (first, second) == (item.shown_first, item.shown_second)
        assert progress_text(at).startswith(f"{step} of 10")
        click(at, key)
        record = log.records("labels")[-1]
        want = {"1": first, "2": second, "tie": "tie"}[choices[key]]
        assert record["winner"] == want
        assert record["shown_first"] == first
        assert (record["task_id"], record["labeller"], record["source"]) == (
            item.comparison.task_id, "ann", "human")
        assert {record["model_a"], record["model_b"]} == {first, second}
    assert len(current_labels(log)) == 4


def test_no_model_name_or_judge_text_is_rendered(run: RunSpec) -> None:
    at = start()
    for key in ["choice_1", "choice_2", "skip", "choice_tie", "undo", "choice_1", "choice_2"]:
        text = rendered_text(at)
        assert "Answer 1" in text and "Reply for task-" in text
        for secret in FORBIDDEN:
            assert secret.lower() not in text.lower(), secret
        click(at, key)


def test_undo_supersedes_the_last_label_and_shows_its_item_again(run: RunSpec) -> None:
    at = start()
    log = EvidenceLog(run.run_dir)
    click(at, "choice_1")
    second_item = shown_models(at, run)
    second_answers = shown_answers(at)
    click(at, "choice_2")
    assert progress_text(at).startswith("2 of 10")
    click(at, "undo")
    records = log.records("labels")
    assert len(records) == 3
    assert records[-1]["winner"] is None
    assert (records[-1]["task_id"], records[-1]["labeller"]) == (records[1]["task_id"], "ann")
    assert len(current_labels(log)) == 1
    assert progress_text(at).startswith("1 of 10")
    assert shown_models(at, run) == second_item
    assert shown_answers(at) == second_answers


def test_a_restart_with_the_same_seed_resumes(run: RunSpec) -> None:
    log = EvidenceLog(run.run_dir)
    expected = label_queue(pool_for_run(run, log), {}, "ann", 0, 10).items
    at = start()
    for _ in range(3):
        click(at, "choice_tie")
    again = start()
    assert progress_text(again).startswith("3 of 10")
    assert shown_models(again, run) == (expected[3].shown_first, expected[3].shown_second)
    assert f"Task {expected[3].comparison.task_id}" in rendered_text(again)


def test_n_10_on_240_comparisons_stops_at_10(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = ("m/alpha", "m/bravo", "m/charlie", "m/delta", "m/echo")
    spec = make_run(project, name="big", n_tasks=24, models=models, with_verdicts=False)
    log = EvidenceLog(spec.run_dir)
    assert len(pool_for_run(spec, log)) == 240
    monkeypatch.setenv("KONKORD_LABEL_RUN", "big")
    monkeypatch.setenv("KONKORD_LABEL_LABELLER", "ann")
    monkeypatch.setenv("KONKORD_LABEL_N", "10")
    at = start()
    for step in range(10):
        assert progress_text(at).startswith(f"{step} of 10")
        click(at, "choice_1")
    assert progress_text(at).startswith("10 of 10")
    assert len(current_labels(log)) == 10
    assert "konkord calibrate --run big" in [c.value for c in at.code]
    assert any("Done" in s.value for s in at.success)
    for key in ("choice_1", "choice_2", "choice_tie", "skip"):
        assert at.button(key=key).disabled
    assert not at.button(key="undo").disabled


def test_skip_moves_on_without_a_label(run: RunSpec) -> None:
    at = start()
    before = shown_answers(at)
    click(at, "skip")
    assert shown_answers(at) != before
    assert not EvidenceLog(run.run_dir).records("labels")
    assert progress_text(at).startswith("0 of 10")


def test_keys_are_bound_once_each(run: RunSpec) -> None:
    at = start()
    shortcuts = {b.key: b.proto.shortcut.lower() for b in at.button}
    assert shortcuts == {"choice_1": "1", "choice_2": "2", "choice_tie": "3", "skip": "s",
                         "undo": "u", "tie_t": "t"}
    assert len([b for b in at.button if b.proto.shortcut]) == len(set(shortcuts.values()))
    click(at, "tie_t")
    (record,) = EvidenceLog(run.run_dir).records("labels")
    assert record["winner"] == "tie"


def test_code_is_highlighted_and_prose_is_sanitised(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def answer(task_id: str, index: int) -> str:
        return (
            f"{plain_answer(task_id, index)}\n\n```python\ndef f():\n    return {index}\n```\n\n"
            '<script>alert("x")</script> <img src=x onerror="alert(1)"> '
            "[link](javascript:alert(1))"
        )

    make_run(project, name="code", n_tasks=3, answer_language="python", answer_text=answer)
    monkeypatch.setenv("KONKORD_LABEL_RUN", "code")
    monkeypatch.setenv("KONKORD_LABEL_LABELLER", "ann")
    at = start()
    codes = [c for c in at.code]
    assert len(codes) == 2 and all(c.language == "python" for c in codes)
    assert all("def f():" in c.value for c in codes)
    html = "\n".join(str(h.proto.body) for h in all_elements(at._tree)
                     if h.type == "html" and "<style>" not in str(h.proto.body))
    soup = BeautifulSoup(html, "html.parser")
    assert not soup.find_all(["script", "img", "iframe", "style"])
    for tag in soup.find_all(True):
        assert not [a for a in tag.attrs if a.startswith("on")], tag
        assert not str(tag.get("href", "")).startswith("javascript"), tag
    assert '<script>alert("x")</script>' in soup.get_text()  # shown as text, not run


def test_a_code_answer_without_a_fence_is_shown_as_code(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_run(project, name="bare", n_tasks=2, answer_language="python",
             answer_text=lambda task_id, index: f"x = {index}  # {task_id}")
    monkeypatch.setenv("KONKORD_LABEL_RUN", "bare")
    at = start()
    assert sorted(c.value for c in at.code)[0].startswith("x = ")
    assert all(c.language == "python" for c in at.code)


def test_a_run_without_answers_says_what_to_do(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_run(project, name="empty", n_tasks=2, answer_text=lambda task_id, index: None,
             with_verdicts=False)
    monkeypatch.setenv("KONKORD_LABEL_RUN", "empty")
    at = start()
    assert "konkord run --run empty" in [c.value for c in at.code]


def test_label_command_passes_its_options_to_the_app(
    run: RunSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[list[str], str, bool]] = []

    def fake_serve(command: list[str], url: str, open_browser: bool) -> int:
        calls.append((command, url, open_browser))
        return 0

    monkeypatch.setattr(launch, "serve", fake_serve)
    result = CliRunner().invoke(cli, ["label", "--run", "demo", "--n", "7", "--seed", "3",
                                      "--labeller", "bob", "--port", "8600", "--no-browser"])
    assert result.exit_code == 0, result.output
    ((command, url, open_browser),) = calls
    assert command[1:4] == ["-m", "streamlit", "run"]
    assert Path(command[4]) == APP
    assert command[command.index("--server.port") + 1] == "8600"
    assert command[command.index("--server.address") + 1] == "127.0.0.1"
    assert command[command.index("--server.headless") + 1] == "true"
    assert (url, open_browser) == ("http://127.0.0.1:8600/", False)
    app_args = command[command.index("--") + 1 :]
    assert parse_config(app_args, {}) == LabelConfig("demo", "bob", n=7, seed=3, overlap=0.5)


def test_label_command_without_streamlit_says_what_to_install(
    run: RunSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "streamlit" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    result = CliRunner().invoke(cli, ["label", "--run", "demo"])
    assert result.exit_code == 2
    assert "install the label extra: pip install 'konkord[label]'" in result.output


def test_label_command_refuses_a_run_without_comparisons(project: Path) -> None:
    make_run(project, name="empty", n_tasks=2, answer_text=lambda task_id, index: None,
             with_verdicts=False)
    result = CliRunner().invoke(cli, ["label", "--run", "empty"])
    assert result.exit_code == 2
    assert "run empty has nothing to label" in result.output
    assert "konkord run --run empty" in result.output


def test_skipping_everything_offers_the_skipped_items_again(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_run(project, name="tiny", n_tasks=1, models=MODELS[:2], with_verdicts=False)
    monkeypatch.setenv("KONKORD_LABEL_RUN", "tiny")
    monkeypatch.setenv("KONKORD_LABEL_LABELLER", "ann")
    at = start()
    first = shown_models(at, spec)
    click(at, "skip")
    assert not at.columns and any("skipped 1 item" in i.value for i in at.info)
    click(at, "unskip")
    assert shown_models(at, spec) == first
    click(at, "choice_2")
    assert progress_text(at).startswith("1 of 1")
    assert "konkord calibrate --run tiny" in [c.value for c in at.code]
