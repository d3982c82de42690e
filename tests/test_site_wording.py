"""Words on the pages that read wrong before: the runs index's first place and judge count, a
long list of labeller ids, and the cost of models whose calls recorded nothing."""

from __future__ import annotations

from typing import Any

import pytest
from bs4 import BeautifulSoup
from conftest import REPO
from fixtures_site import make_results

from konkord.site.render import (
    RunSummary,
    make_environment,
    plan_run_pages,
    plan_site_pages,
    render_page,
)
from konkord.site.summary import first_place

ENV = make_environment(REPO / "templates")


def index_row(leaders: list[dict[str, Any]], calibrated: list[bool]) -> dict[str, str]:
    summary = RunSummary(
        run="r", suite="s", suite_path="s.yaml", models=["a", "b", "c"],
        judges=[f"j{k}" for k in range(len(calibrated))], date="2026-12-01",
        konkord_version="0", simulated=False, schema_version=1, tasks=3,
        calibrated=calibrated, leaders=leaders,
    )
    plan = next(p for p in plan_site_pages([summary], {}) if p.path == "index.html")
    soup = BeautifulSoup(render_page(ENV, plan), "html.parser")
    judges = soup.select_one("td.judges-cell")
    assert judges is not None
    names = judges.select_one(".names")
    if names is not None:
        names.extract()
    leader = soup.select_one("td.leader")
    assert leader is not None
    return {"judges": judges.get_text(" ", strip=True), "leader": leader.get_text(strip=True)}


@pytest.mark.parametrize(
    ("leaders", "said"),
    [
        ([{"model": "atlas", "best": 1, "worst": 1}], "atlas"),
        (
            [
                {"model": "atlas", "best": 1, "worst": 3},
                {"model": "cedar", "best": 1, "worst": 4},
                {"model": "birch", "best": 1, "worst": 4},
            ],
            "1st place not separated: atlas (ranks 1–3), cedar (ranks 1–4), birch (ranks 1–4)",
        ),
        ([], "n/a"),
    ],
)
def test_the_runs_index_says_whether_first_place_is_settled(
    leaders: list[dict[str, Any]], said: str
) -> None:
    assert index_row(leaders, [True])["leader"] == said


@pytest.mark.parametrize(
    ("calibrated", "said"),
    [
        ([True] * 5, "5 judges, all calibrated against people"),
        ([True, True], "2 judges, both calibrated against people"),
        ([True], "1 judge, calibrated against people"),
        ([False, False, False], "3 judges, all uncalibrated"),
        ([True, False, True], "3 judges, 2 calibrated against people, 1 uncalibrated"),
        ([], "none"),
    ],
)
def test_the_runs_index_counts_judges_in_words(calibrated: list[bool], said: str) -> None:
    assert index_row([], calibrated)["judges"] == said


def test_first_place_reads_the_rank_ranges_of_the_first_judge() -> None:
    ratings = [
        {"model": "atlas", "rank": 1, "rank_best": 1, "rank_worst": 3},
        {"model": "cedar", "rank": 1, "rank_best": 1, "rank_worst": 4},
        {"model": "ember", "rank": 4, "rank_best": 4, "rank_worst": 5},
    ]
    assert first_place(ratings) == [
        {"model": "atlas", "best": 1, "worst": 3},
        {"model": "cedar", "best": 1, "worst": 4},
    ]


def leaderboard(results: Any) -> BeautifulSoup:
    plan = next(plan_run_pages(results, {}))
    assert plan.path.endswith(f"{results.run}/index.html")
    return BeautifulSoup(render_page(ENV, plan), "html.parser")


def test_many_labellers_are_counted_with_their_ids_folded() -> None:
    results = make_results("imported", judges=["gpt4-pair"], calibrated=[True])
    experts = [f"author_{k}" for k in range(58)]
    results.judge_blocks[0].calibration.labellers = experts
    note = leaderboard(results).select_one("section.judge .calibration-block .note")
    assert note is not None
    folded = note.select_one("details.ids")
    assert folded is not None and folded.select_one("summary").get_text() == "58 people"
    assert "author_57" in folded.get_text()
    assert note.get_text(" ", strip=True).startswith(f"{results.judge_blocks[0].calibration.labels}")
    # A short list stays in the sentence.
    few = make_results("few", judges=["j/x"], calibrated=[True])
    note = leaderboard(few).select_one("section.judge .calibration-block .note")
    assert note is not None and note.select_one("details") is None and "ana, ben" in note.get_text()


def test_a_cost_nobody_recorded_reads_unknown_not_zero() -> None:
    results = make_results("imported", judges=["gpt4-pair"])
    imported, free = results.models[0], results.models[1]
    for line in results.cost:
        if line.who == imported:  # imported answers: no tokens, no latency, no price
            line.tokens_in = line.tokens_out = 0
            line.median_latency_s = None
            line.cost_usd = line.known_cost_usd = 0.0
        elif line.who == free:  # a free (simulated) model that recorded its calls
            line.cost_usd = line.known_cost_usd = 0.0
    soup = leaderboard(results)
    rows = {
        row.select_one("td.model").get_text(strip=True): row
        for row in soup.select("section.judge table.leaderboard tbody tr")
    }
    cost = {model: row.select_one('td[data-label="Cost"]').get_text() for model, row in rows.items()}
    latency = rows[imported].select_one('td[data-label="Median latency"]').get_text()
    assert cost[imported] == "unknown" and latency == "n/a"
    assert cost[free] == "$0.0000"
    who = {td.get_text(strip=True): td.parent for td in soup.select("table.cost-table td.who")}
    assert who[imported].select_one('td[data-label="Cost"]').get_text(strip=True) == "unknown"
