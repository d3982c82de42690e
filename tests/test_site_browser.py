"""The fixture site in a real browser: Debian's headless Chromium, driven by Playwright,
on a plain static server (as a static host would serve it: no konkord in between)."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures_site import BROWSER_MARKS, HOSTILE_ANSWERS, build_standard_site

from konkord.results.schema import Results
from konkord.site.environment import REVEAL_JS

pytestmark = BROWSER_MARKS


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """A static host as Cloudflare's is configured: a missing address, at any depth, gets the
    site's 404.html with status 404 (wrangler.jsonc: not_found_handling "404-page")."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        page = Path(self.directory) / "404.html"
        if code != 404 or not page.is_file():
            super().send_error(code, message, explain)
            return
        body = page.read_bytes()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Results]]]:
    root = tmp_path_factory.mktemp("browser")
    runs = build_standard_site(root)
    handler = functools.partial(QuietHandler, directory=str(root / "public"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", runs
    server.shutdown()
    server.server_close()



class Watched:
    """A page with every console error, page error, dialog and outside request recorded."""

    def __init__(self, browser: Any, base: str, width: int = 1280) -> None:
        self.page = browser.new_page(viewport={"width": width, "height": 900})
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.errors.append(f"dialog: {d.message}"), d.dismiss()))
        self.page.on(
            "request",
            lambda r: not r.url.startswith((base, "data:")) and self.outside.append(r.url),
        )

    def close(self) -> None:
        self.page.close()


def test_leaderboard_lists_models_in_rank_order_with_intervals(
    site: tuple[str, list[Results]], browser: Any
) -> None:
    base, runs = site
    watched = Watched(browser, base)
    watched.page.goto(f"{base}/alpha/")
    rows = watched.page.locator("#judge-1 table.leaderboard tbody tr")
    models = rows.locator("td.model").all_inner_texts()
    assert models == [r.model for r in runs[0].judge_blocks[0].ratings]
    rates = rows.locator("td.winrate").all_inner_texts()
    for text, rating in zip(rates, runs[0].judge_blocks[0].ratings, strict=True):
        wr = rating.win_rate_vs_field
        d = 0 if wr.high - wr.low >= 0.02 else 1
        assert (
            text == f"{100 * wr.estimate:.{d}f}% ({100 * wr.low:.{d}f}% to {100 * wr.high:.{d}f}%)"
        )
    assert watched.page.locator("#judge-1 svg.forest line.interval").count() == len(models)
    assert watched.errors == [] and watched.outside == []
    watched.close()


def test_task_deep_link_opens_the_right_task(site: tuple[str, list[Results]], browser: Any) -> None:
    base, runs = site
    task = runs[0].tasks[1]
    watched = Watched(browser, base)
    watched.page.goto(f"{base}/alpha/tasks/")
    watched.page.click(f"a[href='{task.id}/index.html']")
    watched.page.wait_for_url(f"{base}/alpha/tasks/{task.id}/index.html")
    assert watched.page.locator("#task-title code").inner_text() == task.id
    assert watched.page.locator("article.answer").count() == len(task.answers)
    # A deep link to one comparison lands on it.
    anchor = watched.page.locator("article.comparison").nth(2).get_attribute("id")
    watched.page.goto(f"{base}/alpha/tasks/{task.id}/#{anchor}")
    assert watched.page.evaluate("document.querySelector(':target').id") == anchor
    assert watched.page.locator(f"#{anchor}").is_visible()
    assert watched.errors == []
    watched.close()


def test_no_console_errors_on_any_kind_of_page(
    site: tuple[str, list[Results]], browser: Any
) -> None:
    base, _ = site
    paths = [
        "/",
        "/about/",
        "/404.html",
        "/alpha/",
        "/alpha/methodology/",
        "/alpha/calibration/",
        "/alpha/tasks/",
        "/alpha/tasks/task-001/",
        "/sim-demo/",
        "/sim-demo/calibration/",
        "/hostile/",
        "/hostile/tasks/hostile/",
    ]
    watched = Watched(browser, base)
    for path in paths:
        response = watched.page.goto(base + path)
        assert response is not None and response.status == 200, path
        assert watched.page.locator("link[rel=stylesheet]").count() == 1
        # The stylesheet really applied: the header is laid out as flex.
        assert (
            watched.page.evaluate("getComputedStyle(document.querySelector('header.site')).display")
            == "flex"
        ), path
    assert watched.errors == [], watched.errors
    assert watched.outside == [], watched.outside
    watched.close()


