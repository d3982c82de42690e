"""What a reader needs on a run's leaderboard and task pages, parsed with BeautifulSoup: the
executed checks as a model-by-check table, every figure explained where it is shown, and task
pages that put the answers a verdict judged, their check results and their state side by side."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from bs4 import BeautifulSoup, Tag
from fixtures_site import make_results, write_project

from konkord.results.schema import CheckView, Interval, LabelView, PassRate, Proportion, Results
from konkord.site.formatting import anchor
from konkord.site.markdown import summary_line
from konkord.site.task_pages import pair_anchor
from konkord.stages.build.build import build_site

TESTS = "assert solve(1) == 2\nassert solve(0) == 0"


def reading_results() -> Results:
    """A run whose first task has a failed answer, a cut-off one, tests, and two checks."""
    results = make_results("reading", n_tasks=2)
    task = results.tasks[0]
    task.tests = TESTS
    failed, cut = task.answers[1], task.answers[2]
    failed.text, failed.error, failed.checks = None, "timeout after 60 s", []
    cut.truncated, cut.finish_reason = True, "length"
    for answer in task.answers:
        if answer.text is not None:
            answer.checks.append(
                CheckView(
                    check="tests", passed=answer is cut, reason="assert failed", sandbox="bwrap"
                )
            )
    results.pass_rates += [
        PassRate(
            model=m,
            check="tests",
            passed=1,
            total=2,
            rate=Interval(estimate=0.5, low=0.1, high=0.9),
        )
        for m in results.models
    ]
    # Two judges' verdicts on the same pair carry the same person's label.
    for comparison in task.comparisons:
        if {comparison.model_a, comparison.model_b} == {failed.model, cut.model}:
            comparison.labels = [LabelView(labeller="ana", winner=cut.model)]
    return results


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Results]]:
    root = tmp_path_factory.mktemp("reading")
    results = reading_results()
    write_project(root, [results])
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        build_site(Path("public"), offline=True, runs_file=Path("runs.json"))
    yield root / "public", results


def soup_of(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def test_executed_checks_are_one_row_per_model_and_one_column_per_check(
    site: tuple[Path, Results],
) -> None:
    public, results = site
    table = soup_of(public / "reading" / "index.html").select_one("table.checks-table")
    assert table is not None
    assert [th.get_text() for th in table.select("thead th")] == ["Model", "compiles", "tests"]
    rows = table.select("tbody tr")
    assert [r.th.get_text() for r in rows] == [r.model for r in results.judge_blocks[0].ratings]
    assert all(len(r.select("td")) == 2 for r in rows)
    assert rows[0].select("td")[1].get_text(" ", strip=True) == "50% (10% to 90%) 1/2"
    note = table.find_parent("section").select_one("p.note").get_text()
    assert "tests: the task's own tests pass" in note
    assert "ruff_clean" not in note, "only the checks the suite declares are explained"


def test_every_figure_of_a_judge_is_explained_where_it_is_shown(
    site: tuple[Path, Results],
) -> None:
    public, _ = site
    soup = soup_of(public / "reading" / "index.html")
    for section in soup.select("section.judge"):
        figures = section.select("dl.figures > div")
        assert figures
        for figure in figures:
            name = figure.dt.get_text(strip=True)
            explain = figure.select_one("dd.explain")
            assert explain is not None and len(explain.get_text(strip=True)) > 20, name
        consistency = next(f for f in figures if f.dt.get_text() == "Consistency")
        assert "how sharply the judge orders the models" in consistency.get_text()
        cycles = next(f for f in figures if f.dt.get_text() == "Cycles")
        # 1 of 20 is 5%, not "5.0%": a count that small justifies no decimal.
        assert cycles.dd.get_text() == "1 of 20 decided triples (5%)"
    columns = soup.select_one("p.explain-table")
    assert columns is not None
    for column in ("Win rate vs field", "Rating", "Comparisons"):
        assert f"{column}:" in columns.get_text()


def test_task_page_marks_failed_and_cut_off_answers(site: tuple[Path, Results]) -> None:
    public, results = site
    task = results.tasks[0]
    soup = soup_of(public / "reading" / "tasks" / task.id / "index.html")
    failed, cut = task.answers[1], task.answers[2]
    card = soup.select_one(f"article.answer#{anchor('answer', failed.model)}")
    assert card is not None and "failed" in card["class"]
    assert "failed: no answer (timeout after 60 s)" in card.get_text()
    assert "No answer." in card.get_text()
    card = soup.select_one(f"article.answer#{anchor('answer', cut.model)}")
    assert card is not None and "cut-off" in card["class"]
    assert "cut off at the output token cap" in card.get_text()
    fine = soup.select_one(f"article.answer#{anchor('answer', task.answers[0].model)}")
    assert fine is not None and not {"failed", "cut-off"} & set(fine["class"])
    # The same marks in the side-by-side view of the pair.
    pair = soup.select_one(f"section.pair#{pair_anchor(*sorted((failed.model, cut.model)))}")
    assert pair is not None
    states = {a.h5.get_text(): a["class"] for a in pair.select("article.pair-answer")}
    assert "failed" in states[failed.model] and "cut-off" in states[cut.model]


def test_task_page_shows_the_tests_and_each_answers_check_results(
    site: tuple[Path, Results],
) -> None:
    public, results = site
    task = results.tasks[0]
    soup = soup_of(public / "reading" / "tasks" / task.id / "index.html")
    tests = soup.select_one("details.task-tests pre.tests")
    assert tests is not None and tests.get_text() == TESTS
    for answer in task.answers:
        card = soup.select_one(f"article.answer#{anchor('answer', answer.model)}")
        assert card is not None
        badges = [b.get_text() for b in card.select(".state .badge")]
        for check in answer.checks:
            assert f"{check.check} {'✓' if check.passed else '✗'}" in badges, answer.model
            if not check.passed:
                assert f"{check.check} failed: {check.reason}" in card.get_text()


def test_every_verdict_card_links_the_two_answers_it_judged(site: tuple[Path, Results]) -> None:
    public, results = site
    task = results.tasks[0]
    soup = soup_of(public / "reading" / "tasks" / task.id / "index.html")
    ids = {tag["id"] for tag in soup.find_all(id=True)}
    cards = soup.select("article.comparison")
    assert len(cards) == len(task.comparisons)
    for card, comparison in zip(cards, task.comparisons, strict=True):
        links = [str(a["href"]) for a in card.select("p.judged a")]
        assert links == [
            f"#{anchor('answer', comparison.model_a)}",
            f"#{anchor('answer', comparison.model_b)}",
            f"#{pair_anchor(comparison.model_a, comparison.model_b)}",
        ]
        assert all(link[1:] in ids for link in links)
        # The pair view holds exactly the two answers the card judged.
        pair = soup.select_one(links[2])
        assert isinstance(pair, Tag)
        shown = [a.h5.get_text() for a in pair.select("article.pair-answer")]
        assert shown == [comparison.model_a, comparison.model_b]


def test_a_pair_names_each_persons_label_once(site: tuple[Path, Results]) -> None:
    public, results = site
    task = results.tasks[0]
    soup = soup_of(public / "reading" / "tasks" / task.id / "index.html")
    failed, cut = task.answers[1], task.answers[2]
    pair = soup.select_one(f"section.pair#{pair_anchor(*sorted((failed.model, cut.model)))}")
    assert pair is not None
    assert len(pair.select("ul.pair-verdicts li")) == len(results.judges)
    labels = pair.select_one("p.pair-labels")
    assert labels is not None and labels.get_text() == f"People: ana chose {cut.model}."


def test_the_tasks_index_counts_a_label_once(site: tuple[Path, Results]) -> None:
    public, results = site
    rows = soup_of(public / "reading" / "tasks" / "index.html").select("table.tasks tbody tr")
    labels = {row.a.get_text(): row.select("td")[-1].get_text() for row in rows}
    # Task 1: ana labelled the first two models' pair (set against the first judge only) and
    # the failed and cut-off answers' pair (set against both judges): two labels, not three.
    assert labels[results.tasks[0].id] == "2"


MARKDOWN_PROMPT = (
    "Write `def total(xs: list[int]) -> int` returning the **sum** of [the items](https://x.org)"
    " <b>now</b>\nand nothing else.\n\n```python\nassert total([]) == 0\n```\n"
)


@pytest.fixture(scope="module")
def three_judges(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Results]]:
    """Three judges, the first two calibrated, the second closer to people than the first."""
    root = tmp_path_factory.mktemp("folds")
    results = make_results(
        "folds",
        n_tasks=2,
        judges=("judge/first", "judge/second", "judge/third"),
        calibrated=[True, True, False],
    )
    results.judge_blocks[1].calibration.agreement = Proportion(
        k=54, n=60, rate=0.9, low=0.8, high=0.95
    )
    results.tasks[0].prompt = MARKDOWN_PROMPT
    write_project(root, [results])
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        build_site(Path("public"), offline=True, runs_file=Path("runs.json"))
    yield root / "public", results


def test_leaderboard_shows_the_first_judge_and_folds_each_other_under_one_line(
    three_judges: tuple[Path, Results],
) -> None:
    public, results = three_judges
    soup = soup_of(public / "folds" / "index.html")
    sections = soup.select("section.judge")
    assert [s["id"] for s in sections] == ["judge-1", "judge-2", "judge-3"]
    # The first judge's section is shown in full, outside any fold.
    assert sections[0].find_parent("details") is None
    lead = soup.select_one("p.lead-judge")
    assert lead is not None
    text = lead.get_text(" ", strip=True)
    assert "judge/first , the run's first judge" in text
    assert "Closest to people by point estimate: judge/second , 90% (80% to 95%)" in text
    # Each other judge: a closed fold whose one line names the judge, its agreement with
    # people (interval included) or "uncalibrated", its flip rate and the model ahead.
    for section, block in zip(sections[1:], results.judge_blocks[1:], strict=True):
        fold = section.find_parent("details")
        assert fold is not None and "judge-fold" in fold["class"] and not fold.has_attr("open")
        line = fold.summary.get_text(" ", strip=True)
        assert line.startswith(block.judge)
        flips = block.diagnostics.flip_rate.rate
        assert flips is not None and f"order flips: {100 * flips:.0f}%" in line
        top = block.ratings[0]
        ranks = (
            f"{top.rank_best}–{top.rank_worst}" if top.rank_best != top.rank_worst else top.rank
        )
        assert f"first: {top.model} (rank {ranks})" in line
        # Nothing is hidden from the page's text: the whole ranking is inside the fold.
        assert len(section.select("table.leaderboard tbody tr")) == len(block.ratings)
    second, third = (s.find_parent("details").summary.get_text() for s in sections[1:])
    assert "people: 90% (80% to 95%) ·" in second
    assert "people: uncalibrated ·" in third



def test_the_tasks_index_shows_a_prompt_as_text_with_its_code_as_code(
    three_judges: tuple[Path, Results],
) -> None:
    public, _ = three_judges
    rows = soup_of(public / "folds" / "tasks" / "index.html").select("table.tasks tbody tr")
    cell = rows[0].select_one("td.prompt")
    assert cell is not None
    assert cell.get_text() == (
        "Write def total(xs: list[int]) -> int returning the sum of the items <b>now</b> and"
        " nothing else."
    )
    assert [code.get_text() for code in cell.select("code")] == ["def total(xs: list[int]) -> int"]
    assert "`" not in cell.get_text() and "**" not in cell.get_text()
    assert cell.select("b, a, strong") == [], "the prompt's markup is text, its links are gone"


@pytest.mark.parametrize(
    ("prompt", "html"),
    [
        ("A plain prompt.", "A plain prompt."),
        ("# Heading `x`\n\nbody", "Heading <code>x</code>"),
        ("- item with *stars* and snake_case\n- two", "item with stars and snake_case"),
        ("Write this:\n\n    def f(a: int) -> int\n", "Write this: <code>def f(a: int) -&gt; int</code>"),
        ("```\nonly(code)\n```", "<code>only(code)</code>"),
        (
            "<script>alert(1)</script> [x](javascript:alert(1))",
            "&lt;script&gt;alert(1)&lt;/script&gt; [x](javascript:alert(1))",
        ),
        ("", ""),
    ],
)
def test_summary_line(prompt: str, html: str) -> None:
    assert str(summary_line(prompt)) == html


@pytest.mark.parametrize(
    ("prompt", "html"),
    [
        ("one two three four", "one two three…"),
        ("one two threefour", "one two…"),
        ("item with *stars* and more", "item with…"),
        ("`abcdefghijklmnop` tail", "<code>abcdefghijklm</code>…"),
        ("abcdefghijklmnopq", "abcdefghijklm…"),
    ],
)
def test_summary_line_cuts_at_a_word(prompt: str, html: str) -> None:
    assert str(summary_line(prompt, limit=13)) == html
