"""The Judges page of the real demo run (five simulated judges) in Debian's headless Chromium, on
a plain static server, at a laptop and a phone width."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import REPO
from fixtures_site import BROWSER_MARKS, open_page, serving_demo_copy

from konkord.configuration.display_names import renamed
from konkord.configuration.runs_config import load_runs
from konkord.results.judges_table import judge_table
from konkord.results.schema import Results, read_results
from konkord.site.formatting import justified_digits

RUN = "demo-python-codegen"
# links name index.html explicitly where the site is made to open from file:// too
JUDGES_PAGE = re.compile(rf"/{RUN}/judges/(index\.html)?$")
pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("judges-site")
    with serving_demo_copy(root, REPO) as address:
        yield address



def shown_results(run: str) -> Results:
    """A demo run's results as its pages show them: by the names runs.json gives."""
    names = load_runs(REPO / "runs.json").get(run).names
    return renamed(read_results(REPO / "results" / f"{run}.json"), names)




@pytest.mark.parametrize("width", [1280, 390])
def test_judges_page_shows_the_table_the_panel_and_the_picture(
    site: str, browser: Any, width: int
) -> None:
    expected = judge_table(shown_results(RUN))
    page, problems = open_page(browser, site, f"/{RUN}/", width)
    page.click("nav.tabs a:has-text('Judges')")
    page.wait_for_url(JUDGES_PAGE)
    assert page.locator("nav.tabs a[aria-current='page']").inner_text() == "Judges"
    rows = page.locator("table.judge-table tbody tr")
    assert rows.locator(".judge-key").all_inner_texts() == [f"J{r.number}" for r in expected.rows]
    people = rows.locator("td.people .fig").all_inner_texts()
    # At the precision the interval justifies: whole points when it spans 2 points or more.
    assert people == [
        f"{100 * (r.people.rate or 0):.{justified_digits(r.people.low, r.people.high)}f}%"
        for r in expected.rows
        if r.people
    ]
    assert all("." not in figure for figure in people), "the demo's intervals span points"
    assert expected.people is not None
    reference = page.locator("table.judge-table tfoot tr.reference")
    assert "People vs people" in reference.inner_text()
    agreement = expected.people.agreement
    digits = justified_digits(agreement.low, agreement.high)
    assert (
        reference.locator("td.people .fig").inner_text()
        == f"{100 * (agreement.rate or 0):.{digits}f}%"
    )
    splits = rows.locator("td.split .fig").all_inner_texts()
    assert "75/25" in splits  # the position-biased judge
    panel = page.locator("table.panel-ranking tbody tr td.model").all_inner_texts()
    assert panel == [r.model for r in expected.panel]
    picture = page.locator("figure.plot svg.ranks")
    assert picture.locator("polyline").count() == len(expected.models)
    assert "pair-order agreement" in page.locator("#definitions + dl").inner_text()
    # the page never scrolls sideways, and neither do its tables: on a phone each judge's
    # figures stack under their names, each model's places line up under its name
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    for table in ("table.judge-table", "table.panel-ranking"):
        box = page.locator(table).evaluate("t => t.parentElement.getBoundingClientRect().right")
        assert box <= width + 1
        hidden = page.locator(table).evaluate(
            "t => t.parentElement.scrollWidth - t.parentElement.clientWidth"
        )
        assert hidden <= 1, f"{table} hides {hidden} px to scroll to at {width} px"
    if width < 640:
        cell = page.locator("table.judge-table tbody tr").first.locator("td.people")
        label = cell.evaluate("td => getComputedStyle(td, '::before').content")
        assert label == '"Agreement with people"'
    assert problems == []
    page.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_index_lists_every_judge_with_its_figures_per_run(
    site: str, browser: Any, width: int
) -> None:
    page, problems = open_page(browser, site, "/", width)
    table = page.locator("table.judges-across-runs")
    judges = table.locator("th[scope='rowgroup'] code").all_inner_texts()
    # the same rows as each run's judges table: a cascade under its own name, and its strong
    # judge and first pass on their own verdicts
    used = [
        row.judge
        for r in ("demo-python-codegen", "demo-support-replies")
        for row in judge_table(shown_results(r)).rows
    ]
    assert "quick -> steward at 0.8" in used and "sim-judge/quick" in used
    assert sorted(judges) == sorted(dict.fromkeys(used))
    table.locator(f"a[href^='{RUN}/judges/']").first.click()
    page.wait_for_url(JUDGES_PAGE)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    assert problems == []
    page.close()


@pytest.mark.parametrize("script", [True, False], ids=["script", "no-script"])
def test_an_address_deep_inside_a_folded_judge_opens_it(
    site: str, browser: Any, script: bool
) -> None:
    """The demo's leaderboard folds four of its five judges; an address naming a part of one
    (its ranking anchored to people) opens that judge's fold and shows the part."""
    context = browser.new_context(
        java_script_enabled=script, viewport={"width": 1280, "height": 900}
    )
    page = context.new_page()
    page.goto(f"{site}/{RUN}/index.html#judge-3-anchored")
    assert page.locator("details.judge-fold").count() == 4
    assert page.locator("details.judge-fold[open]").count() == 1
    assert page.locator("#judge-3-anchored").is_visible()
    # ... and scrolled to it: its top is in the window.
    top = page.evaluate("document.getElementById('judge-3-anchored').getBoundingClientRect().top")
    assert -1 <= top < 900  # scrollIntoView may land half a pixel past the top
    context.close()