@pytest.mark.parametrize("width", [390, 1280])
def test_hostile_answers_execute_nothing_and_keep_the_layout(
    site: tuple[str, list[Results]], browser: Any, width: int
) -> None:
    base, _ = site
    watched = Watched(browser, base, width)
    watched.page.goto(f"{base}/hostile/tasks/hostile/")
    page = watched.page
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("iframe, form, input, img").count() == 0
    # The one script is the site's own, the one the policy names by its hash.
    assert page.locator("script").all_text_contents() == [REVEAL_JS]
    # Clicking the hostile link does nothing either.
    link = page.locator(".answers-grid").get_by_text("click me", exact=False).first
    link.click()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.url.startswith(f"{base}/hostile/tasks/hostile/")
    # Layout: no horizontal overflow of the page, every answer in its own box inside main,
    # and the footer after main, all where they belong.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    answers = page.locator("main article.answer")
    assert answers.count() == len(HOSTILE_ANSWERS)
    main_box = page.locator("main").bounding_box()
    for index in range(answers.count()):
        box = answers.nth(index).bounding_box()
        assert box["x"] >= main_box["x"] - 1
        assert box["x"] + box["width"] <= main_box["x"] + main_box["width"] + 1
        # A megabyte of text scrolls inside its box instead of stretching the page.
        assert box["height"] < 2000
    assert page.evaluate(
        "document.querySelector('main').compareDocumentPosition(document.querySelector('footer.site'))"
        " & Node.DOCUMENT_POSITION_FOLLOWING"
    )
    assert page.locator("main section.judge article.comparison").count() == 3
    assert watched.errors == [] and watched.outside == []
    watched.close()


def test_screenshots_of_the_leaderboard(
    site: tuple[str, list[Results]], browser: Any, screenshot_dir: Path
) -> None:
    """Phone and laptop screenshots, kept for a person to look at (not compared)."""
    base, _ = site
    for name, width in (("phone", 390), ("laptop", 1280)):
        watched = Watched(browser, base, width)
        watched.page.goto(f"{base}/alpha/")
        assert watched.page.evaluate(
            "document.documentElement.scrollWidth <= window.innerWidth + 1"
        )
        watched.page.screenshot(path=str(screenshot_dir / f"leaderboard-{name}.png"), full_page=False)
        watched.close()
    assert (screenshot_dir / "leaderboard-phone.png").stat().st_size > 0


OPEN_AND_SHOWN = "id => { const t = document.getElementById(id); return !!t.closest('details[open]')"\
    " && t.getBoundingClientRect().height > 0; }"


@pytest.mark.parametrize("script", [True, False], ids=["script", "no-script"])
def test_a_link_into_a_folded_judge_opens_it(
    site: tuple[str, list[Results]], browser: Any, script: bool
) -> None:
    """The Judges page links each judge to its section of the leaderboard; a folded one opens,
    with the script and without it (Chromium reveals a target inside a closed fold itself)."""
    base, runs = site
    context = browser.new_context(
        java_script_enabled=script, viewport={"width": 1280, "height": 900}
    )
    page = context.new_page()
    page.goto(f"{base}/alpha/")
    assert page.locator("details.judge-fold").count() == len(runs[0].judges) - 1
    assert page.locator("details.judge-fold[open]").count() == 0
    assert page.locator("#judge-1").is_visible(), "the first judge is shown in full"
    assert not page.locator("#judge-2 table.leaderboard").is_visible()
    page.goto(f"{base}/alpha/judges/")
    page.click("table.judge-table a[href$='#judge-2']")
    page.wait_for_url("**/alpha/**#judge-2")
    assert page.evaluate(OPEN_AND_SHOWN, "judge-2")
    assert page.locator("#judge-2 table.leaderboard").is_visible()
    context.close()


def test_the_script_alone_opens_a_fold_on_hashchange(
    site: tuple[str, list[Results]], browser: Any
) -> None:
    """Where a browser does not reveal a folded target itself, the page's script does: closed
    again by hand and told the address changed, the fold opens (so the policy lets it run)."""
    base, _ = site
    watched = Watched(browser, base)
    page = watched.page
    page.goto(f"{base}/alpha/#judge-2")
    page.evaluate("document.querySelector('details.judge-fold').open = false")
    assert not page.evaluate(OPEN_AND_SHOWN, "judge-2")
    page.evaluate("dispatchEvent(new HashChangeEvent('hashchange'))")
    assert page.evaluate(OPEN_AND_SHOWN, "judge-2")
    assert watched.errors == [] and watched.outside == []
    watched.close()


@pytest.mark.parametrize("missing", ["/nope", "/alpha/tasks/nope/deeper/", "/alpha/x/y/z.html"])
def test_the_not_found_page_works_at_any_depth(
    site: tuple[str, list[Results]], browser: Any, missing: str
) -> None:
    """The host answers a missing address with 404.html and keeps the address: the page is
    styled, and its links lead to the runs and the about page from wherever it was asked."""
    base, _ = site
    watched = Watched(browser, base)
    page = watched.page
    links = {
        "main a:has-text('front page')": f"{base}/index.html",
        "header.site nav a:has-text('About')": f"{base}/about/index.html",
    }
    for link, lands in links.items():
        response = page.goto(base + missing)
        assert response is not None and response.status == 404
        assert page.url == base + missing, "the host keeps the address as typed"
        assert page.locator("main h1").inner_text() == "Not found"
        display = page.evaluate("getComputedStyle(document.querySelector('header.site')).display")
        assert display == "flex", "the stylesheet loaded"
        with page.expect_navigation() as navigation:
            page.click(link)
        assert navigation.value is not None and navigation.value.status == 200
        assert page.url == lands
    # Chromium logs each 404 it is answered with: the two pages asked for, and nothing else
    # (no stylesheet or link target missing).
    not_found = "Failed to load resource: the server responded with a status of 404 (Not Found)"
    assert watched.errors == [not_found] * len(links)
    assert watched.outside == []
    watched.close()
