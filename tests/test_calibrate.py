"""The calibrate stage on hand-built evidence: judges and labellers of known behaviour."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import scipy.stats
from click.testing import CliRunner
from evidence_factory import add_answers, add_verdict, write_runs, write_suite
from sklearn.metrics import cohen_kappa_score

from konkord.cli import cli
from konkord.configuration.runspec import resolve_run
from konkord.errors import KonkordError
from konkord.evidence.log import EvidenceLog, now_iso
from konkord.evidence.verdicts import combine_verdicts, load_verdicts
from konkord.results.schema import read_results, write_results
from konkord.stages.calibrate.calibrate import calibration_block, format_calibration
from konkord.stages.calibrate.calibrate_run import calibrate_run
from konkord.stages.report.report import ReportOptions, build_results, good_answers

FAST = ReportOptions(resamples=100, seed=1)
MODELS = ["m/a", "m/b", "m/c"]  # m/a is best, m/c worst: the truth every test uses
PAIRS = [("m/a", "m/b"), ("m/a", "m/c"), ("m/b", "m/c")]
RIGHT = ("1", "2")  # with model_a the better one (true for every pair here): both orders agree
FLIP = ("1", "1")  # the first shown wins in both orders


def make_run(root: Path, n_tasks: int = 4) -> dict[tuple[str, str], str]:
    suite = write_suite(root, n_tasks)
    write_runs(root, [{"name": "r", "suite": "suites/tiny.yaml", "models": MODELS}])
    return add_answers(root, "r", suite, MODELS)


def add_label(root: Path, task: str, x: str, y: str, winner: str, labeller: str = "ann") -> None:
    model_a, model_b = sorted((x, y))
    EvidenceLog(root / "runs" / "r").append(
        "labels",
        {
            "kind": "label",
            "task_id": task,
            "model_a": model_a,
            "model_b": model_b,
            "labeller": labeller,
            "winner": winner,
            "shown_first": model_a,
            "source": "simulated",
            "created_at": now_iso(),
        },
    )


def block(root: Path, judge: str = "judge/j1") -> Any:
    spec = resolve_run("r")
    log = EvidenceLog(spec.run_dir)
    answers = good_answers(spec, log)
    combined = combine_verdicts(load_verdicts(log, judge))
    labels = [r for r in log.latest("labels").values() if r.get("winner") is not None]
    return calibration_block(spec, log, judge, combined, answers, labels)


def test_an_always_right_judge_agrees_fully_with_an_always_right_labeller(project: Path) -> None:
    texts = make_run(project)
    for k in range(4):
        for x, y in PAIRS:
            add_verdict(project, "r", texts, f"t{k:02d}", x, y, RIGHT)
            add_label(project, f"t{k:02d}", x, y, x)
    cal = block(project)
    assert cal.status == "calibrated"
    assert (cal.agreement.k, cal.agreement.n, cal.agreement.rate) == (12, 12, 1.0)
    assert cal.agreement_no_ties.rate == 1.0
    assert cal.agreement_consistent.rate == 1.0
    assert cal.agreement_flipped.n == 0 and cal.agreement_flipped.rate is None
    assert cal.flip_rate.rate == 0.0
    # every label says "model a", but which model is "a" is an accident of naming: counted in
    # both orientations, the raters agree on every winner where chance agreement is 1/2
    assert cal.kappa.value == 1.0
    assert cal.confusion.matrix == [[12, 0, 0], [0, 0, 0], [0, 0, 0]]
    assert cal.disagreements == []


def test_a_judge_that_flips_every_pair_has_no_consistent_pairs_and_says_so(project: Path) -> None:
    texts = make_run(project)
    for k in range(4):
        for x, y in PAIRS:
            add_verdict(project, "r", texts, f"t{k:02d}", x, y, FLIP)
            add_label(project, f"t{k:02d}", x, y, x)
    cal = block(project)
    assert cal.flip_rate.rate == 1.0 and cal.flip_rate.n == 12
    assert cal.agreement_consistent.n == 0
    assert cal.agreement_consistent.rate is None  # undefined, never 0% or 100%
    assert cal.agreement_consistent.low is None
    assert (cal.agreement_flipped.k, cal.agreement_flipped.n) == (0, 12)
    assert cal.agreement.rate == 0.0
    assert cal.agreement_no_ties.n == 0 and cal.agreement_no_ties.rate is None
    lines = "\n".join(format_calibration("judge/j1", cal))
    assert "on consistent pairs   undefined (no comparisons)" in lines
    gallery = cal.disagreements
    assert len(gallery) == 12
    first = gallery[0]
    assert (first.task_id, first.model_a, first.model_b) == ("t00", "m/a", "m/b")
    assert (first.human, first.judge_combined, first.flipped) == ("m/a", "tie", True)
    assert (first.judge_ab, first.judge_ba) == ("m/a", "m/b")
    assert first.rationale_ab == "Reasoning for t00 ab."
    assert first.rationale_ba == "Reasoning for t00 ba."


def test_figures_worked_out_by_hand(project: Path) -> None:
    texts = make_run(project, n_tasks=2)
    # judge: t00 right on all three pairs; t01 a-b flipped, a-c right, b-c says c (wrong).
    for x, y in PAIRS:
        add_verdict(project, "r", texts, "t00", x, y, RIGHT)
    add_verdict(project, "r", texts, "t01", "m/a", "m/b", FLIP)
    add_verdict(project, "r", texts, "t01", "m/a", "m/c", RIGHT)
    add_verdict(project, "r", texts, "t01", "m/b", "m/c", ("2", "1"))
    # ann: right everywhere but calls t00 a-b a tie; bob labels t00 only, says c beats b.
    add_label(project, "t00", "m/a", "m/b", "tie")
    add_label(project, "t00", "m/a", "m/c", "m/a")
    add_label(project, "t00", "m/b", "m/c", "m/b")
    add_label(project, "t01", "m/a", "m/b", "m/a")
    add_label(project, "t01", "m/a", "m/c", "m/a")
    add_label(project, "t01", "m/b", "m/c", "m/b")
    add_label(project, "t00", "m/a", "m/b", "m/a", labeller="bob")
    add_label(project, "t00", "m/b", "m/c", "m/c", labeller="bob")
    cal = block(project)
    # comparisons (human, judge) in pair terms (a = model_a, the alphabetically first):
    # ann t00 ab (tie,a) x, ac (a,a) v, bc (a,a) v; ann t01 ab (a,tie) x, ac (a,a) v,
    # bc (a,b) x; bob t00 ab (a,a) v, bc (b,a) x  -> 4 of 8
    assert (cal.agreement.k, cal.agreement.n) == (4, 8)
    # without ties: drop ann t00 ab and ann t01 ab -> 4 of 6
    assert (cal.agreement_no_ties.k, cal.agreement_no_ties.n) == (4, 6)
    assert (cal.agreement_flipped.k, cal.agreement_flipped.n) == (0, 1)
    assert (cal.agreement_consistent.k, cal.agreement_consistent.n) == (4, 7)
    assert (cal.flip_rate.k, cal.flip_rate.n) == (1, 6)
    # rows: human a, b, tie; columns: judge a, b, tie
    assert cal.confusion.matrix == [[4, 1, 1], [1, 0, 0], [1, 0, 0]]
    human = [2, 0, 0, 0, 0, 0, 0, 1]
    judge = [0, 0, 0, 2, 0, 1, 0, 0]
    # kappa counts every comparison in both orientations (model a and b swapped)
    swap = {0: 1, 1: 0, 2: 2}
    both_h = human + [swap[c] for c in human]
    both_j = judge + [swap[c] for c in judge]
    assert cal.kappa.value == pytest.approx(cohen_kappa_score(both_h, both_j, labels=[0, 1, 2]))
    assert cal.kappa.low <= cal.kappa.value <= cal.kappa.high
    assert [(r.key, r.proportion.k, r.proportion.n) for r in cal.by_task] == [
        ("t00", 3, 5),
        ("t01", 1, 3),
    ]
    assert [(r.key, r.proportion.k, r.proportion.n) for r in cal.by_pair] == [
        ("m/a vs m/b", 1, 3),
        ("m/a vs m/c", 2, 2),
        ("m/b vs m/c", 1, 3),
    ]
    assert [(r.key, r.proportion.k, r.proportion.n) for r in cal.per_labeller] == [
        ("ann", 3, 6),
        ("bob", 1, 2),
    ]
    assert cal.labellers == ["ann", "bob"]
    # ann and bob share t00 a-b (tie vs a) and t00 b-c (b vs c): 0 of 2, without ties 0 of 1
    hh = cal.human_human
    assert hh is not None and hh.shared_items == 2
    assert (hh.agreement.k, hh.agreement.n) == (0, 2)
    assert (hh.agreement_no_ties.k, hh.agreement_no_ties.n) == (0, 1)
    assert len(cal.disagreements) == 4
    # Tasks agree 3 of 5 and 1 of 3: CR1 variance 2/1 * (0.5^2 + 0.5^2) / 8^2 is half the
    # binomial 0.25 / 8, so n_eff = 16; two tasks give the expanded sqrt(2) t_1 critical value.
    z = math.sqrt(2.0) * scipy.stats.t.ppf(0.975, 1)
    centre, n_eff = (0.5 + z * z / 32) / (1 + z * z / 16), 16
    half = z * math.sqrt(0.25 / n_eff + z * z / (4 * n_eff**2)) / (1 + z * z / n_eff)
    assert cal.agreement.low == pytest.approx(centre - half, abs=1e-9)
    assert cal.agreement.plain_low == pytest.approx(0.2152, abs=1e-4)  # Wilson 4/8
    assert cal.by_turn == []  # single-turn task ids


def test_length_quartiles_show_their_ranges(project: Path) -> None:
    suite = write_suite(project, 8)
    write_runs(project, [{"name": "r", "suite": "suites/tiny.yaml", "models": MODELS[:2]}])
    texts = add_answers(project, "r", suite, MODELS[:2])
    for k in range(8):
        add_verdict(project, "r", texts, f"t{k:02d}", "m/a", "m/b", RIGHT)
        add_label(project, f"t{k:02d}", "m/a", "m/b", "m/a" if k < 6 else "m/b")
    cal = block(project)
    # every answer is "Answer of m/x to tNN." (21 characters): one length, one quartile
    assert [(r.key, r.label, r.proportion.k, r.proportion.n) for r in cal.by_length_quartile] == [
        ("Q1", "mean answer length 21-21 characters", 6, 8)
    ]


def test_repeated_votes_count_as_comparisons_but_as_one_person(project: Path) -> None:
    texts = make_run(project, n_tasks=1)
    add_verdict(project, "r", texts, "t00", "m/a", "m/b", RIGHT)
    add_label(project, "t00", "m/a", "m/b", "m/a", labeller="expert_1")
    add_label(project, "t00", "m/a", "m/b", "m/b", labeller="expert_1#2")
    add_label(project, "t00", "m/a", "m/b", "m/a", labeller="expert_2")
    cal = block(project)
    assert (cal.agreement.k, cal.agreement.n) == (2, 3)
    assert cal.labellers == ["expert_1", "expert_2"]
    assert [(r.key, r.proportion.n) for r in cal.per_labeller] == [("expert_1", 2), ("expert_2", 1)]
    # every pair of votes on the item: (a, b), (a, a), (b, a) -> 1 of 3
    assert cal.human_human is not None
    assert (cal.human_human.agreement.k, cal.human_human.agreement.n) == (1, 3)


def test_labels_without_this_judges_verdicts_leave_it_uncalibrated(project: Path) -> None:
    texts = make_run(project, n_tasks=2)
    add_verdict(project, "r", texts, "t00", "m/a", "m/b", RIGHT)
    add_label(project, "t01", "m/a", "m/b", "m/a")
    cal = block(project)
    assert cal.status == "uncalibrated" and cal.agreement is None
    assert (cal.labels, cal.unmatched_labels) == (1, 1)
    assert "none of 1 labels has a verdict" in format_calibration("judge/j1", cal)[0]


def test_a_run_without_labels_is_uncalibrated_in_the_report(project: Path) -> None:
    texts = make_run(project)
    for k in range(4):
        for x, y in PAIRS:
            add_verdict(project, "r", texts, f"t{k:02d}", x, y, RIGHT)
    results = build_results(resolve_run("r"), FAST)
    assert results.judge_blocks[0].calibration.status == "uncalibrated"
    assert results.judge_blocks[0].calibration.agreement is None


def test_one_block_per_judge_on_the_same_labels(project: Path) -> None:
    texts = make_run(project)
    for k in range(4):
        for x, y in PAIRS:
            add_verdict(project, "r", texts, f"t{k:02d}", x, y, RIGHT, judge="judge/right")
            add_verdict(
                project, "r", texts, f"t{k:02d}", x, y, FLIP, judge="judge/first", frame_hash="f2"
            )
            add_label(project, f"t{k:02d}", x, y, x)
    results = build_results(resolve_run("r"), FAST)
    rates = {b.judge: b.calibration.agreement.rate for b in results.judge_blocks}
    assert rates == {"judge/right": 1.0, "judge/first": 0.0}


def test_calibrate_needs_a_results_file(project: Path) -> None:
    make_run(project)
    with pytest.raises(KonkordError, match=r"run `konkord report --run r` first"):
        calibrate_run(resolve_run("r"))


def test_calibrate_updates_only_the_calibration_blocks(project: Path) -> None:
    texts = make_run(project)
    for k in range(4):
        for x, y in PAIRS:
            add_verdict(project, "r", texts, f"t{k:02d}", x, y, RIGHT)
    spec = resolve_run("r")
    results = build_results(spec, FAST)
    results.judge_blocks[0].calibration.objective = {"tests": "kept"}
    write_results(results, spec.results_path)
    before = json.loads(spec.results_path.read_text())
    for k in range(4):
        add_label(project, f"t{k:02d}", "m/a", "m/b", "m/a")
    out = CliRunner().invoke(cli, ["calibrate", "--run", "r"])
    assert out.exit_code == 0, out.output
    assert "agreement             100.0% (4 of 4, 95% CI 51.0% to 100.0%)" in out.output
    after = json.loads(spec.results_path.read_text())
    calibration = after["judge_blocks"][0].pop("calibration")
    before["judge_blocks"][0].pop("calibration")
    # the method sentences are rewritten from the new calibration, the rest stays as it was
    methods = after["judge_blocks"][0].pop("methods")
    assert "uncalibrated" in " ".join(before["judge_blocks"][0].pop("methods"))
    assert any(s.startswith("Agreement with people: 4 labels") for s in methods)
    assert after == before
    assert calibration["status"] == "calibrated"
    assert calibration["objective"] == {"tests": "kept"}
    assert read_results(spec.results_path).judge_blocks[0].calibration.agreement.n == 4


def test_calibrate_names_the_judges_when_one_is_unknown(project: Path) -> None:
    texts = make_run(project)
    for k in range(4):
        for x, y in PAIRS:
            add_verdict(project, "r", texts, f"t{k:02d}", x, y, RIGHT)
    spec = resolve_run("r")
    write_results(build_results(spec, FAST), spec.results_path)
    out = CliRunner().invoke(cli, ["calibrate", "--run", "r", "--judge", "judge/nope"])
    assert out.exit_code == 2
    assert 'no block for judge "judge/nope" (judges: judge/j1)' in out.output
