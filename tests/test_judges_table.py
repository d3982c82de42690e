"""The judge table on real evidence: the demo's five simulated judges (committed verdicts made by
the `sim-judge` provider through litellm), and the imported MT-Bench human judgments."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO, SHARED

from konkord.cli import cli
from konkord.configuration.runspec import resolve_run
from konkord.results.judges_table import judge_table, split_text
from konkord.results.schema import Results, read_results, write_results
from konkord.sim import judge_params
from konkord.sim.judge import judge_decision
from konkord.sim.reading import Reading
from konkord.stages.report.judges_print import format_judge_table
from konkord.stages.report.report import ReportOptions, build_results

DEMO = "demo-python-codegen"
MTBENCH = SHARED / "data" / "mtbench_human_judgments"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Results:
    root = tmp_path_factory.mktemp("demo")
    for folder in ("suites", f"runs/{DEMO}"):
        shutil.copytree(REPO / folder, root / folder)
    shutil.copy(REPO / "runs.json", root / "runs.json")
    old = Path.cwd()
    import os

    os.chdir(root)
    try:
        return build_results(resolve_run(DEMO), ReportOptions(resamples=300))
    finally:
        os.chdir(old)


def accuracy(judge: str) -> float:
    return judge_params(judge).accuracy


def test_the_table_orders_the_simulated_judges_by_their_true_accuracy(demo: Results) -> None:
    table = judge_table(demo)
    assert len(table.rows) == 5 and table.sorted_by == "agreement with people"
    truth = [accuracy(row.judge) for row in table.rows]
    assert truth == sorted(truth, reverse=True)
    assert truth[0] > truth[1] > truth[2] and truth[-1] == 0.0  # careful, referee, ..., blind


def test_the_blind_judge_is_the_most_consistent_and_the_least_in_consensus(demo: Results) -> None:
    table = judge_table(demo)
    rows = {row.judge: row for row in table.rows}
    blind = rows["sim-judge/blind"]
    others = [row for row in table.rows if row is not blind]
    assert blind.consistency and blind.consensus
    assert all(
        blind.consistency.estimate > (r.consistency.estimate or 1) for r in others if r.consistency
    )
    assert all(
        blind.consensus.estimate < (r.consensus.estimate or 0) for r in others if r.consensus
    )
    assert blind.flip_rate.k == 0  # consistent in both orders


def test_the_length_biased_judge_shows_its_preference(demo: Results) -> None:
    table = judge_table(demo)
    rows = {row.judge: row for row in table.rows}
    verbose = rows["sim-judge/verbose:accuracy=0.5,length_bias=0.9"].longer
    assert verbose is not None and verbose.low is not None and verbose.rate is not None
    assert verbose.low > 0.5
    assert table.people_longer is not None and table.people_longer.high is not None
    assert verbose.low > table.people_longer.high  # people show no such preference
    assert all(
        r.longer.rate < verbose.rate
        for r in rows.values()
        if r.longer
        and r.longer.rate
        and r.judge != "sim-judge/verbose:accuracy=0.5,length_bias=0.9"
    )


def test_the_position_biased_judge_shows_its_split(demo: Results) -> None:
    rows = {row.judge: row for row in judge_table(demo).rows}
    lefty = rows["sim-judge/lefty:accuracy=0.5,position_bias=0.95,tie_rate=0"]
    assert split_text(lefty.first_shown) == "75/25"
    assert lefty.flip_rate.rate == max(r.flip_rate.rate or 0 for r in rows.values())


def test_the_table_reads_people_and_tests_from_the_calibration_blocks(demo: Results) -> None:
    table = judge_table(demo)
    for row in table.rows:
        block = demo.block(row.judge)
        assert row.people == block.calibration.agreement
        assert row.kappa == block.calibration.kappa
        judge_side = block.calibration.objective["judge"]["overall"]  # type: ignore[index]
        assert row.tests is not None and (row.tests.k, row.tests.n) == (
            judge_side["picks_passing"],
            judge_side["n"],
        )
    assert table.people is not None and table.people.shared_items == 80


def test_the_panel_ranking_pools_every_judge(demo: Results) -> None:
    panel = demo.judge_panel
    assert panel is not None and panel.bootstrap is not None
    assert panel.bootstrap.resamples == 300
    pooled = sum(r.comparisons for r in panel.panel_ratings) // 2
    per_judge = sum(sum(r.comparisons for r in b.ratings) // 2 for b in demo.judge_blocks)
    assert pooled == per_judge  # every judge's combined verdicts, once each
    assert panel.panel_ratings[0].model == "sim/atlas:strength=2.2"


def test_the_blind_sim_judge_answers_the_same_in_both_orders() -> None:
    params = judge_params("sim-judge/blind")
    readings = (Reading(0, "fine"), Reading(3, "bad"))
    rng = random.Random(0)
    one = judge_decision(params, readings, (10, 20), rng, fixed="1")[0]
    two = judge_decision(params, readings[::-1], (20, 10), rng, fixed="2")[0]
    assert (one, two) == ("1", "2")  # the same answer, wherever it is shown, whatever its defects


def test_judges_command_prints_a_table_that_fits_a_terminal(demo: Results, project: Path) -> None:
    write_results(demo, Path("results") / f"{DEMO}.json")
    for folder in ("suites", f"runs/{DEMO}"):
        shutil.copytree(REPO / folder, project / folder)
    shutil.copy(REPO / "runs.json", project / "runs.json")
    out = CliRunner().invoke(cli, ["judges", "--run", DEMO])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    table = [line for line in lines if line.startswith("J") and line[1].isdigit()]
    assert len(table) >= 10 and all(len(line) <= 100 for line in table)
    assert "people vs people: 76% agreement" in out.output


def test_judges_command_on_an_older_results_file_computes_it(demo: Results, project: Path) -> None:
    for folder in ("suites", f"runs/{DEMO}"):
        shutil.copytree(REPO / folder, project / folder)
    shutil.copy(REPO / "runs.json", project / "runs.json")
    write_results(demo.model_copy(update={"judge_panel": None}), Path("results") / f"{DEMO}.json")
    out = CliRunner().invoke(cli, ["judges", "--run", DEMO])
    assert out.exit_code == 0, out.output
    assert f"an older results/{DEMO}.json: computing it first" in out.output
    assert read_results(Path("results") / f"{DEMO}.json").judge_panel is not None


def test_two_judges_say_they_need_a_third(demo: Results) -> None:
    two = demo.model_copy(update={"judge_blocks": demo.judge_blocks[:2]})
    table = judge_table(two)
    assert table.consensus_note == (
        "Consensus match needs 3 judges or more: this run has 2, so it needs a third."
    )
    text = "\n".join(format_judge_table(DEMO, table))
    assert "needs a third" in text


@pytest.mark.skipif(not (MTBENCH / "human.jsonl").exists(), reason="shared MT-Bench data absent")
def test_mtbench_table_reads_gpt4_against_experts_and_experts_against_each_other(
    project: Path,
) -> None:
    runner = CliRunner()
    files = [str(MTBENCH / "human.jsonl"), str(MTBENCH / "gpt4_pair.jsonl")]
    assert runner.invoke(cli, ["import", "mt-bench-human", *files, "--run", "mtb"]).exit_code == 0
    out = runner.invoke(cli, ["report", "--run", "mtb", "--resamples", "50"])
    assert out.exit_code == 0, out.output
    table = judge_table(read_results("results/mtb.json"))
    (row,) = table.rows
    assert row.judge == "gpt4_pair"
    assert table.people is not None
    # Zheng et al. 2023, Table 5 (setup S1, both turns): GPT-4 pair vs experts 66% of
    # 1343 + 1325 comparisons; experts vs each other 63% and 67% of 721 + 707.
    assert row.people is not None and row.people.n == 1343 + 1325
    assert round(100 * (row.people.rate or 0)) == 66
    assert table.people.agreement.n == 721 + 707
    assert round(100 * (table.people.agreement.rate or 0)) == 65
    assert row.consensus is None and table.consensus_note is not None
    out = runner.invoke(cli, ["judges", "--run", "mtb"])
    assert out.exit_code == 0, out.output
    assert "people vs people: 65% agreement" in out.output
    assert "turn 1: J1 vs people 66% (1343); people vs people 63% (721)" in out.output
    assert "turn 2: J1 vs people 66% (1325); people vs people 67% (707)" in out.output
    assert json.loads(Path("results/mtb.json").read_text())["judge_panel"]["standings"]


def test_rank_picture_escapes_model_names() -> None:
    from bs4 import BeautifulSoup

    from konkord.site.judges_page import rank_by_judge

    hostile = '<script>alert(1)</script>"onload="x'
    svg = str(
        rank_by_judge(
            [hostile, "b"], [("panel", {hostile: 1, "b": 2}), ("J1", {hostile: 2, "b": 1})], "t"
        )
    )
    soup = BeautifulSoup(svg, "html.parser")
    assert soup.find("script") is None
    assert all(not k.startswith("on") for tag in soup.find_all(True) for k in tag.attrs)
    assert len(soup.find_all("polyline")) == 2
    assert hostile[:20] in soup.get_text()  # shown as text, shortened


def test_a_cascade_row_says_it_is_a_cascade() -> None:
    """The support demo ranks its strong judge on the cascade's verdicts: the table says so."""
    from konkord.results.judges_table import judge_table
    from konkord.results.schema import read_results
    from konkord.stages.report.judges_print import format_judge_table

    repo = Path(__file__).resolve().parent.parent
    table = judge_table(read_results(repo / "results" / "demo-support-replies.json"))
    cascades = [row for row in table.rows if row.cascade_first_pass]
    assert [row.cascade_first_pass for row in cascades] == ["sim-judge/quick"]
    lines = format_judge_table("demo-support-replies", table)
    assert any("a cascade: first pass sim-judge/quick" in line for line in lines)
    assert max(len(line) for line in lines if "cascade" in line) <= 100
