"""Display names from runs.json: `{"model": spec, "name": short}` (plain strings still work).
Pages and the terminal show the name; the full spec is on the methodology page, once, and in a
tooltip; the evidence and the results file keep the spec."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner
from conftest import REPO
from fixtures_site import make_results, write_project

from konkord.cli import cli
from konkord.configuration.display_names import rename_data, rename_text
from konkord.configuration.runs_config import load_runs
from konkord.configuration.runspec import resolve_run
from konkord.errors import KonkordError
from konkord.stages.build.build import build_site

MODELS = ["openrouter/anthropic/claude-3.5-sonnet", "openai/gpt-4o", "openai/gpt-4o-mini"]
JUDGE = "gemini/gemini-2.5-pro"
NAMES = {MODELS[0]: "Claude 3.5 Sonnet", MODELS[1]: "GPT-4o", JUDGE: "Gemini Pro"}


def named_project(root: Path) -> Path:
    """A project whose runs.json names two models and the judge, and leaves one model plain."""
    results = make_results("named", models=MODELS, judges=[JUDGE], n_tasks=3)
    runs_file = write_project(root, [results])
    data = json.loads(runs_file.read_text())
    entry = data["runs"][0]
    entry["models"] = [
        {"model": m, "name": NAMES[m]} if m in NAMES else m for m in entry["models"]
    ]
    entry["judges"] = [{"model": JUDGE, "name": NAMES[JUDGE]}]
    runs_file.write_text(json.dumps(data, indent=2))
    return runs_file


def test_runs_json_takes_names_beside_plain_strings(tmp_path: Path) -> None:
    runs = load_runs(named_project(tmp_path))
    entry = runs.runs[0]
    assert entry.models == tuple(MODELS)  # the specs, as every stage calls them
    assert entry.judges == (JUDGE,)
    assert entry.names == NAMES


@pytest.mark.parametrize(
    ("models", "message"),
    [
        ([{"name": "A"}, "m/b"], 'runs[0].models[0] needs "model"'),
        ([{"model": "m/a", "nick": "A"}, "m/b"], 'runs[0].models[0] unknown key "nick"'),
        ([{"model": "m/a", "name": "B"}, {"model": "m/b", "name": "B"}], '"B" names both'),
        ([{"model": "m/a", "name": " A"}, "m/b"], "is not a display name"),
        ([{"model": "m/a", "name": "m/b"}, "m/b"], "is the full name of another model"),
    ],
)
def test_a_bad_name_is_one_line_naming_the_file_and_field(
    tmp_path: Path, models: list[object], message: str
) -> None:
    path = tmp_path / "runs.json"
    path.write_text(
        json.dumps({"runs": [{"name": "r", "suite": "s.yaml", "models": models}]}, indent=2)
    )
    with pytest.raises(KonkordError) as info:
        load_runs(path)
    text = str(info.value)
    assert text.startswith(f"{path}:") and message in text, text
    assert "\n" not in text


def test_specs_are_replaced_whole_in_sentences_and_never_inside_a_longer_name() -> None:
    names = {"openai/gpt-4": "GPT-4", "openai/gpt-4o": "GPT-4o"}
    text = "openai/gpt-4o ranks above openai/gpt-4. openai/gpt-4-turbo is not ours."
    assert rename_text(text, names) == "GPT-4o ranks above GPT-4. openai/gpt-4-turbo is not ours."
    data = {
        "models": ["openai/gpt-4"],
        "places": {"openai/gpt-4": 1},
        "claims": [{"text": "openai/gpt-4 ranks first", "models": ["openai/gpt-4"]}],
        "answers": [{"model": "openai/gpt-4", "text": "I am openai/gpt-4", "rationale": "x"}],
    }
    assert rename_data(data, names) == {
        "models": ["GPT-4"],
        "places": {"GPT-4": 1},
        "claims": [{"text": "GPT-4 ranks first", "models": ["GPT-4"]}],
        # what a model wrote is shown as it wrote it
        "answers": [{"model": "GPT-4", "text": "I am openai/gpt-4", "rationale": "x"}],
    }


def page_text(path: Path) -> str:
    """A page's text, less what models and judges wrote (shown as written, names and all)."""
    soup = BeautifulSoup(path.read_text(), "html.parser")
    for written in soup.select(".answer-text, .rationale, pre.raw, pre.prompt"):
        written.decompose()
    return soup.get_text(" ")


def mentions(text: str, spec: str) -> int:
    """How often `spec` stands in `text` as a whole name (not inside `openai/gpt-4o-mini`)."""
    return len(re.findall(rf"(?<![\w/.-]){re.escape(spec)}(?![\w/-])", text))


def test_pages_show_names_with_the_spec_in_a_tooltip_and_once_on_methodology(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    named_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    build_site(Path("public"), offline=True, runs_file=Path("runs.json"))
    public = tmp_path / "public"
    results_copy = json.loads((public / "results/named.json").read_text())
    assert results_copy["models"] == MODELS  # the download is the results file as written
    run_pages = [p for p in (public / "named").rglob("index.html") if "methodology" not in str(p)]
    for path in [public / "index.html", *run_pages]:
        text = page_text(path)
        for spec in NAMES:
            assert mentions(text, spec) == 0, (path, spec)
    leaderboard = BeautifulSoup((public / "named/index.html").read_text(), "html.parser")
    cells = [td.get_text(strip=True) for td in leaderboard.select("table.leaderboard td.model")]
    assert set(cells) >= {"Claude 3.5 Sonnet", "GPT-4o", MODELS[2]}
    tips = {span.get_text(): span["title"] for span in leaderboard.select("span.who")}
    assert tips["Claude 3.5 Sonnet"] == MODELS[0] and tips["Gemini Pro"] == JUDGE
    methodology = page_text(public / "named/methodology/index.html")
    for spec in [*MODELS, JUDGE]:
        assert mentions(methodology, spec) == 1, spec
    index = page_text(public / "index.html")
    assert "Gemini Pro" in index


def test_a_new_name_rerenders_the_pages_and_leaves_the_results_file_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs_file = named_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    build_site(Path("public"), offline=True, runs_file=Path("runs.json"))
    results_before = (tmp_path / "results/named.json").read_bytes()
    data = json.loads(runs_file.read_text())
    data["runs"][0]["judges"] = [{"model": JUDGE, "name": "Gemini 2.5 Pro"}]
    runs_file.write_text(json.dumps(data))
    summary = build_site(Path("public"), offline=True, runs_file=Path("runs.json"))
    assert "named/index.html" in summary.written and "index.html" in summary.written
    assert "Gemini 2.5 Pro" in page_text(tmp_path / "public/named/index.html")
    assert (tmp_path / "results/named.json").read_bytes() == results_before


def test_the_terminal_shows_the_demo_by_its_short_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder in ("suites", "runs", "results"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    shutil.copy(REPO / "runs.json", tmp_path / "runs.json")
    monkeypatch.chdir(tmp_path)
    spec = resolve_run("demo-python-codegen")
    assert spec.names["sim/atlas:strength=2.2"] == "atlas"
    for command in (["report"], ["judges"]):
        result = CliRunner().invoke(cli, [*command, "--run", "demo-python-codegen"])
        assert result.exit_code == 0, result.output
        assert "atlas" in result.output and "referee" in result.output
        assert "sim/atlas:strength=2.2" not in result.output
        assert "sim-judge/referee:" not in result.output
