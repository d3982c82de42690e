"""The demo site's layout in Debian's headless Chromium at a laptop (1280 px) and a phone (390 px)
width: no two texts of one plot overlap and no label runs over a grid line, plot text stays
legible, a judge prompt is shown whole, no table column is hidden without a note, and the
methodology page stays short. Full-page screenshots of every kind of page are kept, and the
page heights are printed (`-s` shows them)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from fixtures_site import BROWSER_MARKS, serving_demo_copy

RUN, CASCADE_RUN = "demo-python-codegen", "demo-support-replies"
PAGES = {
    "index": "index.html",
    "leaderboard": f"{RUN}/index.html",
    "methodology": f"{RUN}/methodology/index.html",
    "task": f"{RUN}/tasks/palindrome/index.html",
    "calibration": f"{RUN}/calibration/index.html",
    "judges": f"{RUN}/judges/index.html",
    "cascade-calibration": f"{CASCADE_RUN}/calibration/index.html",
}
WIDTHS = (1280, 390)
pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("layout-site")
    with serving_demo_copy(root, REPO) as address:
        yield address


@pytest.fixture(scope="module")
def pages(site: str, browser: Any, screenshot_dir: Path) -> Iterator[dict[tuple[str, int], Any]]:
    """Every kind of page at both widths, loaded once, each screenshotted whole."""
    opened: dict[tuple[str, int], Any] = {}
    for width in WIDTHS:
        for kind, path in PAGES.items():
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto(f"{site}/{path}")
            page.screenshot(path=str(screenshot_dir / f"layout-{kind}-{width}.png"), full_page=True)
            opened[(kind, width)] = page
    heights = {
        key: opened[key].evaluate("document.documentElement.scrollHeight") for key in opened
    }
    print("\npage heights (px): " + ", ".join(
        f"{kind} {heights[(kind, 1280)]:,}/{heights[(kind, 390)]:,}" for kind in PAGES
    ))
    yield opened
    for page in opened.values():
        page.close()


# Each plot's text boxes, its grid lines and the screen size of its text.
PLOT_GEOMETRY = """() => Array.from(document.querySelectorAll('figure svg')).map(svg => {
  const box = e => { const r = e.getBoundingClientRect();
    return [r.left, r.top, r.right, r.bottom]; };
  const texts = Array.from(svg.querySelectorAll('text')).filter(t => t.textContent.trim());
  const scale = svg.getScreenCTM().a;
  return {
    cls: svg.getAttribute('class'),
    texts: texts.map(t => ({text: t.textContent, box: box(t),
      px: parseFloat(getComputedStyle(t).fontSize) * scale})),
    lines: Array.from(svg.querySelectorAll('line.grid, line.mid')).map(box),
  };
})"""


def overlap(a: list[float], b: list[float], slack: float = 0.5) -> bool:
    return (
        a[0] + slack < b[2] and b[0] + slack < a[2] and a[1] + slack < b[3] and b[1] + slack < a[3]
    )


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", [k for k in PAGES if k not in ("index", "methodology")])
def test_no_two_texts_of_a_plot_overlap_and_no_label_crosses_a_grid_line(
    pages: dict[tuple[str, int], Any], kind: str, width: int
) -> None:
    plots = pages[(kind, width)].evaluate(PLOT_GEOMETRY)
    if kind in ("leaderboard", "judges", "cascade-calibration"):
        assert plots, f"{kind}: no plot"
    for plot in plots:
        texts = plot["texts"]
        for i, first in enumerate(texts):
            for second in texts[i + 1 :]:
                assert not overlap(first["box"], second["box"]), (
                    kind, width, plot["cls"], first["text"], second["text"]
                )
        if "forest" in (plot["cls"] or ""):
            labels = [t for t in texts if "%" not in t["text"]]
            assert labels
            for label in labels:
                for line in plot["lines"]:
                    assert not overlap(label["box"], line), (kind, width, label["text"])


@pytest.mark.parametrize("width", WIDTHS)
def test_plot_text_is_at_least_ten_pixels(
    pages: dict[tuple[str, int], Any], width: int
) -> None:
    for kind in ("leaderboard", "judges", "cascade-calibration"):
        for plot in pages[(kind, width)].evaluate(PLOT_GEOMETRY):
            for text in plot["texts"]:
                assert text["px"] >= 9.95, (kind, width, plot["cls"], text["text"], text["px"])


def test_the_cascade_plot_labels_its_thresholds(pages: dict[tuple[str, int], Any]) -> None:
    plots = pages[("cascade-calibration", 1280)].evaluate(PLOT_GEOMETRY)
    selective = [p for p in plots if "selective" in (p["cls"] or "")]
    assert selective
    shown = {t["text"] for t in selective[0]["texts"]}
    assert "0.80" in shown  # the run's own threshold is always labelled
    assert len(shown & {f"{k / 100:.2f}" for k in range(50, 100, 5)}) >= 4


@pytest.mark.parametrize("width", WIDTHS)
def test_the_judge_prompt_is_shown_whole_and_once(
    pages: dict[tuple[str, int], Any], width: int
) -> None:
    page = pages[("methodology", width)]
    boxes = page.evaluate(
        """() => Array.from(document.querySelectorAll('pre.prompt')).map(p => ({
          scroll: p.scrollHeight, client: p.clientHeight, text: p.textContent}))"""
    )
    assert len(boxes) == 1  # five judges, one frame: the same prompt, printed once
    (box,) = boxes
    assert box["scroll"] <= box["client"] + 1, box
    assert "VERDICT" in box["text"].splitlines()[-1] or "VERDICT" in box["text"][-400:]
    for judge in ("referee", "careful", "lefty", "verbose", "blind"):
        assert judge in page.inner_text("section.judge-prompt")
    if width == 1280:
        height = page.evaluate("document.documentElement.scrollHeight")
        assert height < 3000, height


HIDDEN_CELLS = """() => Array.from(document.querySelectorAll('table')).flatMap(table => {
  const note = table.closest('section, figure, details, div.scroll')?.querySelector('.hidden-note');
  if (note) return [];
  return Array.from(table.querySelectorAll('tbody td, thead th')).filter(cell => {
    if (cell.closest('thead') && getComputedStyle(cell.closest('thead')).display === 'none')
      return false;  // a stacked table: each cell carries its column's name instead
    let hidden = false;
    for (let e = cell; e && e !== table; e = e.parentElement)
      if (getComputedStyle(e).display === 'none') hidden = true;
    return hidden && !cell.closest('details:not([open])');
  }).map(cell => (table.className || 'table') + ': ' + cell.textContent.trim().slice(0, 40));
})"""


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", list(PAGES))
def test_no_column_is_hidden_without_a_note(
    pages: dict[tuple[str, int], Any], kind: str, width: int
) -> None:
    assert pages[(kind, width)].evaluate(HIDDEN_CELLS) == []


def test_stacked_cells_name_their_column_at_phone_width(
    pages: dict[tuple[str, int], Any],
) -> None:
    """On a phone a stacked table hides its header row: every figure cell says what it is."""
    unnamed = pages[("leaderboard", 390)].evaluate(
        """() => Array.from(document.querySelectorAll('table.stack tbody td'))
          .filter(td => !td.dataset.label && !td.matches('.model, .rank, .run, .who, .pair')
                        && td.offsetParent !== null && td.textContent.trim())
          .map(td => td.closest('table').className + ': ' + td.textContent.trim().slice(0, 30))"""
    )
    assert unnamed == []
