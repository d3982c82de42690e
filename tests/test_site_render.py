"""The pages of a built fixture site, parsed with BeautifulSoup: what each page must say."""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest
from bs4 import BeautifulSoup, Tag
from fixtures_site import HOSTILE_ANSWERS, SYSTEM_PROMPT, make_results, standard_runs, write_project

from konkord.results.schema import Results
from konkord.site.environment import REVEAL_JS
from konkord.site.markdown import render_markdown, sanitise_html
from konkord.stages.build.build import build_site


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[Results]]]:
    root = tmp_path_factory.mktemp("site")
    runs = standard_runs()
    write_project(root, runs)
    old = Path.cwd()
    os.chdir(root)
    try:
        build_site(Path("public"), offline=True, runs_file=Path("runs.json"))
        yield root / "public", runs
    finally:
        os.chdir(old)


def page(public: Path, path: str) -> BeautifulSoup:
    target = public / path
    if target.is_dir() or path.endswith("/") or path == "":
        target = target / "index.html"
    return BeautifulSoup(target.read_text(encoding="utf-8"), "html.parser")


def all_pages(public: Path) -> list[Path]:
    return sorted(public.rglob("*.html"))


def test_leaderboard_lists_models_in_rank_order_with_intervals(
    site: tuple[Path, list[Results]],
) -> None:
    public, runs = site
    alpha = runs[0]
    soup = page(public, "alpha/")
    section = soup.find("section", id="judge-1")
    assert isinstance(section, Tag)
    rows = section.select("table.leaderboard tbody tr")
    block = alpha.judge_blocks[0]
    assert [r.select_one("td.model").get_text(strip=True) for r in rows] == [
        rating.model for rating in block.ratings
    ]
    ranks = [r.select_one("td.rank").get_text(strip=True) for r in rows]
    # Models the data does not order against each other show the rank range they could take.
    assert ranks == ["1–2", "1–2", "3–4", "3–4", "5"]
    first = rows[0].select_one("td.winrate").get_text(strip=True)
    wr = block.ratings[0].win_rate_vs_field
    d = 0 if wr.high - wr.low >= 0.02 else 1  # no decimals an interval of 2+ points cannot back
    assert first == f"{100 * wr.estimate:.{d}f}% ({100 * wr.low:.{d}f}% to {100 * wr.high:.{d}f}%)"
    # The forest plot has one interval per model, and the heatmap n x n cells.
    assert len(section.select("svg.forest line.interval")) == len(block.ratings)
    assert len(section.select("svg.heatmap rect")) == len(block.ratings) ** 2
    # Cost and latency columns are there.
    assert "$0.4200" in rows[0].get_text()
    assert "1.5 s" in rows[0].get_text()


def test_calibration_block_stands_above_the_table(site: tuple[Path, list[Results]]) -> None:
    public, _ = site
    section = page(public, "alpha/").find("section", id="judge-1")
    assert isinstance(section, Tag)
    blocks = section.find_all(["div", "table"], class_=["calibration-block", "leaderboard"])
    assert [b.name for b in blocks] == ["div", "table"]
    text = blocks[0].get_text(" ", strip=True)
    assert "68% (57% to 80%), 41 of 60" in text
    assert "0.52 (0.33 to 0.69)" in text
    assert "Order-flip rate" in text


def test_uncalibrated_judge_says_so_where_the_ranking_is(site: tuple[Path, list[Results]]) -> None:
    public, _ = site
    section = page(public, "alpha/").find("section", id="judge-2")
    assert isinstance(section, Tag)
    assert "Uncalibrated." in section.select_one(".calibration-block").get_text()
    caption = section.select_one("table.leaderboard caption").get_text()
    assert "uncalibrated" in caption
    calibrated = page(public, "alpha/").find("section", id="judge-1")
    assert isinstance(calibrated, Tag)
    assert "uncalibrated" not in calibrated.select_one("table.leaderboard caption").get_text()


