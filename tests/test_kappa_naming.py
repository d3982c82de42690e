"""Agreement and kappa do not depend on how models are named or which of a pair is listed first,
nor human-vs-human kappa on the labellers' ids; agreement intervals are clustered by task."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import scipy.stats
from conftest import REPO

from konkord.configuration.runspec import resolve_run
from konkord.evidence.log import EvidenceLog, Record
from konkord.evidence.verdicts import CombinedVerdict, combine_verdicts, load_verdicts
from konkord.stages.calibrate.calibrate import calibration_block
from konkord.stages.current import current_labels, good_answers
from konkord.stats.agreement import (
    SWAP,
    _kappa_floor,
    both_orientations,
    clustered_proportion,
    cohens_kappa,
    exact_agreement,
    kappa_bootstrap,
    kappa_from_confusion,
    oriented_kappa,
    proportion,
)

JUDGE = "judge/j"


def _renamer(models: list[str]) -> dict[str, str]:
    """Reverse the alphabetical order of the names: the first becomes the last."""
    ordered = sorted(models)
    return {m: f"z/{len(ordered) - k:02d}" for k, m in enumerate(ordered)}


def _rename_verdict(c: CombinedVerdict, new: dict[str, str]) -> CombinedVerdict:
    a, b = new[c.model_a], new[c.model_b]
    orders = dict(c.orders)
    if a > b:  # the pair is reoriented: what was shown first in "ab" is now "ba"
        a, b = b, a
        orders = {"ab": c.orders["ba"], "ba": c.orders["ab"]} if len(c.orders) == 2 else orders
    winner = c.winner if c.winner in (None, "tie") else new[c.winner]
    return dataclasses.replace(c, model_a=a, model_b=b, winner=winner, orders=orders)


def _rename_label(rec: Record, new: dict[str, str]) -> Record:
    a, b = sorted((new[rec["model_a"]], new[rec["model_b"]]))
    winner = rec["winner"] if rec["winner"] == "tie" else new[rec["winner"]]
    return {**rec, "model_a": a, "model_b": b, "winner": winner}


def _figures(cal: Any) -> list[Any]:
    figures: list[Any] = []
    for p in (
        cal.agreement,
        cal.agreement_no_ties,
        cal.agreement_consistent,
        cal.agreement_flipped,
        cal.human_human.agreement if cal.human_human else None,
    ):
        figures.append(None if p is None else (p.k, p.n, p.rate, p.low, p.high))
    for k in (cal.kappa, cal.human_human.kappa if cal.human_human else None):
        figures.append(None if k is None else (k.value, k.low, k.high))
    figures.append(sorted((r.proportion.k, r.proportion.n, r.proportion.low) for r in cal.by_pair))
    return figures


def _calibrate_renamed(
    spec: Any,
    combined: list[CombinedVerdict],
    answers: dict[Any, Record],
    labels: list[Record],
    new: dict[str, str] | None = None,
) -> tuple[Any, Any]:
    models = sorted({c.model_a for c in combined} | {c.model_b for c in combined})
    new = new or _renamer(models)
    judge = combined[0].judge
    before = calibration_block(spec, None, judge, combined, answers, labels)  # type: ignore[arg-type]
    after = calibration_block(
        spec,
        None,  # type: ignore[arg-type]
        judge,
        [_rename_verdict(c, new) for c in combined],
        {(t, new[m]): rec for (t, m), rec in answers.items() if m in new},
        [_rename_label(r, new) for r in labels],
    )
    return before, after


def test_renaming_and_reorienting_the_demo_leaves_every_figure_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    spec = resolve_run("demo-python-codegen")
    log = EvidenceLog(spec.run_dir)
    answers = good_answers(spec, log)
    judge = spec.judges[0]
    combined = combine_verdicts(load_verdicts(log, judge))
    before, after = _calibrate_renamed(spec, combined, answers, current_labels(log))
    assert before.status == "calibrated" and before.kappa.value is not None
    assert _figures(before) == _figures(after)
    # and with only the strongest model renamed to sort last (its pairs alone reoriented)
    models = sorted(spec.models)
    only = {m: ("zz/" + m if m == spec.models[0] else m) for m in models}
    before, after = _calibrate_renamed(spec, combined, answers, current_labels(log), only)
    assert _figures(before) == _figures(after)


def _field_80(seed: int = 3) -> tuple[Any, list[CombinedVerdict], list[Record]]:
    """m/a wins 80% of its comparisons by the judge; people agree with the judge 70% of the time."""
    rng = np.random.default_rng(seed)
    models = ["m/a", "m/b", "m/c", "m/d"]
    tasks = [f"t{k:02d}" for k in range(20)]
    combined, labels = [], []
    for task in tasks:
        for x in range(4):
            for y in range(x + 1, 4):
                a, b = models[x], models[y]
                p_a = 0.8 if x == 0 else 0.45
                u = rng.random()
                winner = a if u < p_a else ("tie" if u < p_a + 0.1 else b)
                combined.append(CombinedVerdict(task, a, b, JUDGE, winner, False, True, {}))
                for person in ("ann", "bob"):
                    v = rng.random()
                    said = winner if v < 0.7 else rng.choice([a, b, "tie"])
                    labels.append(
                        {
                            "task_id": task,
                            "model_a": a,
                            "model_b": b,
                            "labeller": person,
                            "winner": str(said),
                        }
                    )
    spec = SimpleNamespace(suite=SimpleNamespace(tasks=[SimpleNamespace(id=t) for t in tasks]))
    return spec, combined, labels


def test_renaming_a_field_where_one_model_wins_80_percent_changes_nothing() -> None:
    spec, combined, labels = _field_80()
    wins = sum(c.winner == "m/a" for c in combined if "m/a" in c.pair)
    assert wins / sum("m/a" in c.pair for c in combined) == pytest.approx(0.8, abs=0.06)
    before, after = _calibrate_renamed(spec, combined, labels=labels, answers={})
    assert _figures(before) == _figures(after)
    # renaming only the dominant model so that it sorts last reorients only its pairs
    only = {"m/a": "z/a", "m/b": "m/b", "m/c": "m/c", "m/d": "m/d"}
    before, after = _calibrate_renamed(spec, combined, {}, labels, only)
    assert _figures(before) == _figures(after)
    # plain Cohen's kappa of the same comparisons moves with that naming: the bug this fixes
    plain = [float(kappa_from_confusion(c.confusion.matrix)) for c in (before, after)]
    assert abs(plain[0] - plain[1]) > 0.01


def test_oriented_kappa_by_hand() -> None:
    # person: a, a, b, tie; judge: a, b, b, tie. Both orientations double the matrix to
    # [[1,1,0],[1,1,0],[0,0,1]] + mirrored = [[2,1,0],[1,2,0],[0,0,2]] over 8 comparisons:
    # observed 6/8, rows = cols = (3/8, 3/8, 2/8), chance 9/64 + 9/64 + 4/64 = 22/64.
    expected = (6 / 8 - 22 / 64) / (1 - 22 / 64)
    assert oriented_kappa([0, 0, 1, 2], [0, 1, 1, 2]) == pytest.approx(expected, abs=1e-12)
    # plain Cohen's kappa of the same codes is a different figure (rows 2/4, 1/4, 1/4)
    assert cohens_kappa([0, 0, 1, 2], [0, 1, 1, 2]) != pytest.approx(expected)


def test_oriented_kappa_is_invariant_to_swapping_any_subset_of_pairs() -> None:
    rng = np.random.default_rng(0)
    x = rng.choice(3, size=200, p=[0.6, 0.25, 0.15])
    y = np.where(rng.random(200) < 0.6, x, rng.choice(3, size=200))
    flip = rng.random(200) < 0.5
    x2, y2 = np.where(flip, SWAP[x], x), np.where(flip, SWAP[y], y)
    assert cohens_kappa(x, y) != pytest.approx(cohens_kappa(x2, y2), abs=1e-3)
    assert oriented_kappa(x, y) == pytest.approx(oriented_kappa(x2, y2), abs=1e-12)
    clusters = np.repeat(np.arange(20), 10)
    one = kappa_bootstrap(x, y, clusters, n_resamples=200, seed=1)
    two = kappa_bootstrap(x2, y2, clusters, n_resamples=200, seed=1)
    assert (one.value, one.low, one.high) == pytest.approx((two.value, two.low, two.high))


def test_human_human_kappa_does_not_depend_on_which_person_is_first() -> None:
    # which of two people is "first" on an item follows their ids; renaming people changes it
    # on some items and not others
    rng = np.random.default_rng(1)
    x = rng.choice(3, size=150, p=[0.5, 0.3, 0.2])
    y = np.where(rng.random(150) < 0.6, x, rng.choice(3, size=150, p=[0.2, 0.3, 0.5]))
    some = rng.random(150) < 0.5
    x2, y2 = np.where(some, y, x), np.where(some, x, y)
    assert oriented_kappa(x, y) != pytest.approx(oriented_kappa(x2, y2), abs=1e-3)
    assert oriented_kappa(x, y, exchangeable=True) == pytest.approx(
        oriented_kappa(x2, y2, exchangeable=True), abs=1e-12
    )


def test_kappa_interval_is_the_expanded_bca_interval_of_the_cluster_resamples() -> None:
    # tasks agree fully or hardly at all: the clustered bootstrap is wider than the floor
    rng = np.random.default_rng(2)
    x = rng.choice(3, size=60)
    clusters = np.repeat(np.arange(12), 5)
    y = np.where(clusters % 2 == 0, x, (x + 1 + rng.integers(0, 2, size=60)) % 3)
    got = kappa_bootstrap(x, y, clusters, n_resamples=400, seed=7)
    # the same draws, resampled by hand one cluster list at a time
    draws = np.random.default_rng(7).integers(0, 12, size=(400, 12))
    kappas = []
    for row in draws:
        idx = np.concatenate([np.flatnonzero(clusters == c) for c in row])
        kappas.append(oriented_kappa(x[idx], y[idx]))
    finite = np.array([k for k in kappas if math.isfinite(k)])
    point = oriented_kappa(x, y)
    # BCa (Efron 1987) by hand: bias from the share of draws below the point, acceleration
    # from the leave-one-task-out kappas, at the expanded level sqrt(12/11) t_11(0.975).
    jack = np.array([oriented_kappa(x[clusters != c], y[clusters != c]) for c in range(12)])
    dev = jack.mean() - jack
    accel = (dev**3).sum() / (6.0 * ((dev**2).sum()) ** 1.5)
    z0 = scipy.stats.norm.ppf(((finite < point).sum() + 0.5 * (finite == point).sum()) / 400)
    z = math.sqrt(12 / 11) * scipy.stats.t.ppf(0.975, 11)
    q = [scipy.stats.norm.cdf(z0 + (z0 + s) / (1 - accel * (z0 + s))) for s in (-z, z)]
    low, high = np.quantile(finite, q)
    assert (got.low, got.high) == pytest.approx((low, high), abs=1e-12)
    plain = tuple(np.percentile(finite, [2.5, 97.5]))
    assert got.low < plain[0] and got.high > plain[1]  # few tasks: wider than the percentiles
    floor = _kappa_floor(x, y, lambda conf: both_orientations(conf))
    assert got.low < floor[0] and got.high > floor[1]


def test_clustered_agreement_by_hand_and_never_narrower_than_wilson() -> None:
    # 4 tasks of 10 comparisons agreeing 10, 10, 2, 2 times: p = 0.6, strongly clustered
    hits = np.array([1] * 10 + [1] * 10 + [1, 1] + [0] * 8 + [1, 1] + [0] * 8, dtype=bool)
    tasks = np.repeat(np.arange(4), 10)
    got = clustered_proportion(hits, tasks)
    robust = 4 / 3 * (2 * (10 - 6) ** 2 + 2 * (2 - 6) ** 2) / 40**2
    deff = robust / (0.6 * 0.4 / 40)
    n_eff = 40 / deff
    # four tasks: the variance has 3 degrees of freedom, the expanded critical value
    z = math.sqrt(4 / 3) * scipy.stats.t.ppf(0.975, 3)
    centre = (0.6 + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
    half = z * math.sqrt(0.24 / n_eff + z * z / (4 * n_eff**2)) / (1 + z * z / n_eff)
    assert got.design_effect == pytest.approx(deff)
    assert (got.low, got.high) == pytest.approx((centre - half, centre + half))
    plain = proportion(24, 40)
    assert (got.plain_low, got.plain_high) == (plain.low, plain.high)
    assert got.low < plain.low and got.high > plain.high
    # independent-looking tasks (each task like the whole) keep the plain Wilson interval
    even = clustered_proportion(
        np.tile([1, 1, 1, 0, 0], 8).astype(bool), np.repeat(np.arange(8), 5)
    )
    assert even.design_effect == 1.0
    assert (even.low, even.high) == pytest.approx((even.plain_low, even.plain_high))
    assert exact_agreement([0, 1], [0, 0], clusters=["t", "u"]).clusters == 2


def test_calibration_file_keeps_plain_wilson_beside_the_clustered_interval(project: Path) -> None:
    spec, combined, labels = _field_80()
    cal = calibration_block(spec, None, JUDGE, combined, {}, labels)  # type: ignore[arg-type]
    for p in (cal.agreement, cal.agreement_no_ties, cal.agreement_consistent):
        assert p.clusters == 20
        assert p.low <= p.plain_low and p.high >= p.plain_high
    for row in cal.per_labeller:
        assert row.proportion.clusters == 20
