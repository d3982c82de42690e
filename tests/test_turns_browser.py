"""A conversation's turn page of the demo (demo-conversations) in Debian's headless Chromium,
on a plain static server, at a laptop and a phone width: the turns before the judged one with
each model's own replies, the judged turn marked, the per-turn leaderboard line."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from fixtures_site import BROWSER_MARKS, build_project_site, open_page, serving

from konkord.results.base import Interval
from konkord.site.formatting import fmt_interval

SIM = re.compile(r"sim/(\w+):strength=[-\d.]+")
RUN = "demo-conversations"
pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("turns-site")
    for folder in ("suites", "templates", "content"):
        shutil.copytree(REPO / folder, root / folder)
    shutil.copytree(REPO / "runs" / RUN, root / "runs" / RUN)
    (root / "results").mkdir()
    shutil.copy(REPO / "results" / f"{RUN}.json", root / "results" / f"{RUN}.json")
    runs = json.loads((REPO / "runs.json").read_text())
    runs["runs"] = [r for r in runs["runs"] if r["name"] == RUN]
    (root / "runs.json").write_text(json.dumps(runs))
    build_project_site(root)
    with serving(root / "public") as address:
        yield address




@pytest.mark.parametrize("width", [1280, 390])
def test_a_second_turn_page_shows_the_conversation_and_marks_the_judged_turn(
    site: str, browser: Any, width: int, screenshot_dir: Path
) -> None:
    page, problems = open_page(browser, site, f"/{RUN}/tasks/code-clamp-t2/", width)
    conversation = page.locator("section.conversation")
    assert conversation.is_visible()
    assert "Turn 2 of a conversation" in conversation.inner_text()
    user = conversation.locator(".user-turn").inner_text()
    assert "def clamp(value: float, low: float, high: float)" in user and "`" not in user
    replies = conversation.locator("details summary").all_inner_texts()
    assert replies == [f"{m}'s reply to turn 1" for m in ("juniper", "kestrel", "larch")]
    conversation.locator("details summary").first.click()
    assert "def clamp" in conversation.locator("details").first.inner_text()
    heading = page.locator("section.prompt-box h3").first.inner_text()
    assert heading.startswith("Turn 2, the turn judged")
    assert "ValueError" in page.locator("section.prompt-box").inner_text()  # turn 2's message
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow}px at {width}px"
    page.screenshot(path=str(screenshot_dir / f"turn-page-{width}.png"), full_page=True)
    assert problems == []
    page.close()


def short(text: str) -> str:
    """A text with the demo's model specs by their display names, as the page shows them."""
    return SIM.sub(r"\1", text)


@pytest.mark.parametrize("width", [1280, 390])
def test_the_leaderboard_ranks_each_turn_with_intervals(
    site: str, browser: Any, width: int, screenshot_dir: Path
) -> None:
    page, problems = open_page(browser, site, f"/{RUN}/", width)
    results = json.loads((REPO / "results" / f"{RUN}.json").read_text())
    turns = results["judge_blocks"][0]["by_turn"]
    lines = page.locator("ul.turn-lines > li").all_inner_texts()
    assert [line.split(" (")[0] for line in lines] == ["Turn 1", "Turn 2"]
    for line, turn in zip(lines, turns, strict=True):
        assert f"({turn['tasks']} tasks; {turn['pairs']} pair verdicts)" in line
        for rating in turn["ratings"]:  # each model with its interval and rank range, as stored
            share = fmt_interval(Interval(**rating["win_rate_vs_field"]))
            best, worst = rating["rank_best"], rating["rank_worst"]
            assert f"{short(rating['model'])} {share}, rank {best}–{worst}" in line
        assert turn["claims"] and all(short(claim["text"]) in line for claim in turn["claims"])
    # the per-turn forest plot: one row per model and turn, each with its interval drawn
    plot = page.locator("figure.turn-plot svg.forest")
    assert plot.is_visible()
    rows = plot.locator("g.row")
    assert rows.count() == sum(len(t["ratings"]) for t in turns) == 6
    assert plot.locator("line.interval").count() == 6
    labels = plot.locator("text.label").all_text_contents()
    # 8 tasks per turn: no ordering clears the bar that holds a ranking's claims together
    # (turn 2's juniper above larch did at 95% per pair), so every rank range is 1-3
    assert labels[:2] == [f"juniper, turn {k} (rank 1–3)" for k in (1, 2)]
    box = plot.bounding_box()
    assert box is not None and box["width"] <= width
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow}px at {width}px"
    page.locator("div.per-turn").screenshot(path=str(screenshot_dir / f"per-turn-{width}.png"))
    assert problems == []
    page.close()