def test_claims_in_words_and_judge_selector(site: tuple[Path, list[Results]]) -> None:
    public, runs = site
    soup = page(public, "alpha/")
    claims = [li.get_text(" ", strip=True) for li in soup.select("#judge-1 ul.claims li")]
    assert claims[0].startswith(runs[0].judge_blocks[0].claims[0].text)
    selector = [a["href"] for a in soup.select("nav.judges a")]
    assert selector == ["#judge-1", "#judge-2"]


def test_every_page_names_judge_suite_date_and_version(site: tuple[Path, list[Results]]) -> None:
    public, runs = site
    for results in runs:
        for path in all_pages(public / results.run):
            text = BeautifulSoup(path.read_text(), "html.parser").get_text(" ", strip=True)
            for judge in results.judges:
                assert judge in text, path
            assert results.suite.name in text, path
            assert results.evidence_date and results.evidence_date in text, path
            assert f"konkord {results.konkord_version}" in text, path


def test_simulated_run_has_banner_on_every_page(site: tuple[Path, list[Results]]) -> None:
    public, runs = site
    for results in runs:
        for path in all_pages(public / results.run):
            banner = BeautifulSoup(path.read_text(), "html.parser").select(".banner.simulated")
            assert bool(banner) == results.simulated, path
            if banner:
                assert "no person was involved" in banner[0].get_text()
    for site_page in ("index.html", "about/index.html", "404.html"):
        assert page(public, site_page).select(".banner.simulated"), site_page


def test_every_page_forbids_script_and_loads_nothing_from_elsewhere(
    site: tuple[Path, list[Results]],
) -> None:
    public, _ = site
    for path in all_pages(public):
        soup = BeautifulSoup(path.read_text(), "html.parser")
        csp = soup.find("meta", attrs={"http-equiv": "Content-Security-Policy"})
        assert isinstance(csp, Tag), path
        # The one script allowed is the site's own, named by its hash: no 'unsafe-inline',
        # no 'self', so a script that got into a page any other way does not run.
        scripts = [script.string for script in soup.find_all("script")]
        assert scripts == [REVEAL_JS], path
        digest = base64.b64encode(hashlib.sha256(str(scripts[0]).encode()).digest()).decode()
        assert f"script-src 'sha256-{digest}';" in str(csp["content"]), path
        assert "default-src 'none'" in str(csp["content"])
        assert not soup.find_all("script", src=True), path
        assert not soup.find_all(["iframe", "form", "img", "object", "embed"]), path
        for tag in soup.find_all(True):
            assert not any(attr.startswith("on") for attr in tag.attrs), (path, tag.name)
        for link in soup.find_all("link"):
            assert not urlparse(str(link["href"])).netloc, path
        for anchor in soup.find_all("a", href=True):
            assert not str(anchor["href"]).lower().startswith("javascript:"), path
    headers = (public / "_headers").read_text()
    assert "Content-Security-Policy: default-src 'none'" in headers
    assert f"script-src 'sha256-{digest}';" in headers
    assert "frame-ancestors 'none'" in headers


