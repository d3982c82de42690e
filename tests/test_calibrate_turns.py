"""Calibration of a suite with conversations: intervals clustered by conversation (all turns of
a task together), and agreement per turn where conversations and single-turn tasks mix."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.optimize
import scipy.stats
import yaml
from evidence_factory import add_verdict, write_runs

from konkord.configuration.runspec import resolve_run
from konkord.evidence.log import EvidenceLog, now_iso
from konkord.evidence.verdicts import combine_verdicts, load_verdicts
from konkord.stages.calibrate.calibrate import calibration_block, format_calibration

MODELS = ["m/a", "m/b"]
RIGHT = ("1", "2")  # m/a (model_a) wins in both orders
# The person agrees with the judge (m/a) on both turns of c0 and c1, on neither turn of c2
# and c3; agrees on s0 and not on s1. Turns of one conversation go together, which is what a
# clustered interval must see.
AGREES = {"c0": True, "c1": True, "c2": False, "c3": False, "s0": True, "s1": False}
CONVERSATIONS = ["c0", "c1", "c2", "c3"]
SINGLE = ["s0", "s1"]


def units() -> list[str]:
    return [f"{c}-t{t}" for c in CONVERSATIONS for t in (1, 2)] + SINGLE


def mixed_run(root: Path) -> None:
    tasks: list[dict[str, Any]] = [
        {"id": c, "turns": [f"Write about {c}.", "Now shorter."]} for c in CONVERSATIONS
    ]
    tasks += [{"id": s, "prompt": f"Question {s}?"} for s in SINGLE]
    suite = {"name": "mixed", "rubric": "Prefer the better answer.", "tasks": tasks}
    (root / "suites").mkdir()
    (root / "suites" / "mixed.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    write_runs(root, [{"name": "r", "suite": "suites/mixed.yaml", "models": MODELS}])
    texts = {(u, m): f"Answer of {m} to {u}." for u in units() for m in MODELS}
    log = EvidenceLog(root / "runs" / "r")
    for unit in units():
        add_verdict(root, "r", texts, unit, "m/a", "m/b", RIGHT)
        agrees = AGREES[unit.split("-t")[0]]
        log.append(
            "labels",
            {
                "kind": "label",
                "task_id": unit,
                "model_a": "m/a",
                "model_b": "m/b",
                "labeller": "ann",
                "winner": "m/a" if agrees else "m/b",
                "shown_first": "m/a",
                "source": "simulated",
                "created_at": now_iso(),
            },
        )


def calibration(root: Path) -> Any:
    spec = resolve_run("r")
    log = EvidenceLog(spec.run_dir)
    combined = combine_verdicts(load_verdicts(log, "judge/j1"))
    labels = [r for r in log.latest("labels").values() if r.get("winner") is not None]
    return calibration_block(spec, log, "judge/j1", combined, {}, labels)


def cluster_wilson(hits: list[bool], clusters: list[str]) -> tuple[float, float]:
    """The clustered interval written out by hand: CR1 variance of the share over the clusters
    given, n divided by the design effect (never below 1), Wilson at the expanded critical value
    sqrt(G/(G-1)) t_{G-1}, and never narrower than plain Wilson."""
    n, k = len(hits), sum(hits)
    p = k / n
    groups = sorted(set(clusters))
    g = len(groups)
    residual = 0.0
    for name in groups:
        inside = [h for h, c in zip(hits, clusters, strict=True) if c == name]
        residual += (sum(inside) - p * len(inside)) ** 2
    robust = g / (g - 1) * residual / n**2
    n_eff = n / max(1.0, robust / (p * (1 - p) / n))

    def wilson(k_: float, n_: float, z: float) -> tuple[float, float]:
        centre = (k_ / n_ + z * z / (2 * n_)) / (1 + z * z / n_)
        half = z * math.sqrt(k_ / n_ * (1 - k_ / n_) / n_ + z * z / (4 * n_ * n_)) / (1 + z * z / n_)
        return centre - half, centre + half

    z = math.sqrt(g / (g - 1)) * float(scipy.stats.t.ppf(0.975, g - 1))
    low, high = wilson(p * n_eff, n_eff, z)
    plain_low, plain_high = wilson(k, n, float(scipy.stats.norm.ppf(0.975)))
    return min(low, plain_low), max(high, plain_high)


def test_agreement_intervals_cluster_by_conversation_not_by_turn(project: Path) -> None:
    mixed_run(project)
    cal = calibration(project)
    hits = [AGREES[u.split("-t")[0]] for u in units()]
    by_conversation = [u.split("-t")[0] for u in units()]
    assert (cal.agreement.k, cal.agreement.n) == (sum(hits), 10)
    assert cal.agreement.clusters == 6  # four conversations and two single-turn tasks
    low, high = cluster_wilson(hits, by_conversation)
    assert (cal.agreement.low, cal.agreement.high) == (pytest.approx(low), pytest.approx(high))
    # the turn ids as clusters (how it was) give another, narrower interval: the test can fail
    by_turn = cluster_wilson(hits, units())
    assert by_turn[1] - by_turn[0] < high - low - 0.01
    # people against the judge without ties: the same clusters (no tie here, so the same set)
    assert cal.agreement_no_ties.clusters == 6
    assert cal.agreement_no_ties.low == pytest.approx(low)


def test_a_cluster_bootstrap_by_conversation_gives_the_variance_the_interval_rests_on(
    project: Path,
) -> None:
    """An independent check: resample whole conversations by hand and take the variance of the
    share; the effective sample size behind konkord's interval (read back from its width) gives
    the same variance, with CR1's small-sample factor G/(G-1)."""
    mixed_run(project)
    cal = calibration(project)
    hits = np.array([AGREES[u.split("-t")[0]] for u in units()], dtype=float)
    ids = np.array([u.split("-t")[0] for u in units()])
    names = sorted(set(ids.tolist()))
    g = len(names)
    rng = np.random.default_rng(7)
    shares = []
    for _ in range(20000):
        drawn = rng.choice(names, size=g, replace=True)
        shares.append(np.concatenate([hits[ids == name] for name in drawn]).mean())
    boot_variance = float(np.var(shares))
    # At p = 1/2 the Wilson interval is symmetric: find the n_eff whose half-width it has.
    z = math.sqrt(g / (g - 1)) * float(scipy.stats.t.ppf(0.975, g - 1))
    half = (cal.agreement.high - cal.agreement.low) / 2

    def wilson_half(n_eff: float) -> float:
        return z * math.sqrt(0.25 / n_eff + z * z / (4 * n_eff**2)) / (1 + z * z / n_eff)

    n_eff = scipy.optimize.brentq(lambda n: wilson_half(n) - half, 1.0, 1000.0)
    assert 0.25 / n_eff == pytest.approx(g / (g - 1) * boot_variance, rel=0.1)
    # the turns as units would be binomial: 0.25 / 10, well under what conversations give
    assert 0.25 / n_eff > 1.5 * 0.25 / hits.size


def test_per_turn_agreement_in_a_mixed_suite_counts_single_turn_tasks_as_turn_one(
    project: Path,
) -> None:
    mixed_run(project)
    cal = calibration(project)
    rows = [(t.key, t.agreement.k, t.agreement.n, t.single_turn_tasks) for t in cal.by_turn]
    assert rows == [("turn 1", 3, 6, 2), ("turn 2", 2, 4, 0)]
    assert cal.by_turn[0].label == "Turn 1 (with 2 single-turn tasks)"
    assert cal.by_turn[1].label == "Turn 2"
    text = "\n".join(format_calibration("judge/j1", cal))
    assert "turn 1 (and 2 single-turn tasks, counted as turn 1): judge vs people 50% (6)" in text
    assert "turn 2: judge vs people 50% (4)" in text
