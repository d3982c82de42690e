"""Few tasks never give certainty, and the figures everything rests on are pinned by hand.

Unanimous fields of 1, 3, 5 and 8 tasks (the task bootstrap has nothing to resample there),
a model that wins every comparison, a model with no comparisons, disconnected resamples,
tasks-needed, and the tests a mutation audit found missing (stale second answers, the
expansion factor of the interval, validators, the full Markdown path).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from evidence_factory import add_answers, add_verdict, write_runs, write_suite

from konkord.configuration.runspec import resolve_run
from konkord.evidence.log import EvidenceLog, now_iso
from konkord.results.schema import write_results
from konkord.site.markdown import render_markdown
from konkord.stages.calibrate.calibrate_run import calibrate_run
from konkord.stages.report.report import ReportOptions, build_results
from konkord.stats import bootstrap, comparisons, verdicts, wilson_interval
from konkord.stats.floors import sign_tests
from konkord.stats.planning import tasks_to_separate
from konkord.stats.ranking import rank
from konkord.stats.ranking_text import about_tasks
from konkord.stats.resample import bootstrap_interval, critical_value

FAST = ReportOptions(resamples=200, seed=1)
MODELS = ["m/a", "m/b", "m/c"]


def unanimous_run(root: Path, n_tasks: int, models: list[str] = MODELS) -> dict[Any, str]:
    """Every task says the same: each model beats every model listed after it."""
    suite = write_suite(root, n_tasks)
    write_runs(root, [{"name": "r", "suite": "suites/tiny.yaml", "models": models}])
    texts = add_answers(root, "r", suite, models)
    for k in range(n_tasks):
        for x, a in enumerate(models):
            for b in models[x + 1 :]:
                add_verdict(root, "r", texts, f"t{k:02d}", a, b, ("1", "2"))
    return texts


def intervals_in(data: Any, path: str = "") -> list[tuple[str, float, float]]:
    """Every (where, low, high) of the results file with both bounds set."""
    found = []
    if isinstance(data, dict):
        if data.get("low") is not None and data.get("high") is not None:
            found.append((path, data["low"], data["high"]))
        for key, value in data.items():
            found += intervals_in(value, f"{path}.{key}")
    elif isinstance(data, list):
        for k, value in enumerate(data):
            found += intervals_in(value, f"{path}[{k}]")
    return found


@pytest.mark.parametrize("n_tasks", [1, 3, 5, 8])
def test_unanimous_fields_never_give_certainty(project: Path, n_tasks: int) -> None:
    unanimous_run(project, n_tasks)
    results = build_results(resolve_run("r"), FAST)
    data = results.model_dump(mode="json")
    found = intervals_in(data)
    assert len(found) > 20
    # judge_panel (the judge table's section) holds task means of per-task fitted figures,
    # which no raw count bounds; every figure of the ranking and calibration is checked
    zero = [
        (where, low)
        for where, low, high in found
        if not high > low and not where.startswith(".judge_panel")
    ]
    assert zero == []
    block = results.judge_blocks[0]
    above = [c for c in block.claims if c.kind == "above"]
    ranges = [(r.rank_best, r.rank_worst) for r in block.ratings]
    if n_tasks < 6:  # a two-sided sign test over 5 unanimous tasks gives p = 0.0625
        assert above == []
        assert ranges == [(1, 3)] * 3
        assert all(not p.separated for p in block.pairwise)
        assert any("sign test" in c.text or "contains 0" in c.text for c in block.claims)
    else:  # 8 unanimous tasks: p = 2 / 2**8
        assert above and above[0].models[0] == "m/a"
        assert block.ratings[0].rank_best == 1
        assert all(p.sign_test_p == pytest.approx(2 / 256) for p in block.pairwise)


def test_a_model_that_wins_all_75_comparisons_reaches_the_wilson_bound(project: Path) -> None:
    unanimous_run(project, 25, ["m/a", "m/b", "m/c", "m/d"])
    top = build_results(resolve_run("r"), FAST).judge_blocks[0].ratings[0]
    assert (top.model, top.comparisons) == ("m/a", 75)
    low, high = wilson_interval(75, 75)
    raw, ewr = top.raw_win_rate, top.win_rate_vs_field
    assert (raw.low, raw.high) == pytest.approx((low, high))  # 95.1% to 100%, not a point
    # the expected win rate (never 100% under Bradley-Terry) reaches below the Wilson bound:
    # its Wald interval, mapped from the fit's log-strength, is 93.8% to 99.9%
    assert ewr.low <= low and ewr.high > ewr.estimate > ewr.low
    assert ewr.high - ewr.low > 0.05


def test_a_model_with_no_comparisons_gets_no_interval(project: Path) -> None:
    suite = write_suite(project, 6)
    models = ["m/a", "m/b", "m/c"]
    write_runs(project, [{"name": "r", "suite": "suites/tiny.yaml", "models": models}])
    texts = add_answers(project, "r", suite, models)
    for k in range(6):
        add_verdict(
            project, "r", texts, f"t{k:02d}", "m/a", "m/b", ("1", "2") if k % 3 else ("2", "1")
        )
    block = build_results(resolve_run("r"), FAST).judge_blocks[0]
    silent = next(r for r in block.ratings if r.model == "m/c")
    assert silent.comparisons == 0
    assert silent.win_rate_vs_field.estimate is None and silent.win_rate_vs_field.low is None
    assert silent.rank_best is None and block.ratings[-1].model == "m/c"
    assert [r.rank_worst for r in block.ratings[:2]] == [2, 2]
    assert all("m/c" not in (p.model_i, p.model_j) for p in block.pairwise)
    assert block.p_above_matrix[2] == [None, None, None]


def test_disconnected_resamples_are_counted_and_fits_reported(project: Path) -> None:
    # two tasks, one comparing a-b, the other b-c: a resample drawing one task twice splits
    comp = comparisons([0, 1], [0, 1], [1, 2], [1.0, 1.0], n_models=3, n_tasks=2)
    boot = bootstrap(comp, n_resamples=400, seed=0)
    assert 0.4 * 400 < boot.n_disconnected < 0.6 * 400
    connected = comparisons([0, 1], [0, 0], [1, 1], [1.0, 0.0], n_models=2, n_tasks=2)
    assert bootstrap(connected, n_resamples=100, seed=0).n_disconnected == 0
    unanimous_run(project, 4)
    info = build_results(resolve_run("r"), FAST).judge_blocks[0].bootstrap
    assert info.fits == 200 + 4 and 0 < info.converged <= info.fits
    assert info.disconnected_resamples == 0 and "prior" in (info.disconnected_handling or "")


def test_sign_tests_by_hand() -> None:
    # model 0 beats 1 on 5 tasks and loses on 1; ties on a 7th task are dropped
    task = [0, 1, 2, 3, 4, 5, 6]
    comp = comparisons(task, [0] * 7, [1] * 7, [1, 1, 1, 1, 1, 0, 0.5], n_models=2, n_tasks=7)
    tests = sign_tests(comp)
    assert (tests.higher[0, 1], tests.lower[0, 1]) == (5, 1)
    assert tests.p_value[0, 1] == pytest.approx(2 * (1 + 6) / 64)  # P(X <= 1 | n=6) doubled
    five = comparisons(range(5), [0] * 5, [1] * 5, [1.0] * 5, n_models=2, n_tasks=5)
    assert sign_tests(five).p_value[0, 1] == pytest.approx(0.0625)
    assert not rank(bootstrap(five, n_resamples=100, seed=0), five).claims


def test_under_a_sparse_design_the_sign_test_allows_for_who_met_whom() -> None:
    """a and b are equally strong, but on every task a met the strong model S and b the weak
    W (and a and b met each other, each winning half). Per-task means would set b above a on
    10 tasks to 2 (p = 0.039, a claim); allowing for the opponents each met, it is 10 to 10.
    When every pair meets on every task, the allowance changes nothing."""
    strong, a, b, weak = 0, 1, 2, 3
    a_won, b_lost, weak_won = {0, 1, 4, 8, 12, 16}, {2, 3, 6, 10, 14, 18}, {5, 9, 13}
    task, i, j, score = [], [], [], []
    for t in range(20):
        task += [t] * 4
        i += [a, b, strong, a]
        j += [strong, weak, weak, b]
        score += [float(t in a_won), float(t not in b_lost), float(t not in weak_won), t % 2]
    comp = comparisons(task, i, j, score, n_models=4, n_tasks=20)
    beta = bootstrap(comp, n_resamples=100, seed=0).point.log_strength
    assert abs(beta[a] - beta[b]) < 0.01
    plain, allowed = sign_tests(comp), sign_tests(comp, beta)
    assert (plain.higher[b, a], plain.lower[b, a]) == (10, 2)
    assert plain.p_value[b, a] == pytest.approx(2 * (1 + 12 + 66) / 4096)
    assert (allowed.higher[b, a], allowed.lower[b, a]) == (10, 10)
    assert allowed.p_value[b, a] == 1.0
    rng = np.random.default_rng(3)
    pairs = np.array([(x, y) for x in range(5) for y in range(x + 1, 5)] * 12)
    full = comparisons(
        np.repeat(np.arange(12), 10), pairs[:, 0], pairs[:, 1],
        rng.choice([0.0, 0.5, 1.0], size=120), n_models=5, n_tasks=12,
    )  # fmt: skip
    fitted = bootstrap(full, n_resamples=50, seed=0).point.log_strength
    assert np.array_equal(sign_tests(full).p_value, sign_tests(full, fitted).p_value)


def test_tasks_needed_uses_the_intervals_own_critical_value() -> None:
    assert critical_value(0.95, 25) == pytest.approx(2.1065, abs=1e-4)
    normal = tasks_to_separate(0.5, 1.0, 25, power=0.8)
    expanded = tasks_to_separate(0.5, 1.0, 25, power=0.8, expand=True)
    assert normal is not None and expanded is not None
    # the standard error now is 1.0 / 2.106, not 1.0 / 1.96: about 13% fewer tasks
    assert 0.8 * normal < expanded < 0.92 * normal
    se = 1.0 / critical_value(0.95, 25)

    def separates(n: int) -> bool:
        return (critical_value(0.95, n) + 0.8416212335729143) * se * math.sqrt(25 / n) <= 0.5

    assert separates(expanded) and not separates(expanded - 1)


def test_tasks_needed_is_printed_at_sensible_precision() -> None:
    assert about_tasks(8) == "about 8"
    assert about_tasks(137) == "about 140"
    assert about_tasks(9_999) == "about 10,000"
    assert about_tasks(60_000) == "more than 10,000"


def test_expanded_interval_pinned_by_hand() -> None:
    # draws 0, 0.001, ..., 1: the q-quantile is q. Expanded at 5 units the level's normal
    # quantile is sqrt(5/4) * t_4(0.975) = 1.1180340 * 2.7764451 = 3.1041576.
    draws = np.linspace(0.0, 1.0, 1001)[:, None]
    point = np.array([0.5])
    tail = 0.5 * math.erfc(3.1041576 / math.sqrt(2.0))
    for method in ("percentile", "bca"):
        got = bootstrap_interval(point, draws, method=method, n_units=5)  # type: ignore[arg-type]
        assert (got.lower[0], got.upper[0]) == pytest.approx((tail, 1 - tail), abs=2e-6)
    plain = bootstrap_interval(point, draws, method="percentile")
    assert (plain.lower[0], plain.upper[0]) == pytest.approx((0.025, 0.975), abs=1e-9)


def test_an_index_equal_to_the_number_of_models_is_refused() -> None:
    with pytest.raises(ValueError, match=r"j\[0\] = 3 is outside 0..2"):
        comparisons([0], [0], [3], [1.0], n_models=3, n_tasks=1)
    with pytest.raises(ValueError, match=r"task\[0\] = 2 is outside 0..1"):
        comparisons([2], [0], [1], [1.0], n_models=3, n_tasks=2)
    with pytest.raises(ValueError, match=r"first\[0\] = 3 is outside 0..2"):
        verdicts([0], [3], [1], [1.0], n_models=3, n_tasks=1)


def test_the_full_markdown_path_is_sanitised() -> None:
    # block syntax (a heading, a quote, a table) and no code fence: the full parser's output,
    # which must still pass the sanitiser: links get rel=nofollow..., other schemes lose href
    text = (
        "# Heading\n\n> quoted <script>alert(1)</script>\n\n"
        "| a | b |\n|---|---|\n| [web](http://example.com) | [file](ftp://example.com/f) |\n"
    )
    html = str(render_markdown(text))
    assert "<h1>" in html and "<blockquote>" in html and "<table>" in html
    assert '<a href="http://example.com" rel="nofollow noopener noreferrer">web</a>' in html
    assert "ftp:" not in html and "<script" not in html


def test_a_changed_second_answer_drops_its_verdicts_in_report_and_calibrate(
    project: Path,
) -> None:
    texts = unanimous_run(project, 6)
    EvidenceLog(project / "runs" / "r").append(
        "labels",
        {
            "kind": "label",
            "task_id": "t00",
            "model_a": "m/a",
            "model_b": "m/b",
            "labeller": "ann",
            "winner": "m/a",
            "shown_first": "m/a",
            "source": "simulated",
            "created_at": now_iso(),
        },
    )
    spec = resolve_run("r")
    before = build_results(spec, FAST).judge_blocks[0]
    assert {r.model: r.comparisons for r in before.ratings} == {m: 12 for m in MODELS}
    assert before.calibration.agreement.n == 1
    # m/b is model_b of the pair (m/a, m/b): only the second answer's hash changes
    suite = write_suite(project, 6)
    log = EvidenceLog(project / "runs" / "r")
    record = dict(
        next(r for r in log.records("answers") if r["task_id"] == "t00" and r["model"] == "m/b")
    )
    record["text"] = "A rewritten answer of m/b to t00."
    log.append("answers", record)
    assert texts[("t00", "m/b")] != record["text"] and suite.exists()
    results = build_results(spec, FAST)
    after = results.judge_blocks[0]
    assert {r.model: r.comparisons for r in after.ratings} == {"m/a": 11, "m/b": 10, "m/c": 11}
    assert after.calibration.status == "uncalibrated" or after.calibration.agreement.n == 0
    write_results(results, spec.results_path)
    calibrated = calibrate_run(spec, echo=lambda line: None)["judge/j1"]
    assert calibrated.status == "uncalibrated" and calibrated.unmatched_labels == 1
    assert (
        json.loads(spec.results_path.read_text())["judge_blocks"][0]["calibration"][
            "unmatched_labels"
        ]
        == 1
    )


def test_method_sentences_are_written_from_what_ran(project: Path) -> None:
    unanimous_run(project, 6)
    spec = resolve_run("r")
    task = build_results(spec, FAST).judge_blocks[0]
    judged = build_results(spec, ReportOptions(resamples=150, seed=2, unit="judgments"))
    single = judged.judge_blocks[0]
    assert "200 bootstrap resamples of tasks (seed 1), expanded BCa" in task.methods[0]
    assert "150 bootstrap resamples of single judgments (seed 2)" in single.methods[0]
    assert f"of {task.bootstrap.fits} resample and jackknife fits converged" in task.methods[2]
    assert "uncalibrated" in task.methods[-1]
    assert "200 task resamples" in task.captions["heatmap"]
    assert "150 judgment resamples" in single.captions["heatmap"]
    assert "worst = 3 - the number" in task.captions["rank"]
    # the site's prose holds no method sentence of its own
    prose = (Path(__file__).resolve().parents[1] / "content" / "methodology.md").read_text()
    assert "percentile" not in prose and "rank group" not in prose


def test_the_anchored_ranking_passes_the_same_gate(project: Path) -> None:
    """3 unanimous tasks, 8 models, people agreeing everywhere: the judge ranking claims no
    ordering (an exact sign test over 3 tasks cannot reach 5%), and neither may the anchored
    or the labels-only ranking (before: all 28 orderings, intervals like [97.6%, 97.6%])."""
    models = [f"m/{c}" for c in "abcdefgh"]
    unanimous_run(project, 3, models)
    log = EvidenceLog(project / "runs" / "r")
    for k in range(3):
        for x, a in enumerate(models):
            for b in models[x + 1 :]:
                log.append(
                    "labels",
                    {
                        "kind": "label",
                        "task_id": f"t{k:02d}",
                        "model_a": a,
                        "model_b": b,
                        "labeller": "ana",
                        "winner": a,
                        "shown_first": a,
                        "source": "human",
                        "created_at": now_iso(),
                    },
                )
    block = build_results(resolve_run("r"), FAST).judge_blocks[0]
    assert [c for c in block.claims if c.kind == "above"] == []
    anchored = block.anchored
    assert anchored is not None and anchored.status == "anchored"
    assert anchored.claims == []
    for ranking in (anchored.ratings, anchored.labels_only):
        assert len(ranking) == 8
        assert {(r.rank_best, r.rank_worst) for r in ranking} == {(1, 8)}
        for r in ranking:
            iv = r.win_rate_vs_field
            assert iv.low is not None and iv.high is not None and iv.high - iv.low > 0.05
    assert not any("separates" in d and "significant" not in d for d in anchored.disagreements)