def test_internal_links_name_a_file_so_they_work_from_disk(
    site: tuple[Path, list[Results]],
) -> None:
    """Opened from file://, a link to a folder shows a directory listing: every internal link
    names the page's index.html (the deployed site serves it with no redirect)."""
    public, _ = site
    ids: dict[Path, set[str]] = {}
    for path in all_pages(public):
        if path.name == "404.html":
            continue
        url = "http://site/" + path.relative_to(public).as_posix()
        for anchor in BeautifulSoup(path.read_text(), "html.parser").find_all("a", href=True):
            target = urlparse(urljoin(url, str(anchor["href"])))
            if target.netloc != "site":
                continue
            local = public / target.path.lstrip("/")
            assert not target.path.endswith("/"), (path, anchor["href"], "a folder link")
            assert local.is_file(), (path, anchor["href"])
            # And the place in the page it points to is there.
            if target.fragment and local.suffix == ".html":
                if local not in ids:
                    soup = BeautifulSoup(local.read_text(), "html.parser")
                    ids[local] = {str(tag["id"]) for tag in soup.find_all(id=True)}
                assert target.fragment in ids[local], (path, anchor["href"], "no such id")
    assert 'href="/index.html"' in (public / "404.html").read_text()
    rules = [line.split() for line in (public / "_redirects").read_text().splitlines()]
    # static rules first (Cloudflare's runtime asks for it), the one splat rewrite last
    assert rules[0] == ["/", "/index.html", "200"]
    assert rules[-1] == ["/*/", "/:splat/index.html", "200"]
    # Every folder typed without its slash is sent to the folder (served as it is, its
    # relative links would miss), task folders too.
    slashless = {source: (target, status) for source, target, status in rules[1:-1]}
    assert slashless["/alpha"] == ("/alpha/", "301")
    assert slashless["/alpha/calibration"] == ("/alpha/calibration/", "301")
    assert slashless["/about"] == ("/about/", "301")
    folders = {p.parent for p in public.rglob("index.html")} - {public}
    assert set(slashless) == {"/" + f.relative_to(public).as_posix() for f in folders}
    for source, (target, _) in slashless.items():
        assert target == source + "/" and (public / source[1:] / "index.html").is_file()


def test_methodology_prints_the_prompt_from_the_results_file(
    site: tuple[Path, list[Results]],
) -> None:
    public, runs = site
    soup = page(public, "alpha/methodology/")
    prompts = soup.select("section.judge-prompt")
    assert len(prompts) == 2  # one recorded prompt, and one judge with none
    prompt = prompts[0].select_one("pre.prompt")
    assert prompt is not None
    assert prompt.get_text() == runs[0].judge_blocks[0].system_prompt
    assert prompt.get_text().startswith(SYSTEM_PROMPT)
    assert runs[0].judge_blocks[0].judge in prompts[0].get_text()
    # The second judge has no recorded prompt: nothing is recomposed.
    assert prompts[1].select_one("pre.prompt") is None
    assert "no recorded prompt" in prompts[1].get_text()
    assert runs[0].judge_blocks[1].judge in prompts[1].get_text()
    assert soup.select_one("#judge-2") is not None  # links into a judge's methods still land
    # The methodology prose from content/ is there.
    assert "How the ranking is made" in soup.get_text()


def test_calibration_page_has_every_breakdown_and_the_gallery(
    site: tuple[Path, list[Results]],
) -> None:
    public, runs = site
    soup = page(public, "alpha/calibration/")
    judge = soup.select_one("#judge-1")
    assert judge is not None
    text = judge.get_text(" ", strip=True)
    for heading in (
        "By labeller",
        "By task",
        "By model pair",
        "By answer-length quartile",
        "Confusion matrix",
        "People against each other",
        "Against executed tests",
    ):
        assert heading in text
    assert "Q1: 100 to 199 chars" in text
    turns = [row.get_text(" ", strip=True) for row in judge.select("table.by-turn tbody tr")]
    assert turns[0].startswith("Turn 1 67%") and "20 of 30" in turns[0] and "7 of 9" in turns[0]
    note = judge.select_one("p.single-turn-note")
    assert note is not None and "its 3 tasks count as turn 1" in note.get_text(" ", strip=True)
    judges = page(public, "alpha/judges/")
    assert judges.select("table.by-turn tbody tr") and judges.select_one("p.single-turn-note")
    assert "2 more had no complete verdict" in text
    tests = judge.select_one("table.tests-by-pair")
    assert tests is not None
    assert "82% (66% to 92%), 28 of 34" in text
    pair = tests.select_one("tbody td.pair")
    assert pair is not None and pair.get_text().startswith("<b>pair</b> vs"), "escaped, not markup"
    assert "Where the orders flipped" in text
    # The disagreements are folded and grouped by task, each card linked to its comparison.
    folded = judge.select_one("details.disagreements")
    assert folded is not None and folded.get("open") is None
    gallery = folded.select("article.disagreement")
    assert len(gallery) == len(runs[0].judge_blocks[0].calibration.disagreements)
    groups = [h.a.get_text() for h in folded.select("h4.task-group")]
    assert groups == sorted(set(groups), key=groups.index), "each task once"
    link = gallery[0].select_one("h5 a")
    assert link is not None and str(link["href"]).startswith("../tasks/task-001/index.html#")
    # The headline stands first and reaches every judge's disagreements.
    glance = soup.select_one("section.glance")
    assert glance is not None and glance.find_next("section", class_="judge") is judge
    assert glance.select_one('a[href="#judge-1-disagreements"]') is not None
    assert soup.select_one("#judge-1-disagreements") is not None
    # The hostile rationale in the gallery is text, not script.
    assert [script.string for script in soup.find_all("script")] == [REVEAL_JS]
    uncal = soup.select_one("#judge-2").get_text(" ", strip=True)
    assert "Uncalibrated." in uncal and "not 0%, not 100%" in uncal


