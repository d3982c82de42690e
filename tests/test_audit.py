"""Figures an outside statistician recomputes with other tools: each test here pins a defect
such a recomputation found (record orientation, impossible bounds, rank displays), against an
independent reference (scipy, the raw records)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import REPO
from scipy.stats import binomtest

from konkord.configuration.runspec import resolve_run
from konkord.results.judges_table import judge_table
from konkord.results.schema import read_results
from konkord.stages.report.report import ReportOptions, build_results
from konkord.stats import wilson_interval

FAST = ReportOptions(resamples=200, seed=1)


def _copy_demo(root: Path, run: str) -> None:
    """One demo run (runs.json entry, suite, evidence) copied into a scratch project."""
    config = json.loads((REPO / "runs.json").read_text())
    entry = next(r for r in config["runs"] if r["name"] == run)
    (root / "runs.json").write_text(json.dumps({"runs": [entry]}))
    (root / "suites").mkdir()
    shutil.copy(REPO / entry["suite"], root / entry["suite"])
    shutil.copytree(REPO / "runs" / run, root / "runs" / run)


def test_a_label_written_with_its_pair_the_other_way_round_counts_the_same(
    project: Path,
) -> None:
    """Swapping model_a and model_b in every label (the winner, a name, unchanged) says the
    same thing; calibration already read it so, while the anchored ranking, the cascade's
    selective table and the task pages silently dropped every such label."""
    _copy_demo(project, "demo-support-replies")
    before = build_results(resolve_run("demo-support-replies"), FAST).model_dump()
    path = project / "runs" / "demo-support-replies" / "labels.jsonl"
    swapped = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        rec["model_a"], rec["model_b"] = rec["model_b"], rec["model_a"]
        swapped.append(json.dumps(rec))
    path.write_text("\n".join(swapped) + "\n")
    after = build_results(resolve_run("demo-support-replies"), FAST).model_dump()
    before.pop("inputs_digest"), after.pop("inputs_digest")
    anchored = after["judge_blocks"][0]["anchored"]
    assert anchored["status"] == "anchored" and anchored["labels"] == 60
    assert after["judge_blocks"][0]["cascade"]["labels"] > 0
    assert after == before


@pytest.mark.parametrize("n", [1, 3, 5, 7, 10, 29, 49, 75, 100, 290, 1000])
def test_wilson_bounds_never_leave_0_to_1_and_match_scipy(n: int) -> None:
    """At k = n the upper bound was 1.0000000000000002 in the results file: an impossible
    bound that a script checking 0 <= high <= 1 rejects."""
    for k in sorted({0, 1, n // 2, n - 1, n}):
        low, high = wilson_interval(k, n)
        ref = binomtest(k, n).proportion_ci(method="wilson")
        assert 0.0 <= low <= k / n <= high <= 1.0
        assert (low, high) == pytest.approx((ref.low, ref.high), abs=1e-12)
    assert wilson_interval(n, n)[1] == 1.0 and wilson_interval(0, n)[0] == 0.0


def test_the_panel_rank_column_orders_no_pair_the_data_does_not_separate() -> None:
    """The Judges page and `konkord judges` printed the panel's best rank alone ("1, 1, 1, 2,
    2"): read as ranks, that puts birch above ember, which no interval supports (birch's
    range is 1-5). Every displayed rank must be the range."""
    import re

    from konkord.site.environment import make_environment
    from konkord.site.render import plan_run_pages, render_page
    from konkord.stages.report.judges_print import format_ranks

    results = read_results(REPO / "results" / "demo-python-codegen.json")
    panel = results.judge_panel
    assert panel is not None
    shown = {r.model: (r.rank_best, r.rank_worst) for r in panel.panel_ratings}
    assert any(best != worst for best, worst in shown.values())  # the case that matters
    plan = next(
        p for p in plan_run_pages(results, {}) if p.path.endswith("/judges/index.html")
    )
    page = render_page(make_environment(REPO / "templates"), plan).decode()
    table = page[page.index('class="panel-ranking') :]
    for model, (best, worst) in shown.items():
        cell = re.search(
            r'<td class="rank">([^<]*)</td><td class="model">' + re.escape(model) + "<", table
        )
        assert cell is not None, model
        assert cell.group(1) == (str(best) if best == worst else f"{best}–{worst}")
    lines = format_ranks(judge_table(results))
    for model, (best, worst) in shown.items():
        line = next(x for x in lines if x.strip().startswith(model))
        assert line.split()[1] == (str(best) if best == worst else f"{best}-{worst}")
