"""The fixture site opened from disk (file://) in Debian's headless Chromium, as the README
says to open it: every page type at a laptop's and a phone's width, clicked through from the
front page, with full-page screenshots kept as test artifacts (the `screenshot_dir` fixture:
$KONKORD_SCREENSHOT_DIR, else pytest's temporary folder; printed at the end of the run)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures_site import BROWSER_MARKS, build_standard_site

from konkord.results.schema import Results

pytestmark = BROWSER_MARKS
WIDTHS = {"laptop": 1280, "phone": 390}
# What the reader clicks, from the front page through every page type of a run down to one
# pair of answers side by side, then to the site's own pages.
CLICKS = [
    ("leaderboard", "table.runs a >> nth=0"),
    ("calibration", "nav.tabs a:has-text('Calibration')"),
    ("judges", "nav.tabs a:has-text('Judges')"),
    ("methodology", "nav.tabs a:has-text('Methodology')"),
    ("tasks", "nav.tabs a:has-text('Tasks')"),
    ("task", "main table a >> nth=0"),
    ("pair", ".pair-picker a >> nth=0"),
    ("about", "header.site nav a:has-text('About')"),
    ("runs", "header.site nav a:has-text('Runs')"),
]
SMALLEST_TEXT = """() => {
  let smallest = 99;
  for (const svg of document.querySelectorAll('main svg')) {
    const box = svg.getBoundingClientRect();
    if (!box.width) continue;
    const scale = box.width / svg.viewBox.baseVal.width;
    for (const text of svg.querySelectorAll('text'))
      smallest = Math.min(smallest, parseFloat(getComputedStyle(text).fontSize) * scale);
  }
  return smallest;
}"""


@pytest.fixture(scope="module")
def public(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[Results]]]:
    root = tmp_path_factory.mktemp("disk")
    runs = build_standard_site(root)
    yield root / "public", runs



@pytest.mark.parametrize("device", list(WIDTHS))
def test_click_through_from_disk_at_both_widths(
    public: tuple[Path, list[Results]], browser: Any, device: str, screenshot_dir: Path
) -> None:
    root, _ = public
    width = WIDTHS[device]
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((root / "index.html").as_uri())
    visited = ["index"]
    for name, selector in CLICKS:
        page.click(selector)
        page.wait_for_load_state()
        url = page.url
        assert url.startswith("file://"), url
        # A folder link would open Chromium's directory listing instead of the page.
        assert "Index of" not in page.title(), f"{name}: {url} is a directory listing"
        assert page.locator("header.site .brand").count() == 1, f"{name}: {url} is no page"
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{name} at {width} px is {overflow} px too wide"
        if name == "leaderboard":
            assert page.evaluate(SMALLEST_TEXT) >= 10, f"plot text under 10 px at {width} px"
            # The 50% line is drawn above the row bands, so no band hides it.
            assert page.evaluate(
                "(() => { const mid = document.querySelector('svg.forest line.mid');"
                " const band = document.querySelector('svg.forest rect');"
                " return !!mid && !!band && !!(band.compareDocumentPosition(mid) & 4); })()"
            )
        if name == "pair":
            shown = page.locator("section.pair:visible")
            assert shown.count() == 1
            assert shown.locator("article.pair-answer").count() == 2
        page.screenshot(path=str(screenshot_dir / f"disk-{name}-{width}.png"), full_page=True)
        visited.append(name)
    assert visited == ["index", *(name for name, _ in CLICKS)]
    assert errors == []
    page.close()


def test_calibration_headline_reaches_the_disagreements(
    public: tuple[Path, list[Results]], browser: Any
) -> None:
    root, runs = public
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((root / "alpha" / "calibration" / "index.html").as_uri())
    folded = page.locator("#judge-1 details.disagreements")
    assert folded.get_attribute("open") is None
    page.click("section.glance a[href='#judge-1-disagreements']")
    # Following the link opens the folded list it points into.
    assert folded.get_attribute("open") is not None
    cards = folded.locator("article.disagreement")
    assert cards.count() == len(runs[0].judge_blocks[0].calibration.disagreements)
    assert cards.first.is_visible()
    page.close()


def test_a_link_to_a_folded_verdict_opens_it(
    public: tuple[Path, list[Results]], browser: Any
) -> None:
    from konkord.site.formatting import anchor

    root, runs = public
    task = runs[0].tasks[0]
    second = next(c for c in task.comparisons if c.judge == runs[0].judges[1])
    target = anchor(second.judge, second.model_a, second.model_b)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((root / "alpha" / "tasks" / task.id / "index.html").as_uri() + f"#{target}")
    assert page.locator(f"#{target}").is_visible(), "the second judge's verdicts stay folded"
    page.close()