def test_task_page_shows_answers_verdicts_flips_and_labels(
    site: tuple[Path, list[Results]],
) -> None:
    public, runs = site
    task = runs[0].tasks[0]
    soup = page(public, f"alpha/tasks/{task.id}/")
    assert soup.select_one("#task-title code").get_text() == task.id
    answers = soup.select("article.answer")
    assert [a.h4.get_text(strip=True) for a in answers] == [a.model for a in task.answers]
    assert answers[0].select_one("pre code") is not None, "code stays code"
    comparisons = soup.select("article.comparison")
    assert len(comparisons) == len(task.comparisons)
    for article, comparison in zip(comparisons, task.comparisons, strict=True):
        orders = article.select(".order")
        assert len(orders) == 2
        assert all(o.select_one(".rationale") for o in orders)
        assert ("flipped" in article.get_text()) == comparison.flipped
        if comparison.labels:
            assert "ana chose" in article.select_one(".labels").get_text()
    assert "compiles failed: SyntaxError" in soup.get_text()
    # The deep link from the tasks index points here.
    index = page(public, "alpha/tasks/")
    assert index.find("a", href=f"{task.id}/index.html") is not None


def test_hostile_text_is_rendered_inert(site: tuple[Path, list[Results]]) -> None:
    public, _ = site
    # Beside the site's own script, the page holds no script, and nothing that could run one.
    html = (public / "hostile/tasks/hostile/index.html").read_text()
    assert html.count(f"<script>{REVEAL_JS}</script>") == 1
    html = html.replace(f"<script>{REVEAL_JS}</script>", "")
    soup = BeautifulSoup(html, "html.parser")
    assert not soup.find_all(["script", "iframe", "form", "input", "img", "svg"])
    assert "window.__pwned" in soup.get_text(), "hostile text is shown as text"
    assert not re.search(r"<script", html, re.IGNORECASE)
    hrefs = [str(a["href"]).strip().lower() for a in soup.find_all("a", href=True)]
    assert not [h for h in hrefs if h.startswith("javascript")]
    # Every answer, including the unclosed tag and the megabyte, sits in its own article,
    # and the page still ends with its footer.
    answers = soup.select("article.answer")
    assert len(answers) == len(HOSTILE_ANSWERS)
    assert soup.select_one("footer.site") is not None
    assert HOSTILE_ANSWERS["megabyte"][:1000] in answers[-1].get_text()


@pytest.mark.parametrize(
    "source",
    [
        "<script>alert(1)</script>",
        '<img src=x onerror="alert(1)">',
        "[x](javascript:alert(1))",
        '<a href="javascript:alert(1)">x</a>',
        "<svg><script>alert(1)</script></svg>",
        '<iframe src="https://e.com"></iframe>',
        '<form action="https://e.com"><input></form>',
        "![tracker](https://e.com/pixel.png)",
        "<div><b>unclosed <table><tr><td>",
    ],
)
def test_markdown_is_sanitised(source: str) -> None:
    soup = BeautifulSoup(str(render_markdown(source)), "html.parser")
    assert not soup.find_all(["script", "img", "svg", "iframe", "form", "input", "div", "table"])
    for tag in soup.find_all(True):
        assert not [a for a in tag.attrs if a.startswith("on")]
        assert not str(tag.get("href", "")).lower().startswith("javascript")


