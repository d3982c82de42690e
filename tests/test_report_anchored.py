"""The human-anchored ranking in the results file: on hand-built runs and on MT-Bench's
published expert votes (GPT-4's verdicts with half the votes, held against all of them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED
from evidence_factory import add_answers, add_verdict, write_runs, write_suite

from konkord.configuration.runspec import resolve_run
from konkord.evidence.log import EvidenceLog
from konkord.stages.label.design import inclusion_probabilities
from konkord.stages.label.labels import current_labels, record_label
from konkord.stages.label.sample import Comparison, label_queue, pool_for_run
from konkord.stages.report.report import ReportOptions, build_results

FAST = ReportOptions(resamples=200, seed=1)
MODELS = ["m/a", "m/b", "m/c"]
DATA = SHARED / "data" / "mtbench_human_judgments"


def _run_with_a_judge_that_favours_c(root: Path, n_tasks: int = 24) -> dict:
    """People prefer a > b > c on every task; the judge puts c first everywhere."""
    suite = write_suite(root, n_tasks)
    write_runs(root, [{"name": "r", "suite": "suites/tiny.yaml", "models": MODELS,
                       "judges": ["judge/j1"],
                       "label_plan": {"n": 60, "seed": 3}}])
    texts = add_answers(root, "r", suite, MODELS)
    for k in range(n_tasks):
        task = f"t{k:02d}"
        add_verdict(root, "r", texts, task, "m/a", "m/b", ("1", "2"))  # a over b
        add_verdict(root, "r", texts, task, "m/a", "m/c", ("2", "1"))  # c over a
        add_verdict(root, "r", texts, task, "m/b", "m/c", ("2", "1"))  # c over b
    return texts


def _label_queue(root: Path, n: int, labeller: str = "ana", seed: int = 3) -> list[Comparison]:
    """Label the first n items of the queue the way people see the truth: a > b > c."""
    spec = resolve_run("r")
    log = EvidenceLog(spec.run_dir)
    pool = pool_for_run(spec, log)
    queue = label_queue(pool, current_labels(log), labeller, seed, n)
    inclusion = inclusion_probabilities(pool, n)
    for item in queue.items:
        c = item.comparison
        record_label(log, c, min(c.model_a, c.model_b), labeller, item.shown_first,
                     inclusion_probability=inclusion[c], sample_seed=seed)
    return [item.comparison for item in queue.items]


def test_labels_correct_a_judge_that_puts_the_worst_model_first(project: Path) -> None:
    _run_with_a_judge_that_favours_c(project)
    _label_queue(project, 45)
    block = build_results(resolve_run("r"), FAST).judge_blocks[0]
    assert [r.model for r in block.ratings] == ["m/c", "m/a", "m/b"]
    anchored = block.anchored
    assert anchored is not None and anchored.status == "anchored"
    assert anchored.labels == 45 and anchored.judged == 72
    assert anchored.design == "recorded"
    assert anchored.selected_not_labelled == 0
    # The judge disagrees with every label about c, so power tuning leans on the labels.
    assert anchored.lam is not None and anchored.lam < 0.5
    assert [r.model for r in anchored.ratings] == ["m/a", "m/b", "m/c"]
    assert any("m/c above m/a" in text and "anchored to people, m/a is above" in text
               for text in anchored.disagreements)
    assert anchored.ratings[0].rank_best == 1
    assert anchored.ratings[-1].rank_worst == 3


def test_the_report_prints_the_share_of_clipped_resamples(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from konkord.stages.report.report_print import print_report

    _run_with_a_judge_that_favours_c(project)
    _label_queue(project, 45)
    results = build_results(resolve_run("r"), FAST)
    anchored = results.judge_blocks[0].anchored
    assert anchored is not None and anchored.resamples == 200
    print_report(results)
    out = capsys.readouterr().out
    share = f"{anchored.clipped_resamples / 200:.1%}"
    assert f"clipped resamples: {anchored.clipped_resamples} of 200 ({share})" in " ".join(
        out.split()
    )


def test_a_skipped_item_is_counted_and_recorded_probabilities_are_those_of_the_queue(
    project: Path,
) -> None:
    _run_with_a_judge_that_favours_c(project)
    labelled = _label_queue(project, 40)
    spec = resolve_run("r")
    log = EvidenceLog(spec.run_dir)
    pool = pool_for_run(spec, log)
    expected = inclusion_probabilities(pool, 40)
    for record in current_labels(log).values():
        c = Comparison(record["task_id"], record["model_a"], record["model_b"])
        assert record["inclusion_probability"] == pytest.approx(expected[c])
        assert record["sample_seed"] == 3
    # Withdraw one label in the middle of the queue: it was drawn, and nobody labelled it.
    from konkord.stages.label.labels import withdraw_label

    withdraw_label(log, labelled[5], "ana")
    anchored = build_results(spec, FAST).judge_blocks[0].anchored
    assert anchored is not None
    assert anchored.labels == 39 and anchored.selected_not_labelled == 1


def test_too_few_labels_say_how_many_are_needed(project: Path) -> None:
    _run_with_a_judge_that_favours_c(project)
    _label_queue(project, 10)
    anchored = build_results(resolve_run("r"), FAST).judge_blocks[0].anchored
    assert anchored is not None and anchored.status == "too_few_labels"
    assert anchored.labels == 10 and "at least 30" in anchored.summary
    assert anchored.ratings == []


def test_without_labels_there_is_no_anchored_ranking(project: Path) -> None:
    _run_with_a_judge_that_favours_c(project)
    assert build_results(resolve_run("r"), FAST).judge_blocks[0].anchored is None


@pytest.mark.skipif(not (DATA / "human.jsonl").exists(), reason="MT-Bench data absent")
def test_mt_bench_gpt4_with_half_the_expert_votes_holds_the_all_expert_ranking(
    project: Path,
) -> None:
    from konkord.importers.mtbench import import_mtbench

    import_mtbench([DATA / "human.jsonl", DATA / "gpt4_pair.jsonl"], run="mtb")
    block = build_results(resolve_run("mtb"), ReportOptions(resamples=300, seed=0)).block(
        "gpt4_pair"
    )
    anchored = block.anchored
    assert anchored is not None and anchored.design == "assumed_random"
    holdout = anchored.holdout
    assert holdout is not None and holdout.labels_used == anchored.labels // 2
    assert sum(row.anchored_covers for row in holdout.rows) >= 5
    assert sum(row.judge_covers for row in holdout.rows) <= 2
    # GPT-4 separates claude-v1 from gpt-3.5-turbo; the experts' votes do not.
    assert any("claude-v1 above gpt-3.5-turbo" in text for text in anchored.disagreements)


def test_the_leaderboard_shows_the_anchored_ranking_beside_the_judges(project: Path) -> None:
    import shutil

    from bs4 import BeautifulSoup

    from konkord.results.schema import write_results
    from konkord.stages.build.build import build_site

    _run_with_a_judge_that_favours_c(project)
    _label_queue(project, 45)
    write_results(build_results(resolve_run("r"), FAST), project / "results" / "r.json")
    repo = Path(__file__).resolve().parent.parent
    for folder in ("templates", "content"):
        shutil.copytree(repo / folder, project / folder)
    build_site(Path("public"), offline=True, runs_file=Path("runs.json"))
    soup = BeautifulSoup((project / "public" / "r" / "index.html").read_text(), "html.parser")
    section = soup.select_one("section.anchored")
    assert section is not None
    text = section.get_text(" ", strip=True)
    assert "45 labelled by people" in text
    assert "anchored to people, m/a is above m/c" in text
    svg = section.select_one("svg.anchored")
    assert svg is not None
    assert len(svg.select("line.interval.judge-only")) == 3
    assert len(svg.select("line.interval.people")) == 3
    rows = section.select("table.anchored-table tbody tr")
    assert [r.select_one("td.model").get_text() for r in rows] == ["m/a", "m/b", "m/c"]
