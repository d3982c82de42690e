"""Statistical validity, shown against a known truth (issue 8, item 4).

Prints, on simulated fields with task-level random effects, judged by the simulated judge of
`konkord simulate` and analysed by the statistics `konkord report` uses:

  (a) coverage of the 95% intervals of the expected win rate, task bootstrap beside judgment
      bootstrap, at 14, 25 and 100 tasks (aim: >= 93% at 25 tasks and above, and never below
      the judgment bootstrap where tasks have random effects);
  (b) how often a supported claim is false (aim: <= 5%);
  (c) a judge with pure position bias: flip rate near 100% and all ties, in simulation and
      through the real run and judge stages with `sim-judge/first`;
  (d) how often rank groups split models of equal true strength (aim: <= 5%);
  (e) "about N tasks would give an 80% chance to separate them": how often a fresh study of
      N tasks, drawn from the same truth, separates the pair in the observed direction
      (aim: 80%), beside the figure planned on the observed gap that it replaced;
  (f) coverage of the task-clustered agreement interval and the kappa interval at 10, 25 and
      80 tasks of uneven size (1 + geometric, mean 7) with strong task effects (aim: 93-97%),
      the agreement beside the normal critical value it replaced;
  (g) coverage of the anchored (PPI++) interval of people's win rates at the tuned lambda
      and at lambda 1, with 60, 150 and 300 labels of 1,000 comparisons: the jackknife t
      beside the expanded BCa it replaced, mean widths, the share of clipped resamples
      (aim: 93-97% in every cell);
  (h) consistency of a judge that orders every pair cleanly, at 2, 5 and 12 models (aim:
      near 100%; the ranking's prior held it to 0.82, 0.74 and 0.68).

Run by hand: `python benchmarks/bench_validity.py [--fields 200] [--resamples 500]`; one
section with `--only separation|agreement|anchored|consistency`, and the simulated fields of
(e), (f) and (g) with `--separation-fields`, `--agreement-fields`, `--anchored-fields` (400
by default, the count the promises are checked at).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from konkord import stats
from konkord.stages.simulate.simulate import (
    JudgeModel,
    Plan,
    draw_run,
    run_plan,
    strengths_from_spread,
)

REPO = Path(__file__).resolve().parent.parent
JUDGE = JudgeModel(accuracy=0.85, position_bias=0.5, tie_rate=0.1)
TWINS = np.array([0.8, 0.8, 0.0, 0.0, -0.8, -0.8])


def coverage(fields: int, resamples: int) -> None:
    """(a) Coverage of the expected-win-rate intervals, task against judgment bootstrap."""
    print("(a) coverage of 95% intervals of expected win rate vs field")
    print(
        f"    5 models 0.5 logits apart; judge accuracy {JUDGE.accuracy:g}, position bias "
        f"{JUDGE.position_bias:g}, tie rate {JUDGE.tie_rate:g}; {fields} fields per cell"
    )
    print(f"    {'task effect sd':>14} {'tasks':>6} {'task bootstrap':>15} {'judgments':>10}")
    strength = strengths_from_spread(5, 2.0)
    for effect in (0.0, 1.0, 2.0):
        for tasks in (14, 25, 100):
            found = []
            for mode in ("task", "judgments"):
                plan = Plan(strength, tasks, JUDGE, effect, fields, resamples, mode=mode)
                found.append(run_plan(plan).coverage)
            print(f"    {effect:>14g} {tasks:>6} {found[0]:>15.1%} {found[1]:>10.1%}")


def claims_and_groups(fields: int, resamples: int) -> None:
    """(b) false claims and (d) equal models split, on a field of three pairs of twins."""
    print("\n(b) supported claims that are false, (d) equal models split by rank groups")
    print(f"    six models in three pairs of equal strength {TWINS.tolist()}, task effect sd 1")
    print(
        f"    {'tasks':>6} {'claims':>7} {'false':>6} {'false share':>12} "
        f"{'runs w/ false':>14} {'twins split':>12}"
    )
    for tasks in (14, 25, 100):
        plan = Plan(TWINS, tasks, JUDGE, 1.0, fields, resamples)
        out = run_plan(plan)
        split = np.mean([1.0 - out.together[k, k + 1] for k in (0, 2, 4)])
        share = out.claims_false / max(1, out.claims_made)
        print(
            f"    {tasks:>6} {out.claims_made:>7} {out.claims_false:>6} {share:>12.1%} "
            f"{out.wrong_claims:>14.1%} {split:>12.1%}"
        )
    plan = Plan(np.zeros(5), 25, JUDGE, 1.0, fields, resamples)
    out = run_plan(plan)
    split = 1.0 - np.mean(out.together[np.triu_indices(5, k=1)])
    print(
        f"    five equal models, 25 tasks: {out.claims_made} claims (all false) in "
        f"{out.wrong_claims:.1%} of runs; a pair split in {split:.1%} of pair-runs"
    )


def position_bias(fields: int) -> None:
    """(c) A judge that always takes the answer shown first."""
    print("\n(c) a judge with pure position bias")
    judge = JudgeModel(accuracy=0.0, position_bias=1.0, tie_rate=0.0)
    plan = Plan(strengths_from_spread(5, 2.0), 25, judge, 1.0)
    rng = np.random.default_rng(0)
    flips = pairs = ties = 0
    largest = 0.0
    for _ in range(fields):
        comp, run_flips, _, score = draw_run(plan, 25, rng)
        flips += run_flips
        pairs += len(comp)
        ties += int(np.count_nonzero(score == 0.5))
        largest = max(largest, float(np.abs(stats.fit_bt(comp).log_strength).max()))
    print(
        f"    simulated, {fields} runs: flip rate {flips / pairs:.1%}, ties {ties / pairs:.1%}, "
        f"largest |log-strength| {largest:.2g}"
    )
    flip_rate, tie_share, n = _real_pipeline_position_judge()
    print(
        f"    real run + judge stages, sim-judge/first on the support suite: {n} pairs, "
        f"flip rate {flip_rate:.1%}, ties {tie_share:.1%}"
    )


def _real_pipeline_position_judge() -> tuple[float, float, int]:
    from konkord.configuration.runspec import resolve_run
    from konkord.evidence.log import EvidenceLog
    from konkord.evidence.verdicts import combine_verdicts, load_verdicts
    from konkord.providers.llm import ModelClient
    from konkord.stages.judge.judge import judge_run
    from konkord.stages.run import generate_answers

    here = Path.cwd()
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)
        try:
            runs = {
                "runs": [
                    {
                        "name": "bias",
                        "suite": str(REPO / "suites" / "support_replies.yaml"),
                        "models": [f"sim/m{k}:strength={1 - k / 2}" for k in range(4)],
                        "judges": ["sim-judge/first"],
                    }
                ]
            }
            Path("runs.json").write_text(json.dumps(runs))
            spec = resolve_run("bias")
            log = EvidenceLog(spec.run_dir)
            client = ModelClient(cache_dir=None)
            asyncio.run(generate_answers(log, spec.suite, spec.models, spec.settings, client))
            summary = asyncio.run(judge_run(spec, ["sim-judge/first"], client))
            combined = combine_verdicts(load_verdicts(log, "sim-judge/first", summary.frame_hash))
        finally:
            os.chdir(here)
    flipped = sum(v.flipped for v in combined)
    ties = sum(v.winner == "tie" for v in combined)
    return flipped / len(combined), ties / len(combined), len(combined)


def separation_promise(fields: int, resamples: int, cap: int) -> None:
    """(e) The promised task count of unseparated neighbours, checked by a fresh study."""
    from konkord.stats.planning import tasks_to_separate
    from konkord.stats.ranking import rank
    from konkord.stats.simfield import simulate_field

    print("\n(e) fresh studies of the promised size: share that separates the pair")
    print(
        f"    {fields} fields: 5 models with strengths N(0, 0.5^2), 6-30 tasks, task effect sd "
        f"0, 0.5 or 1, ties 10%; studies over {cap} tasks are counted, not run"
    )
    rng = np.random.default_rng(2026)
    found: dict[str, list[tuple[bool, bool]]] = {"planned": [], "observed gap": []}
    skipped = {name: 0 for name in found}
    for field in range(fields):
        n = int(rng.integers(6, 31))
        effect = float(rng.choice([0.0, 0.5, 1.0]))
        truth = simulate_field(5, n, rng, strength=rng.normal(0, 0.5, 5), task_effect_sd=effect,
                               tie_rate=0.1)
        ranking = rank(stats.bootstrap(truth.comparisons, resamples, seed=field),
                       truth.comparisons)
        for sep in ranking.separations:
            if sep.family_excludes_zero or sep.difference == 0.0:
                continue  # the sign test withheld it: no number of tasks is planned
            plans = {
                "planned": sep.tasks_needed,
                "observed gap": tasks_to_separate(sep.difference, sep.half_width, n,
                                                  power=sep.power, expand=True,
                                                  widen=sep.family_factor),
            }
            for name, tasks in plans.items():
                if tasks is None or tasks > cap:
                    skipped[name] += 1
                    continue
                fresh = simulate_field(5, tasks, rng, strength=truth.strength,
                                       task_effect_sd=effect, tie_rate=0.1)
                again = rank(stats.bootstrap(fresh.comparisons, resamples, seed=field),
                             fresh.comparisons)
                u, low = sep.upper, sep.lower
                found[name].append((bool(again.supported[u, low]),
                                    bool(again.supported[u, low] or again.supported[low, u])))
    print(f"    {'figure':>13} {'pairs run':>10} {'no figure/over cap':>19} "
          f"{'separated':>10} {'either way':>11}")
    for name, rows in found.items():
        hit = np.array(rows, dtype=float).reshape(-1, 2)
        same, either = (hit.mean(axis=0) if rows else (np.nan, np.nan))
        print(f"    {name:>13} {len(rows):>10} {skipped[name]:>19} {same:>10.1%} {either:>11.1%}")
    print("    promise: 80%")


def _expected_confusion(judge_right: float, person_right: float = 0.9) -> np.ndarray:
    """P(person says i, judge says j) when each is right with its probability and otherwise
    picks a category at random; truths a, b, tie at 0.4, 0.4, 0.2."""
    truth = np.array([0.4, 0.4, 0.2])
    person = person_right * np.eye(3) + (1.0 - person_right) / 3.0
    judge = judge_right * np.eye(3) + (1.0 - judge_right) / 3.0
    out: np.ndarray = (truth[:, None, None] * person[:, :, None] * judge[:, None, :]).sum(axis=0)
    return out


def agreement_coverage(fields: int, resamples: int) -> None:
    """(f) Task-clustered agreement and kappa intervals at few tasks."""
    from scipy.special import expit, logit

    from konkord.stats import agreement as A
    from konkord.stats.diagnostics import wilson_interval

    print("\n(f) coverage of 95% agreement and kappa intervals, judge vs person")
    print(
        f"    a judge right with probability logistic(logit(q) + sd z_task), a person right "
        f"0.9; task sizes 1 + geometric(1/6); {fields} datasets per cell"
    )
    print(f"    {'tasks':>6} {'sd':>4} {'q':>4} {'agreement':>10} {'(normal z)':>11} "
          f"{'kappa':>7}")
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()
    rng = np.random.default_rng(8)
    for tasks in (10, 25, 80):
        for sd in (1.0, 2.0):
            for q in (0.5, 0.8):
                right = expit(logit(q) + sd * nodes)
                conf = sum(w * _expected_confusion(r) for r, w in zip(right, weights, strict=True))
                true_rate = float(np.trace(conf))
                true_kappa = float(A.kappa_from_confusion(A.both_orientations(conf)))
                hits = np.zeros(3)
                for k in range(fields):
                    size = 1 + rng.geometric(1 / 6, size=tasks)
                    task = np.repeat(np.arange(tasks), size)
                    n = task.size
                    truth = rng.choice(3, size=n, p=[0.4, 0.4, 0.2])
                    person = np.where(rng.random(n) < 0.9, truth, rng.integers(0, 3, n))
                    q_task = expit(logit(q) + sd * rng.standard_normal(tasks))
                    judge = np.where(rng.random(n) < q_task[task], truth, rng.integers(0, 3, n))
                    agree = A.exact_agreement(person, judge, task)
                    normal = wilson_interval(agree.rate * agree.n / agree.design_effect,
                                             agree.n / agree.design_effect)
                    kappa = A.kappa_bootstrap(person, judge, task, resamples, seed=k)
                    hits += [agree.low <= true_rate <= agree.high,
                             normal[0] <= true_rate <= normal[1],
                             kappa.low <= true_kappa <= kappa.high]
                share = hits / fields
                print(f"    {tasks:>6} {sd:>4g} {q:>4g} {share[0]:>10.1%} {share[1]:>11.1%} "
                      f"{share[2]:>7.1%}")
    print("    promise: 95% (aim 93-97%)")


def anchored_coverage(fields: int, resamples: int) -> None:
    """(g) The anchored interval of people's win rates: the jackknife t beside the expanded BCa
    of the clipped bootstrap it replaced, per cell of lambda and label count."""
    from konkord.stats.anchored_sim import simulate_biased_judge_field
    from konkord.stats.ppi import anchored_bootstrap

    print("\n(g) coverage of the anchored 95% interval of people's win rate against the field")
    print(
        f"    5 models, 100 tasks, judge bias 0, 0.5 or 1 logit; {fields} fields a cell, "
        f"{resamples} resamples; jackknife t (now) beside expanded BCa (before)"
    )
    print(f"    {'lambda':>7} {'labels':>6} {'jackknife t':>11} {'+- se':>6} {'BCa':>6} "
          f"{'width now':>9} {'before':>7} {'clipped':>8}")
    pooled: dict[str, list[float]] = {"jackknife": [], "bca": []}
    for labels in (60, 150, 300):
        rng = np.random.default_rng(25)
        rows: dict[str, list[tuple[float, float, float, float, float]]] = {"tuned": [], "1": []}
        for k in range(fields):
            field = simulate_biased_judge_field(
                5, 100, labels, float(rng.choice([0.0, 0.5, 1.0])), seed=rng
            )
            truth = field.target_expected_win_rate
            for name, lam in (("tuned", None), ("1", 1.0)):
                fit = anchored_bootstrap(field.data, lam=lam, n_resamples=resamples, seed=k)
                now = fit.bootstrap.intervals()["expected_win_rate"]
                before = anchored_bootstrap(
                    field.data, lam=lam, n_resamples=resamples, seed=k, method="bca"
                ).bootstrap.intervals()["expected_win_rate"]
                rows[name].append((
                    float(((now.lower <= truth) & (truth <= now.upper)).mean()),
                    float(((before.lower <= truth) & (truth <= before.upper)).mean()),
                    float((now.upper - now.lower).mean()),
                    float((before.upper - before.lower).mean()),
                    fit.clipped_resamples / resamples,
                ))
        for name, found in rows.items():
            table = np.array(found)
            pooled["jackknife"].extend(table[:, 0])
            pooled["bca"].extend(table[:, 1])
            se = table[:, 0].std(ddof=1) / np.sqrt(len(table)) if len(table) > 1 else np.nan
            print(f"    {name:>7} {labels:>6} {table[:, 0].mean():>11.1%} {se:>6.1%} "
                  f"{table[:, 1].mean():>6.1%} {100 * table[:, 2].mean():>9.1f} "
                  f"{100 * table[:, 3].mean():>7.1f} {table[:, 4].mean():>8.1%}", flush=True)
    print(f"    pooled: jackknife t {np.mean(pooled['jackknife']):.1%}, "
          f"expanded BCa {np.mean(pooled['bca']):.1%}; widths in points of win rate")
    print("    promise: 95% (aim 93-97% in every cell)")


def consistency_scale() -> None:
    """(h) A judge that orders every pair of every task cleanly."""
    from konkord.stats.judges import task_consistency

    print("\n(h) consistency of a judge that orders every pair cleanly (one verdict per pair)")
    for n_models in (2, 5, 12):
        clean = np.triu(np.ones((n_models, n_models)), 1)
        wins = np.broadcast_to(clean, (1, 10, n_models, n_models)).copy()
        now = task_consistency(wins, n_resamples=50).mean[0]
        before = task_consistency(wins, n_resamples=50, prior=0.5).mean[0]
        print(f"    {n_models:>3} models: {now:.3f} (with the ranking's prior: {before:.3f})")
    print("    promise: near 100% whatever the number of models")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fields", type=int, default=200, help="simulated runs per cell")
    parser.add_argument("--resamples", type=int, default=500, help="bootstrap resamples")
    parser.add_argument("--only", default="all",
                        choices=["all", "separation", "agreement", "anchored", "consistency"],
                        help="run one section")
    parser.add_argument("--separation-fields", type=int, default=400,
                        help="simulated fields for (e)")
    parser.add_argument("--agreement-fields", type=int, default=400,
                        help="simulated datasets per cell of (f)")
    parser.add_argument("--anchored-fields", type=int, default=400,
                        help="simulated fields for (g)")
    parser.add_argument("--cap", type=int, default=2000, help="largest fresh study run in (e)")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.only == "all":
        coverage(args.fields, args.resamples)
        claims_and_groups(args.fields, args.resamples)
        position_bias(args.fields)
    if args.only in ("all", "separation"):
        separation_promise(args.separation_fields, min(args.resamples, 200), args.cap)
    if args.only in ("all", "agreement"):
        agreement_coverage(args.agreement_fields, min(args.resamples, 400))
    if args.only in ("all", "anchored"):
        anchored_coverage(args.anchored_fields, min(args.resamples, 300))
    if args.only in ("all", "consistency"):
        consistency_scale()
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
