"""Style control in the results file, the terminal and the Judges page, on a hand-built run:
a judge that picks the longer answer whatever it says, people who prefer a > b > c whatever
its length, and model c writing the longest answers."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from evidence_factory import add_answers, add_verdict, write_runs, write_suite

from konkord.cli import cli
from konkord.configuration.runspec import resolve_run
from konkord.evidence.log import EvidenceLog
from konkord.site.judges_page import length_above_people
from konkord.stages.label.labels import record_label
from konkord.stages.label.sample import Comparison
from konkord.stages.report.report import ReportOptions, build_results

FAST = ReportOptions(resamples=200, seed=1)
MODELS = ["m/a", "m/b", "m/c"]
WORDS = {"m/a": (8, 40), "m/b": (10, 50), "m/c": (25, 80)}  # c writes the most


def _length_run(root: Path, n_tasks: int = 40, labels: int = 60, **entry: object) -> None:
    rng = random.Random(7)
    lengths = {(f"t{k:02d}", m): rng.randint(*WORDS[m]) for k in range(n_tasks) for m in MODELS}
    suite = write_suite(root, n_tasks)
    write_runs(root, [{"name": "r", "suite": "suites/tiny.yaml", "models": MODELS,
                       "judges": ["judge/j1"], **entry}])
    texts = add_answers(root, "r", suite, MODELS,
                        text_for=lambda t, m: " ".join(["word"] * lengths[(t, m)]))
    log = EvidenceLog(root / "runs" / "r")
    done = 0
    for k in range(n_tasks):
        task = f"t{k:02d}"
        for x, y in (("m/a", "m/b"), ("m/a", "m/c"), ("m/b", "m/c")):
            diff = (lengths[(task, x)] - lengths[(task, y)]) / (lengths[(task, x)]
                                                              + lengths[(task, y)])
            x_wins = rng.random() < 1.0 / (1.0 + math.exp(-6.0 * diff))  # length alone
            winner = x if x_wins else y
            first = min(x, y)
            add_verdict(root, "r", texts, task, x, y,
                        ("1", "2") if winner == first else ("2", "1"))
            if done < labels:  # people: the better model (a > b > c) four times in five
                pick = x if rng.random() < 0.8 else y
                record_label(log, Comparison(task, x, y), pick, "ana", x)
                done += 1


def test_a_length_biased_judge_is_caught_and_its_ranking_corrected(project: Path) -> None:
    _length_run(project)
    results = build_results(resolve_run("r"), FAST)
    block = results.judge_blocks[0]
    style = block.style
    assert style is not None and style.features == ["tokens"]
    length = style.coefficients[0]
    assert length.feature == "tokens" and length.judge is not None
    assert length.judge.low is not None and length.judge.low > 1.0  # the judge's 6, found
    assert "This judge prefers the longer answer: +" in length.text
    assert "in log-odds per unit of normalised length difference" in length.text
    # People's coefficient is near 0 and the judge's exceeds it.
    assert length.people is not None and length.people.low is not None
    assert length.people.low < 0.0 < (length.people.high or 0.0)
    assert length.difference is not None and (length.difference.low or 0.0) > 0.0
    assert style.length_above_people is True
    assert [j["judge"] for j in length_above_people(results)] == ["judge/j1"]
    # The plain ranking rewards c's length; with length taken out c is above no one.
    assert block.ratings[0].model == "m/c"
    assert any(c.kind == "above" and c.models[0] == "m/c" for c in block.claims)
    assert not any("m/c ranks above" in text for text in style.judge.claims)
    controlled = {r.model: r.win_rate_vs_field for r in style.judge.ratings}
    plain = {r.model: r.win_rate_vs_field for r in block.ratings}
    assert (plain["m/c"].low or 0.0) > 0.5  # plain: c clearly above an average opponent
    assert (controlled["m/c"].low or 0.0) < 0.5  # controlled: not shown to be
    # Features are counted once per answer and kept with it.
    answer = results.tasks[0].answers[0]
    assert answer.style is not None and answer.style["tokens"] == len(answer.text.split())


def test_too_few_labels_say_how_many_are_needed(project: Path) -> None:
    _length_run(project, labels=12)
    style = build_results(resolve_run("r"), FAST).judge_blocks[0].style
    assert style is not None and style.people is not None
    assert style.people.status == "too_few_labels"
    assert "at least 40 labelled comparisons" in style.people.summary
    assert "this run has 12" in style.people.summary
    assert style.coefficients[0].people is None and style.length_above_people is None


def test_report_prints_the_controlled_ranking_after_the_plain_one(project: Path) -> None:
    _length_run(project)
    out = CliRunner().invoke(cli, ["report", "--run", "r", "--resamples", "200"])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    plain, _, after = text.partition("style-controlled (tokens):")
    assert "win rate vs field" in plain and after
    assert "style tokens: This judge prefers the longer answer" in after


def test_runs_json_switches_it_off(project: Path) -> None:
    _length_run(project, style_control=False)
    results = build_results(resolve_run("r"), FAST)
    assert results.judge_blocks[0].style is None
    assert results.tasks[0].answers[0].style is None
    out = CliRunner().invoke(cli, ["report", "--run", "r", "--resamples", "100"])
    assert out.exit_code == 0 and "style-controlled" not in out.output
    data = json.loads((project / "results" / "r.json").read_text())
    assert data["judge_blocks"][0]["style"] is None


def test_the_site_shows_the_column_the_plot_the_method_and_names_the_judge(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bs4 import BeautifulSoup
    from fixtures_site import write_project

    from konkord.stages.build.build import build_site

    _length_run(project)
    results = build_results(resolve_run("r"), FAST)
    site = project / "site"
    site.mkdir()
    monkeypatch.chdir(site)
    write_project(site, [results])
    build_site(offline=True)
    project = site
    page = BeautifulSoup((project / "public" / "r" / "index.html").read_text(), "html.parser")
    heads = [th.get_text(" ", strip=True) for th in page.select("table.leaderboard thead th")]
    assert heads.index("Style-controlled win rate (95% interval)") == heads.index(
        "Win rate vs field (95% interval)") + 1
    cells = page.select("td.style-controlled")
    assert len(cells) == 3 and all("%" in c.get_text() for c in cells)
    section = page.select_one("section.style-control")
    assert section is not None and section.select_one("svg.style-coefficients") is not None
    assert "This judge prefers the longer answer" in section.get_text(" ")
    judges = BeautifulSoup((project / "public" / "r" / "judges" / "index.html").read_text(),
                           "html.parser")
    named = judges.select_one("p.length-above-people")
    assert named is not None and "judge/j1" in named.get_text()
    assert "rewards length more than people do" in named.get_text()
    method = (project / "public" / "r" / "methodology" / "index.html").read_text()
    assert "Bradley-Terry with style covariates" in method and "list items: lines" in method