def test_sanitiser_strips_raw_html_too() -> None:
    dirty = '<p onclick="x()">a<script>b</script><a href="javascript:c">d</a><iframe></iframe></p>'
    clean = sanitise_html(dirty)
    assert "onclick" not in clean and "<script" not in clean and "javascript" not in clean
    assert "<iframe" not in clean and "<p>a" in clean


def test_markdown_keeps_code_as_code() -> None:
    html = str(render_markdown("```python\nif a < b:\n    print('<b>')\n```"))
    soup = BeautifulSoup(html, "html.parser")
    assert soup.select_one("pre code").get_text() == "if a < b:\n    print('<b>')\n"


def test_empty_runs_file_renders_an_empty_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_project(tmp_path, [])
    monkeypatch.chdir(tmp_path)
    summary = build_site(Path("public"), offline=True, runs_file=Path("runs.json"))
    assert summary.runs == []
    soup = page(tmp_path / "public", "index.html")
    assert "No runs yet." in soup.select_one(".empty").get_text()
    assert not soup.select(".banner.simulated")


def test_extras_are_written(site: tuple[Path, list[Results]]) -> None:
    public, runs = site
    for results in runs:
        copied = public / "results" / f"{results.run}.json"
        assert (
            copied.read_bytes() == (public.parent / "results" / f"{results.run}.json").read_bytes()
        )
    assert (public / "404.html").is_file()
    assert (public / "static" / "site.css").is_file()
    assert ".konkord-build.json" in (public / ".assetsignore").read_text()
    index = page(public, "index.html")
    assert [
        a.get_text(strip=True) for a in index.select("table.runs tbody tr td:first-child a")
    ] == [r.run for r in runs]


def test_a_model_name_with_markup_is_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = make_results("odd", models=["<b>bold</b>", "a&b"], judges=["j"], n_tasks=1)
    write_project(tmp_path, [results])
    monkeypatch.chdir(tmp_path)
    build_site(Path("public"), offline=True, runs_file=Path("runs.json"))
    html = (tmp_path / "public/odd/index.html").read_text()
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html


@pytest.mark.parametrize(
    "text",
    [
        "Answer 1 is clearer and shorter.",
        "Line one\nline two\n\n  Second paragraph. ",
        'It\'s "quoted", and fine',
        "x\n\n\n\ny",
        "Answer 2 is wrong (it returns None); Answer 1 is right.",
    ],
)
def test_plain_text_fast_path_matches_the_full_renderer(text: str) -> None:
    from konkord.site.markdown import MARKDOWN_SYNTAX, _cleaner, _markdown

    assert not MARKDOWN_SYNTAX.search(text), "this text takes the fast path"
    assert str(render_markdown(text)) == _cleaner.clean(_markdown.render(text))


@pytest.mark.parametrize(
    "text", ["a *b*", "<b>x</b>", "1. item", "- item", "    code", "a & b", "see [x](y)", "# h"]
)
def test_anything_markdown_takes_the_full_renderer(text: str) -> None:
    from konkord.site.markdown import MARKDOWN_SYNTAX

    assert MARKDOWN_SYNTAX.search(text)


@pytest.mark.parametrize(
    "text",
    [
        "Answer 1 is *clear*.",
        "a **b** and `c < d`\nnext line  \nhard break\n\n  para *two*",
        "see [x](http://a.b) & [y](javascript:alert(1))",
        "a_b_c *unclosed",
        "text with <b>html</b> inside",
        "*a*\n\n\n*b*",
        "![img](http://x/y.png) tail",
        "~~strike~~ and <script>alert(1)</script>",
    ],
)
def test_inline_only_shortcut_matches_the_full_renderer(text: str) -> None:
    from konkord.site.markdown import BLOCK_SYNTAX, _cleaner, _markdown

    assert not BLOCK_SYNTAX.search(text), "this text skips the block parser"
    assert str(render_markdown(text)) == _cleaner.clean(_markdown.render(text))


