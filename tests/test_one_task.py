"""One task is the smallest field: every report figure must still come out, and a fit of
the prior alone (a jackknife or bootstrap fit that kept no comparison) is exactly 0."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from evidence_factory import add_answers, add_verdict, write_runs, write_suite

from konkord.configuration.runspec import resolve_run
from konkord.evidence.log import EvidenceLog
from konkord.stages.label.labels import record_label
from konkord.stages.label.sample import Comparison
from konkord.stages.report.report import ReportOptions, build_results
from konkord.stats.newton import newton_bt

FAST = ReportOptions(resamples=200, seed=1)
EIGHT = [f"m/{c}" for c in "abcdefgh"]
NINE = [*EIGHT, "m/i"]  # 36 pairs: enough labels (30) for an anchored ranking


def test_a_fit_of_the_prior_alone_is_zero_from_any_start() -> None:
    res = newton_bt(np.zeros((1, 8, 8)), 0.5, init=np.linspace(3, -3, 8))
    assert res.converged.all()
    np.testing.assert_array_equal(res.beta, np.zeros((1, 8)))


def test_an_unseen_model_far_from_the_mean_converges_to_the_prior_only_optimum() -> None:
    wins = np.zeros((1, 4, 4))
    wins[0, 0, 1] = wins[0, 1, 2] = 1.0  # model 3 has no comparisons in this fit
    far = newton_bt(wins, 0.5, init=np.array([3.0, 1.0, -1.0, -3.0]))
    near = newton_bt(wins, 0.5)
    assert far.converged.all()
    np.testing.assert_allclose(far.beta, near.beta, atol=1e-8)


def _one_task_run(root: Path, models: list[str]) -> dict:
    suite = write_suite(root, 1)
    write_runs(root, [{"name": "r", "suite": "suites/tiny.yaml", "models": models,
                       "judges": ["judge/j1"], "label_plan": {"n": 36, "seed": 3}}])
    texts = add_answers(root, "r", suite, models)
    for x, a in enumerate(models):
        for b in models[x + 1 :]:
            add_verdict(root, "r", texts, "t00", a, b, ("1", "2"))
    return texts


def test_one_task_with_eight_models_in_a_clear_order_reports(project: Path) -> None:
    _one_task_run(project, EIGHT)
    block = build_results(resolve_run("r"), FAST).judge_blocks[0]
    assert [r.model for r in block.ratings] == EIGHT
    # One task can support no ordering: the sign test needs 6 tasks.
    assert [c for c in block.claims if c.kind == "above"] == []
    assert all((r.rank_best, r.rank_worst) == (1, 8) for r in block.ratings)


def test_one_task_with_labels_gives_an_anchored_ranking(project: Path) -> None:
    _one_task_run(project, NINE)
    spec = resolve_run("r")
    log = EvidenceLog(spec.run_dir)
    for x, a in enumerate(NINE):
        for b in NINE[x + 1 :]:
            record_label(log, Comparison("t00", a, b), a, "ana", a,
                         inclusion_probability=1.0, sample_seed=3)
    anchored = build_results(spec, FAST).judge_blocks[0].anchored
    assert anchored is not None and anchored.status == "anchored"
    assert [r.model for r in anchored.ratings] == NINE