@pytest.mark.parametrize(
    "text",
    [
        "# h",
        "> q",
        "- a",
        "* a",
        "1. a",
        "```\nx\n```",
        "a\n---",
        "a\n===",
        "***",
        "a | b",
        "    code",
        "[r]: http://x",
        "<div>",
    ],
)
def test_block_markdown_takes_the_full_parser(text: str) -> None:
    from konkord.site.markdown import BLOCK_SYNTAX

    assert BLOCK_SYNTAX.search(text)


@pytest.mark.parametrize(
    "text",
    [
        "Answer 1 is *clear and short*.",
        "**Answer 2** is wrong; *Answer 1* handles (*empty*) input.",
        "It's \"*quoted*\" and *fine*'s\n*spans\nlines* \n  next >= 2",
        "*a* **b** *c*: done? *yes*!",
        "tab\t*x*\t\nend",
        "Answer of **m/x** to `task-001`: `solve(x)` returns *None*.",
    ],
)
def test_simple_inline_shortcut_matches_the_full_renderer(text: str) -> None:
    from konkord.site.markdown import _cleaner, _markdown, simple_inline

    assert simple_inline(text) is not None, "this text takes the shortcut"
    assert str(render_markdown(text)) == _cleaner.clean(_markdown.render(text))


@pytest.mark.parametrize(
    "text",
    [
        "a *b",
        "a* b*",
        "***a***",
        "**a*",
        "*a **b** c*",
        "2*3*4",
        "*a*b",
        "a *b* c  \nhard break",
        "*a_b*",
        "`a``b`",
        "` a `",
        "`*`",
        "*`c`*",
        "`unclosed",
        "`two\nlines`",
        "*[x](y)*",
        "*a* &amp;",
        "*a* <b>",
        "*a* \\*b",
        "~~a~~ *b*",
    ],
)
def test_other_inline_markdown_is_left_to_the_parser(text: str) -> None:
    from konkord.site.markdown import simple_inline

    assert simple_inline(text) is None


def test_simple_inline_agrees_with_markdown_it_on_random_text() -> None:
    """Seeded random paragraphs of emphasis, code spans, words, punctuation and whitespace:
    where the shortcut renders one, its HTML is markdown-it's, after the sanitiser."""
    import random

    from konkord.site.markdown import _cleaner, _markdown, simple_inline

    pieces = [
        "`code`", "`a b`", "` x`", "``", "`", "*word*", "**bold**", " *a b*", "(*w*)", "*w*.",
        "word", "1", " ", " ", "\n", " \n", "\n \t", "  \n", "\t", "*", "**", "***", "(", ")",
        ".", ",", "'", '"', ">", ":", "!", "?", "-", "/", "é", "\u00a0", "\u3000", "_", "[", "]",
        "&", "<",
    ]  # fmt: skip
    rng = random.Random(5)
    shortcut = 0
    for _ in range(4000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 16)))
        fast = simple_inline(text)
        if fast is None:
            continue
        shortcut += 1
        expected = _cleaner.clean(f"<p>{_markdown.renderInline(text)}</p>")
        assert _cleaner.clean(f"<p>{fast}</p>") == expected, repr(text)
    assert shortcut > 200


def test_the_fast_block_syntax_test_is_block_syntax() -> None:
    """has_block_syntax is BLOCK_SYNTAX.search, on seeded random text made of block syntax."""
    import random

    from konkord.site.markdown import BLOCK_SYNTAX, has_block_syntax

    pieces = [
        "a", "1", "2.", "3)", " ", "  ", "    ", "\t", "\n", "\n\n", "#", ">", "|", "<", "-",
        "+", "*", "_", "=", "```", "~~~", "[x]", "[x]:", "[", "]:", "]", ":", "\r", "\x00",
        "é", "٣.", "\u00a0",
    ]  # fmt: skip
    rng = random.Random(7)
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert has_block_syntax(text) == bool(BLOCK_SYNTAX.search(text)), repr(text)


FENCED_ANSWER = (
    "Answer of **m/x** to `task-001`.\n\nIt doubles; *simple*.\n"
    '```python\ndef solve(x):\n    return x * 2  # <b> & "q"\n\n\tpass\n```\nAfter the code.\n'
    "```\n```\n\n```js\n    ```\n```"
)


@pytest.mark.parametrize(
    "text",
    [
        FENCED_ANSWER,
        "```\nonly code\n```\n",
        "text right before\n```c#\nx\n```\ntext right after",
        "```\n# not a heading\n- nor a list\n<script>alert(1)</script>\n```",
    ],
)
def test_paragraphs_and_fences_shortcut_matches_the_full_renderer(text: str) -> None:
    from konkord.site.markdown import _cleaner, _markdown, paragraphs_and_fences

    assert paragraphs_and_fences(text) is not None, "this text takes the shortcut"
    assert str(render_markdown(text)) == _cleaner.clean(_markdown.render(text))


@pytest.mark.parametrize(
    "text",
    [
        "```\nunclosed",
        "````\nfour\n````",
        "``` py\nx\n```",
        "  ```\nindented\n  ```",
        "```\nx\n```  ",
        "```\nx\n ```",
        "```\nx\n````",
        "- list\n```\nx\n```",
        "# heading\n```\nx\n```",
        "para\n \tindented\n```\nx\n```",
        "no\u00a0break space\n```\nx\n```",
    ],
)
def test_other_blocks_around_fences_are_left_to_the_parser(text: str) -> None:
    from konkord.site.markdown import paragraphs_and_fences

    assert paragraphs_and_fences(text) is None


def test_paragraphs_and_fences_agree_with_markdown_it_on_random_text() -> None:
    """Seeded random lines of paragraphs, fences, code and blank lines: where the shortcut
    renders a text, its HTML is markdown-it's, after the sanitiser."""
    import random

    from konkord.site.markdown import _cleaner, _markdown, paragraphs_and_fences

    inline = ["word", "*em*", "**b**", "`c`", " ", "x", "(", ".", "'", '"', ">", "é", ":", "&", "*"]
    fences = ["```", "```python", "```c#", "``` py", "````", "~~~", "  ```", "    ```", "\t```"]
    code = ["def f():", "    return 1", "\tif x:", "<script>", "a & b", "", "  ", "# h", "- x"]
    rng = random.Random(11)
    shortcut = 0
    for _ in range(6000):
        lines = []
        for _ in range(rng.randint(1, 10)):
            kind = rng.random()
            if kind < 0.25:
                lines.append(rng.choice(fences) if rng.random() < 0.2 else "```")
            elif kind < 0.45:
                lines.append(rng.choice(code))
            elif kind < 0.55:
                lines.append(rng.choice(["", " ", "\t"]))
            else:
                lines.append("".join(rng.choice(inline) for _ in range(rng.randint(1, 8))))
        text = "\n".join(lines) + rng.choice(["", "\n"])
        fast = paragraphs_and_fences(text)
        if fast is None:
            continue
        shortcut += 1
        assert _cleaner.clean(fast) == _cleaner.clean(_markdown.render(text)), repr(text)
    assert shortcut > 200


def test_a_run_without_judges_says_there_is_no_ranking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = make_results("nojudge", models=["m/a", "m/b"], judges=[], n_tasks=1)
    write_project(tmp_path, [results])
    monkeypatch.chdir(tmp_path)
    build_site(Path("public"), offline=True, runs_file=Path("runs.json"))
    soup = page(tmp_path / "public", "nojudge/")
    assert "No ranking yet." in soup.get_text()
    assert page(tmp_path / "public", "nojudge/tasks/task-001/").select("article.answer")
